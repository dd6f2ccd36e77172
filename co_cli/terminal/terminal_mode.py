"""The terminal's line discipline while a turn runs, and the keys read meanwhile.

Between prompts the terminal is in its normal (cooked) mode, so keys typed while an answer streams are
echoed into the middle of the live area, and Ctrl-C both echoes ``^C`` and makes the kernel discard output
not yet written. Either leaves the live area's redraw one line off, and part of the answer is shown twice.
While a turn runs, co turns echo off and asks the kernel to keep pending output on a signal (``NOFLSH``);
the mode is restored afterwards.

Keys are read one at a time meanwhile (no line buffering), so Esc can stop the turn as Ctrl-C does. Other
keys are kept and handed to the next prompt, as a terminal would have kept them; escape sequences (arrow
keys and the like) are dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

ESC = b"\x1b"


@contextlib.contextmanager
def quiet_input(stream: TextIO | None = None, *, keys_one_at_a_time: bool = False) -> Iterator[bool]:
    """No echo of typed keys and no output flush on Ctrl-C, for the duration (a no-op off a terminal).
    With ``keys_one_at_a_time`` also no line buffering, so a key can be read as it is pressed. Yields whether
    the terminal's mode was changed."""
    stream = stream or sys.stdin
    try:
        import termios

        fd = stream.fileno()
        if not stream.isatty():
            raise OSError
        saved = termios.tcgetattr(fd)
    except (ImportError, OSError, ValueError):
        yield False
        return
    changed: list[Any] = list(saved)
    changed[3] = (changed[3] & ~(termios.ECHO | termios.ECHOCTL)) | termios.NOFLSH
    if keys_one_at_a_time:
        changed[3] &= ~termios.ICANON
        changed[6] = list(saved[6])
        changed[6][termios.VMIN] = 1
        changed[6][termios.VTIME] = 0
    try:
        termios.tcsetattr(fd, termios.TCSANOW, changed)
    except termios.error:
        yield False
        return
    try:
        yield True
    finally:
        with contextlib.suppress(termios.error):
            termios.tcsetattr(fd, termios.TCSANOW, saved)


class TurnKeys:
    """Reads the keys pressed while a turn runs: Esc calls ``on_escape``; the rest is kept (``typed``) for
    the next prompt. ``pause`` stops reading (another reader, the approval question, takes the keys) and
    forgets what was typed so far: nothing typed before a question may answer it or follow it."""

    def __init__(self, on_escape: Callable[[], object], stream: TextIO | None = None) -> None:
        self.on_escape = on_escape
        self.stream = stream or sys.stdin
        self.typed = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fd: int | None = None

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Quiet input with keys read one at a time, for the duration (only quiet where keys cannot be read)."""
        with quiet_input(self.stream, keys_one_at_a_time=True) as changed:
            if changed:
                self._loop = asyncio.get_running_loop()
                self._fd = self.stream.fileno()
                self.resume()
            try:
                yield
            finally:
                self.pause(forget=False)
                self._fd = None

    def pause(self, *, forget: bool = True) -> None:
        if self._loop is not None and self._fd is not None:
            self._loop.remove_reader(self._fd)
        if forget:
            self.typed = ""

    def resume(self) -> None:
        if self._loop is not None and self._fd is not None:
            self._loop.add_reader(self._fd, self._read)

    def _read(self) -> None:
        assert self._fd is not None
        try:
            data = os.read(self._fd, 1024)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.pause(forget=False)
            return
        if not data:
            self.pause(forget=False)  # end of input: nothing more to read
            return
        if data == ESC:
            self.on_escape()
            return
        text = data.decode("utf-8", "replace")
        if not text.startswith("\x1b"):
            self.typed += text
