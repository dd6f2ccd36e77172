"""A stdio MCP server's stderr, kept on disk within a fixed size whatever the server writes.

The server writes into a pipe; a thread of co's reads it into ``<name>.log`` (0600), which keeps the first
``HEAD_BYTES`` of the run (how it started) and its latest ``TAIL_BYTES`` or so (why it stopped), with a line
between them saying how much was left out. The run before is kept as ``<name>.log.1``. What the server wrote
last is also kept in memory (``RECENT_BYTES``), so a failed start is explained without reading the file.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import TextIO

HEAD_BYTES = 64 * 1024
TAIL_BYTES = 960 * 1024
"""The file is at most about ``HEAD_BYTES + TAIL_BYTES`` (plus one line); after a cut it holds at least half
of ``TAIL_BYTES`` of the latest output."""
RECENT_BYTES = 4096
READ_BYTES = 65536
COPY_BYTES = 65536
LINE_SEARCH_BYTES = 4096
"""How far past a cut the tail may start, to start on a whole line."""
DROPPED = "\n[... {n} bytes of this server's stderr left out here by co ...]\n"


def _write_all(fd: int, data: bytes | memoryview, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


class BoundedLog:
    """A file that keeps the first ``head`` bytes written to it and the latest ones: past ``head + tail``, the
    older half of the tail is dropped (a line says how many bytes), so the file stays about ``head + tail``."""

    def __init__(self, path: Path, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> None:
        if tail < 4 * len(DROPPED) + 64:
            raise ValueError("the tail must leave room for the line that says what was left out")
        self.path = path
        self.head = head
        self.tail = tail
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        if hasattr(os, "fchmod"):  # an existing file keeps its mode through O_CREAT
            os.fchmod(self._fd, 0o600)
        self.size = 0
        """The file's size."""
        self.tail_start = 0
        """Where the kept tail starts in the file (after the head and the dropped line)."""
        self.dropped = 0
        self.written = 0
        """Bytes written to the log in all (kept or not)."""

    def write(self, data: bytes) -> None:
        self.written += len(data)
        if self.size < self.head:
            first = data[: self.head - self.size]
            _write_all(self._fd, first, self.size)
            self.size += len(first)
            self.tail_start = self.size
            data = data[len(first) :]
        if not data:
            return
        _write_all(self._fd, data, self.size)
        self.size += len(data)
        if self.size - self.tail_start > self.tail:
            self._cut()

    def _cut(self) -> None:
        """Drop the older half of the tail: the newer half moves up after the head and the dropped line."""
        keep_from = self.size - self.tail // 2
        window = os.pread(self._fd, min(LINE_SEARCH_BYTES, self.tail // 8), keep_from)
        newline = window.find(b"\n", 0, max(len(window) - 1, 0))
        if newline >= 0:
            keep_from += newline + 1  # start on a whole line
        self.dropped += keep_from - self.tail_start
        marker = DROPPED.format(n=f"{self.dropped:,}").encode()
        source, target = keep_from, self.head + len(marker)
        while source < self.size:  # the target is always before the source: a forward copy is safe
            chunk = os.pread(self._fd, min(COPY_BYTES, self.size - source), source)
            _write_all(self._fd, chunk, target)
            source += len(chunk)
            target += len(chunk)
        _write_all(self._fd, marker, self.head)
        os.ftruncate(self._fd, target)
        self.size, self.tail_start = target, self.head + len(marker)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


class StderrLog:
    """Where one run of a server writes its stderr (``writer``, handed to the MCP client), and the thread that
    keeps it in a ``BoundedLog``."""

    def __init__(self, directory: Path, name: str) -> None:
        self.path = directory / f"{name}.log"
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.path, directory / f"{name}.log.1")
        self.log = BoundedLog(self.path)
        read_end, write_end = os.pipe()
        self._read_end = read_end
        self.writer: TextIO = os.fdopen(write_end, "w")
        self._lock = threading.Lock()
        self._recent = bytearray()
        self._received = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._pump, name=f"mcp-stderr-{name}", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        failed = False
        try:
            while chunk := os.read(self._read_end, READ_BYTES):
                with self._lock:
                    self._received += len(chunk)
                    self._recent += chunk
                    del self._recent[:-RECENT_BYTES]
                    if not failed:
                        try:
                            self.log.write(chunk)
                        except OSError:  # a full disk: the pipe is still drained, or the server would block
                            failed = True
        except OSError:
            pass
        finally:
            os.close(self._read_end)
            self.log.close()
            self._done.set()

    @property
    def written(self) -> int:
        """Bytes the server has written so far (as read)."""
        with self._lock:
            return self._received

    def detach(self) -> None:
        """Let go of co's own copy of the pipe's write end (the server has stopped, or never started), so the
        thread ends once the server's processes are gone. The descriptor stays open on /dev/null: the number
        is never reused while the MCP client might still hand it to a process."""
        if self.writer.closed:
            return
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self.writer.fileno())
        finally:
            os.close(null)

    def close(self) -> None:
        """At the end of co's use of this run (the client is done with ``writer``)."""
        self.detach()
        with contextlib.suppress(OSError):
            self.writer.close()

    def settle(self, seconds: float = 1.0) -> None:
        """Wait (at most ``seconds``) until everything the server wrote is read: after ``detach``, with the
        server's processes gone."""
        self._done.wait(seconds)

    def last_line(self, since: int = 0) -> str:
        """The last non-empty line the server wrote after ``since`` bytes (of what is kept in memory), or ''."""
        with self._lock:
            recent = bytes(self._recent)
            after = self._received - since
        if after < len(recent):
            recent = recent[len(recent) - after :] if after > 0 else b""
        lines = [line.strip() for line in recent.decode("utf-8", "replace").splitlines() if line.strip()]
        return lines[-1] if lines else ""
