"""What the user sees: a pseudo-terminal's output replayed on a terminal emulator (pyte), scrollback included."""

from __future__ import annotations

import io
from pathlib import Path

import pexpect
import pyte

from tests.support.co_process import CO_COMMAND, co_environment

CURSOR_REQUEST = "\x1b[6n"


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


def spawn_with_toolbar(env: dict[str, str], cwd: Path) -> pexpect.spawn:
    """``co chat`` in a pseudo-terminal whose cursor-position requests the test answers: prompt-toolkit draws
    the bottom toolbar only once it knows where the cursor is."""
    environment = co_environment(env)
    environment.pop("PROMPT_TOOLKIT_NO_CPR", None)
    child = pexpect.spawn(
        CO_COMMAND[0], [*CO_COMMAND[1:], "chat"], env=environment, cwd=str(cwd), dimensions=(30, 140), timeout=20,
        encoding="utf-8", codec_errors="replace",
    )  # fmt: skip
    child.logfile_read = io.StringIO()
    return child


def settle(child: pexpect.spawn) -> list[str]:
    """Read what co draws after its prompt, answering its cursor-position requests as a terminal does; the
    screen."""
    answered = 0
    while True:
        child.expect(pexpect.TIMEOUT, timeout=0.7)
        log = child.logfile_read.getvalue()
        if log.count(CURSOR_REQUEST) == answered:
            return screen_lines(child)
        answered = log.count(CURSOR_REQUEST)
        rows, columns = child.getwinsize()
        screen = pyte.Screen(columns, rows)
        pyte.Stream(screen).feed(log)
        child.send(f"\x1b[{screen.cursor.y + 1};{screen.cursor.x + 1}R")


def watch(child: pexpect.spawn, seconds: float) -> list[str]:
    """Read what co draws for ``seconds``, answering each cursor-position request at once, as a terminal does (no
    key is pressed); the screen."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if child.expect_exact([CURSOR_REQUEST, pexpect.TIMEOUT], timeout=0.05) == 0:
            rows, columns = child.getwinsize()
            screen = pyte.Screen(columns, rows)
            pyte.Stream(screen).feed(child.logfile_read.getvalue())
            child.send(f"\x1b[{screen.cursor.y + 1};{screen.cursor.x + 1}R")
    return screen_lines(child)


def toolbar(lines: list[str]) -> str:
    """The bottom toolbar's line (the last one drawn; "" before it is)."""
    return next((line for line in reversed(lines) if " │ " in line), "")
