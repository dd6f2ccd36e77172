"""What the chat asks of the user and the keys it reads while work runs: a yes/no or one-line question, and Esc,
Ctrl-C, SIGTERM and SIGHUP stopping a turn or a compaction rather than co."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from co_cli.terminal.app_output import ChatOutput
from co_cli.terminal.working_line import WorkingLine

if TYPE_CHECKING:
    from pydantic_ai import CancellationToken

    from co_cli.terminal.turn_input import TurnInput

T = TypeVar("T")


class ChatInput(ChatOutput):
    """The chat's questions and its keys during work (``ChatApp`` sets the keyboard and the running turn)."""

    keys: TurnInput
    _token: CancellationToken | None

    async def confirm(self, question: str) -> bool:
        """A yes/no question (no by default); in piped mode there is nobody to ask and the answer is yes."""
        if not self.interactive:
            return True
        answer = await self.ask(f"{question} [y/N] ")
        return (answer or "").strip().lower() in ("y", "yes")

    async def ask(self, question: str, default: str = "") -> str | None:
        """One line of answer from the user (the line starts as ``default``); None when nobody can be asked
        (piped mode) or the user pressed Ctrl-C or Ctrl-D."""
        if not self.interactive:
            self.note(f"{question}(no terminal to ask: discarded)")
            return None
        from prompt_toolkit import PromptSession

        try:
            return await PromptSession[str]().prompt_async(question, default=default)
        except (KeyboardInterrupt, EOFError):
            return None

    async def cancellable(self, work: Coroutine[Any, Any, T], status: str) -> T | None:
        """Run ``work`` under the working line saying ``status``; Esc or Ctrl-C cancels it (None) and not co."""
        task = asyncio.ensure_future(work)
        line = WorkingLine(self.console)
        try:
            with self._stoppable(task.cancel):
                if self.interactive:
                    line.show(status)
                return await task
        except asyncio.CancelledError:
            return None
        finally:
            line.hide()

    def cancel_turn(self) -> None:
        if self._token is not None:
            self._token.cancel()

    @contextlib.contextmanager
    def _stoppable(self, cancel: Callable[[], object]) -> Iterator[None]:
        """While a turn or a compaction runs: Ctrl-C (and SIGTERM, SIGHUP: ``_on_sigint``) and, in a terminal, Esc
        call ``cancel``; keys typed meanwhile are kept for the next prompt."""
        with self._on_sigint(asyncio.get_running_loop(), cancel), self.keys.reading(cancel):
            yield

    @contextlib.contextmanager
    def _on_sigint(self, loop: asyncio.AbstractEventLoop, cancel: Callable[[], object]) -> Iterator[None]:
        """Ctrl-C while a turn (or a compaction) runs cancels that only, not co. SIGTERM and SIGHUP (terminal
        closed) cancel it too, which kills the commands it started, then end co with status 128 + signal."""
        from co_cli.tools.processes import EXIT_SIGNALS, install_exit_handlers

        # asyncio signal handlers exist only on Unix and only in the main thread; elsewhere Ctrl-C stays default.
        installed = sys.platform != "win32" and threading.current_thread() is threading.main_thread()
        ending: list[int] = []

        def end(signum: int) -> None:
            ending.append(signum)
            cancel()

        if installed:
            loop.add_signal_handler(signal.SIGINT, cancel)
            for sig in EXIT_SIGNALS:
                loop.add_signal_handler(sig, end, sig)
        try:
            yield
        finally:
            if installed:
                for sig in (signal.SIGINT, *EXIT_SIGNALS):
                    loop.remove_signal_handler(sig)
                install_exit_handlers()  # between turns, SIGTERM/SIGHUP still kill what commands left running
            if ending:
                if self._conv is not None:
                    self._conv.release()  # the session is free for the next co at once
                raise SystemExit(128 + ending[0])
