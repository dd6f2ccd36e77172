"""`co chat`: wires settings, store, model and conversation together and picks the input mode."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

from co_cli.config import LoadedSettings, load_settings


@dataclass(frozen=True)
class ChatOptions:
    model: str | None = None
    prompt: str | None = None
    resume: str | None = None  # an id/prefix, or "@latest"
    fork: bool = False
    approve_all: bool = False
    save: bool = True


def run_chat(options: ChatOptions) -> int:
    loaded = load_settings(model=options.model)
    return asyncio.run(_chat(options, loaded))


async def _chat(options: ChatOptions, loaded: LoadedSettings) -> int:
    from rich.console import Console

    from co_cli.deps import CoDeps
    from co_cli.errors import SessionNotFound
    from co_cli.models import resolve_model
    from co_cli.repl.app import ChatApp
    from co_cli.repl.conversation import Conversation

    settings, paths = loaded.settings, loaded.paths
    interactive = options.prompt is None and sys.stdin.isatty() and sys.stdout.isatty()
    console = Console(highlight=False)

    store = None
    if options.save:
        from co_cli.store.sessions import SessionStore

        paths.ensure_data_dir()
        store = SessionStore.open(paths.db)

    session = None
    if options.resume is not None:
        assert store is not None
        session = store.latest() if options.resume == "@latest" else store.get(options.resume)
        if session is None:
            raise SessionNotFound("no saved sessions to resume yet")
        if options.model is None and session.model:
            settings = settings.model_copy(update={"model": session.model})

    source = loaded.sources.get("model", "default")
    _install_local_spinner(console if interactive else None)
    resolved = resolve_model(settings, source)
    deps = CoDeps(settings=settings, paths=paths, cwd=Path.cwd(), store=store)
    app: ChatApp | None = None

    async def ask(request):  # type: ignore[no-untyped-def]
        assert app is not None
        return await app.ask_approval(request)

    conv = Conversation(
        resolved=resolved,
        deps=deps,
        store=store,
        ask_approval=ask if interactive and not options.approve_all else None,
        approve_all=options.approve_all,
    )
    try:
        if session is not None:
            assert store is not None
            if options.fork:
                session = store.fork(session.id)
            conv.load(session)
        app = ChatApp(conv, loaded, interactive=interactive, console=console)
        if options.prompt is not None:
            return await app.run_once(options.prompt)
        if not interactive:
            if session is not None:
                app.show_resumed()
            return await app.run_lines(sys.stdin)
        await app.run_interactive()
        return 0
    finally:
        conv.release()
        if store is not None:
            store.close()


def _install_local_spinner(console: object | None) -> None:
    """Show a spinner while the embedded model loads (interactive only)."""
    if console is None:
        return
    from rich.console import Console

    assert isinstance(console, Console)
    try:
        from co_cli.local.model import LocalModel
    except ImportError:
        return
    LocalModel.on_load = lambda name: console.status(f"Loading {name}…")
