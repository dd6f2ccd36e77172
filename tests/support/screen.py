"""What the user sees: a pseudo-terminal's output replayed on a terminal emulator (pyte), scrollback included."""

from __future__ import annotations

import io

import pexpect
import pyte


def screen_lines(child: pexpect.spawn) -> list[str]:
    """Every line the terminal shows or has scrolled away, after replaying all of ``child``'s output."""
    log = child.logfile_read
    assert isinstance(log, io.StringIO), "spawn the child with spawn_co (it keeps what was printed)"
    rows, columns = child.getwinsize()
    screen = pyte.HistoryScreen(columns, rows, history=10_000)
    pyte.Stream(screen).feed(log.getvalue())
    scrolled = ["".join(line[x].data for x in range(columns)).rstrip() for line in screen.history.top]
    return [*scrolled, *(line.rstrip() for line in screen.display)]


def line_colour(child: pexpect.spawn, text: str) -> str:
    """The colour (pyte's name, "default" when none) of the first character of the last line holding ``text``."""
    log = child.logfile_read
    assert isinstance(log, io.StringIO), "spawn the child with spawn_co (it keeps what was printed)"
    rows, columns = child.getwinsize()
    screen = pyte.HistoryScreen(columns, rows, history=10_000)
    pyte.Stream(screen).feed(log.getvalue())
    lines = [*screen.history.top, *(screen.buffer[row] for row in range(rows))]
    for line in reversed(lines):
        shown = "".join(line[x].data for x in range(columns))
        if text in shown:
            return str(line[shown.index(text)].fg)
    raise AssertionError(f"{text!r} is not on the screen")
