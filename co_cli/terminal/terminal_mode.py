"""The terminal's line discipline while a turn streams.

Between prompts the terminal is in its normal (cooked) mode, so keys typed while an answer streams are
echoed into the middle of the live area, and Ctrl-C both echoes ``^C`` and makes the kernel discard output
not yet written. Either leaves the live area's redraw one line off, and part of the answer is shown twice.
While a turn runs, co turns echo off and asks the kernel to keep pending output on a signal (``NOFLSH``);
the mode is restored afterwards.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import TextIO


@contextlib.contextmanager
def quiet_input(stream: TextIO | None = None) -> Iterator[None]:
    """No echo of typed keys and no output flush on Ctrl-C, for the duration (a no-op off a terminal)."""
    stream = stream or sys.stdin
    try:
        import termios

        fd = stream.fileno()
        if not stream.isatty():
            raise OSError
        saved = termios.tcgetattr(fd)
    except (ImportError, OSError, ValueError):
        yield
        return
    changed = list(saved)
    changed[3] = (changed[3] & ~(termios.ECHO | termios.ECHOCTL)) | termios.NOFLSH
    try:
        termios.tcsetattr(fd, termios.TCSANOW, changed)
    except termios.error:
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(termios.error):
            termios.tcsetattr(fd, termios.TCSANOW, saved)
