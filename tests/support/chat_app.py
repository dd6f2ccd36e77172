"""A ``ChatApp`` driven in process, as piped stdin drives it: lines in, what the user sees out.

The app runs over a real ``Conversation`` (a pydantic-ai ``FunctionModel``) and a real store in tmp_path, so
a test of a slash command asserts both what is printed and what is saved. Nothing is faked but the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from rich.console import Console

from co_cli.store import Store
from co_cli.terminal.app import ChatApp
from co_cli.terminal.piped import run_lines

if TYPE_CHECKING:
    from pydantic_ai.models.function import FunctionModel

    from co_cli.session import Conversation
    from tests.support.turn_core import Core


@dataclass(frozen=True)
class Printed:
    """What one run of lines printed, and how it ended."""

    code: int
    out: str
    """stdout: answers and command output."""
    err: str
    """stderr: errors ("error: ...") and notes (e.g. the resume preview)."""

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


class ChatRun:
    """One ``ChatApp`` in piped mode over ``core``'s store (a scratch one with ``saved=False``); each ``send`` is
    one run of ``piped.run_lines``."""

    def __init__(self, core: Core, model: FunctionModel, *, summarizer: Any = None, saved: bool = True) -> None:
        self._scratch: Store | None = None
        if not saved:
            # As `co chat --no-save` runs: on a store of its own in a scratch directory, memory off, and the app
            # told it is not saving (the saved sessions are out of reach).
            self._scratch = Store.open(core.cwd.parent / "scratch" / "sessions.db")
            settings = core.loaded.settings.model_copy(update={"memory": False})
            core = replace(core, store=self._scratch, loaded=replace(core.loaded, settings=settings))
        self.core = core
        self._out = io.StringIO()
        self._err = io.StringIO()
        self._seen = (0, 0)
        with contextlib.redirect_stderr(self._err):  # the plain view keeps the stderr it was built with
            self.conv: Conversation = core.conversation(model, summarizer=summarizer)
            console = Console(file=self._out, width=120, no_color=True, highlight=False)
            self.app = ChatApp(
                self.conv,
                core.loaded,
                choice=self.conv.resolved.choice,
                store=core.store,
                saving=saved,
                interactive=False,
                console=console,
                out=self._out,
            )

    def send(self, *lines: str) -> Printed:
        """Type ``lines`` (prompts and slash commands) as piped input; what they printed and the exit code."""
        self.app.running = True
        self.app.errors = 0
        with contextlib.redirect_stderr(self._err):
            code = asyncio.run(run_lines(self.app, io.StringIO("".join(f"{line}\n" for line in lines))))
        out, err = self._out.getvalue(), self._err.getvalue()
        printed = Printed(code, out[self._seen[0] :], err[self._seen[1] :])
        self._seen = (len(out), len(err))
        return printed

    def close(self) -> None:
        """Close the scratch store of an unsaved run (the saved store is the fixture's)."""
        if self._scratch is not None:
            self._scratch.close()
