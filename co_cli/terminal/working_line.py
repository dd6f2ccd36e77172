"""The working line: while co waits (for the model, a tool, a compaction, the memory), one live line says what
it waits for, for how long, and how to stop it. It is transient: nothing of it stays on the screen once the
answer starts or the wait ends."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from co_cli.terminal_text import printable

if TYPE_CHECKING:
    from rich.live import Live

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
STOP_HINT = "Esc or Ctrl-C to stop"
MAX_WHAT_CHARS = 80


class _Line:
    """What the live area draws on each refresh: the spinner, what co waits for and the seconds so far."""

    def __init__(self, what: str, hint: str) -> None:
        self.what = what
        self.hint = hint
        self.since = time.monotonic()

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        elapsed = time.monotonic() - self.since
        frame = SPINNER[int(elapsed * 10) % len(SPINNER)]
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"{frame} ", style="cyan")
        line.append(self.what, style="cyan")
        line.append(f" · {int(elapsed)}s", style="dim")
        if self.hint:
            line.append(f" · {self.hint}", style="dim")
        yield line


def shorten(what: str, limit: int = MAX_WHAT_CHARS) -> str:
    """One line of at most ``limit`` characters, control characters and line breaks removed."""
    line = " ".join(printable(what).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class WorkingLine:
    """``show(what)`` starts the line or changes what it says (the seconds count from the change); ``hide``
    removes it and leaves nothing behind."""

    def __init__(self, console: Console, hint: str = STOP_HINT) -> None:
        self.console = console
        self.hint = hint
        self._live: Live | None = None
        self._line: _Line | None = None

    @property
    def shown(self) -> bool:
        return self._live is not None

    def show(self, what: str) -> None:
        what = shorten(what)
        if self._line is not None and self._live is not None:
            if self._line.what != what:
                self._line = _Line(what, self.hint)
                self._live.update(self._line, refresh=True)
            return
        from rich.live import Live

        self._line = _Line(what, self.hint)
        self._live = Live(self._line, console=self.console, refresh_per_second=10, transient=True)
        self._live.start(refresh=True)

    def hide(self) -> None:
        if self._live is not None:
            self._live.stop()
        self._live = None
        self._line = None
