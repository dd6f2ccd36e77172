"""The console for a command's output: a terminal gets rich's layout at its width; a pipe or a file gets whole
lines (nothing wrapped at 80 columns) with no trailing padding, so the output can be read by other programs."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.console import Console

PIPE_WIDTH = 10_000
"""Wide enough that no title, snippet or line of a message is wrapped when the output is not a terminal."""


class TrimmedLines:
    """A text stream that writes each line to ``out`` without its trailing spaces."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._pending = ""

    def write(self, text: str) -> int:
        *lines, self._pending = (self._pending + text).split("\n")
        for line in lines:
            self.out.write(line.rstrip(" ") + "\n")
        return len(text)

    def flush(self) -> None:
        if self._pending.strip(" "):
            self.out.write(self._pending)
            self._pending = ""
        self.out.flush()

    def isatty(self) -> bool:
        return False


def output_console(out: TextIO | None = None) -> Console:
    """A console printing to ``out`` (stdout): as rich does on a terminal, as whole trimmed lines elsewhere."""
    from rich.console import Console

    out = out or sys.stdout
    if out.isatty():
        return Console(file=out)
    return Console(file=TrimmedLines(out), width=PIPE_WIDTH, no_color=True, color_system=None)  # type: ignore[arg-type]
