"""What every route module is handed: ``ServeContext``.

- ``settings``, ``paths``, ``cwd``: the server's (its working directory's instructions files and project
  memories apply to every request);
- ``store``: the session database (the same file as the terminal's). Read it for listings and transcripts:
  ``store.sessions.list()``, ``store.sessions.get(id_or_prefix)``, ``store.search.messages(query)``,
  ``store.messages.transcript(id)``, ``store.compactions``, ``store.pins.active(id)``, ``store.tasks.latest(id)``,
  ``store.usage``; never write it directly;
- ``chats``: runs a turn as the REPL does (``await ctx.chats.start(TurnRequest(...))`` then ``async for event in
  turn.events()``), the only way a route writes a session;
- ``models``: the configured model and the models a request may name;
- ``token``: what every API request must carry; ``sign_in``: the browser's one-time link and the keys it is
  exchanged for (``auth.py``);
- ``stopping``: set once the server begins to stop, for work that must end then (``limits.py``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from co_cli.config import LoadedSettings, Paths, Settings
from co_cli.serve.auth import BrowserSignIn
from co_cli.serve.chats import Chats
from co_cli.serve.served_models import ServedModels
from co_cli.store import Store


@dataclass
class ServeContext:
    loaded: LoadedSettings
    store: Store
    cwd: Path
    token: str
    models: ServedModels
    chats: Chats
    sign_in: BrowserSignIn
    stopping: threading.Event = field(default_factory=threading.Event)

    @property
    def settings(self) -> Settings:
        return self.loaded.settings

    @property
    def paths(self) -> Paths:
        return self.loaded.paths
