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
