"""The console for a command's output: a terminal gets rich's layout at its width; a pipe or a file gets whole
lines (nothing wrapped at 80 columns) with no trailing padding, so the output can be read by other programs."""

from __future__ import annotations

import os
import shlex
import shutil
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


DEFAULT_PAGER = "less"
DEFAULT_LESS = "FRX"
"""As git sets it: quit at once when the text fits one screen, keep colours, leave the text on the screen."""


def pager_command() -> str | None:
    """The pager a terminal user gets: ``$PAGER``, else ``less`` (None when neither can be run)."""
    chosen = os.environ.get("PAGER", "").strip() or DEFAULT_PAGER
    try:
        program = shlex.split(chosen)[0]
    except (ValueError, IndexError):
        return None
    return chosen if shutil.which(program) else None


def page(console: Console, text: str) -> None:
    """``text`` (already without control characters) in the pager, or printed whole when there is none. The
    pager has the terminal until it is left (q); Ctrl-C there is the pager's."""
    import subprocess

    command = pager_command()
    if command is None or not console.is_terminal:
        console.print(text, markup=False, highlight=False, emoji=False)
        return
    env = {**os.environ, "LESS": os.environ.get("LESS", DEFAULT_LESS)}
    process = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, env=env)
    assert process.stdin is not None
    try:
        with process.stdin as pipe:
            pipe.write((text if text.endswith("\n") else text + "\n").encode("utf-8", "replace"))
    except (BrokenPipeError, KeyboardInterrupt):
        pass  # the pager was left before it read everything
    while True:
        try:
            process.wait()
            break
        except KeyboardInterrupt:
            continue  # as the pager itself does: Ctrl-C does not end it
