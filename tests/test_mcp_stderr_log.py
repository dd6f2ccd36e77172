"""An MCP server's stderr log stays within a fixed size: the start of the run, a line saying how much was left
out, and the latest output; what the server said last is kept in memory."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from co_cli.tools.mcp.stderr_log import DROPPED, BoundedLog, StderrLog

MARKER = re.compile(rb"\n\[\.\.\. ([\d,]+) bytes of this server's stderr left out here by co \.\.\.\]\n")

chunks = st.lists(
    st.one_of(
        st.binary(min_size=1, max_size=300),
        st.builds(lambda n, w: (w * n)[:n], st.integers(1, 3000), st.sampled_from([b"line\n", b"x", b"ab\ncd"])),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chunks=chunks, head=st.integers(0, 400), tail=st.integers(4 * len(DROPPED) + 64, 2000))
def test_the_file_is_the_head_a_count_and_the_latest_bytes(chunks: list[bytes], head: int, tail: int) -> None:
    stream = b"".join(chunks)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "s.log"
        log = BoundedLog(path, head=head, tail=tail)
        for chunk in chunks:
            log.write(chunk)
        log.close()
        saved = path.read_bytes()
        assert (path.stat().st_mode & 0o777) == 0o600
    assert log.written == len(stream)
    assert len(saved) <= head + len(DROPPED) + 20 + tail
    found = MARKER.search(saved, head)
    if found is None or found.start() != head:
        assert saved == stream  # nothing was left out
        return
    kept_head, kept_tail = saved[:head], saved[found.end() :]
    dropped = int(found.group(1).replace(b",", b""))
    assert kept_head == stream[:head]
    assert stream.endswith(kept_tail) and len(kept_tail) >= tail * 3 // 8
    assert head + dropped + len(kept_tail) == len(stream)  # the count is exact


def test_a_cut_starts_the_tail_on_a_whole_line(tmp_path: Path) -> None:
    log = BoundedLog(tmp_path / "s.log", head=100, tail=4000)
    for n in range(2000):
        log.write(f"line {n:05d} of the server's output\n".encode())
    log.close()
    text = (tmp_path / "s.log").read_text()
    tail = text.split("left out here by co ...]\n", 1)[1]
    assert tail.startswith("line ") and tail.endswith("line 01999 of the server's output\n")


def _wait_done(log: StderrLog) -> None:
    log.detach()
    log.settle(5)


def test_the_pipe_is_read_to_the_end_and_the_run_before_is_kept(tmp_path: Path) -> None:
    (tmp_path / "srv.log").write_text("the run before\n")
    log = StderrLog(tmp_path, "srv")
    big = b"noise " * 400_000 + b"\nfatal: the last words\n"  # 2.4 MB: more than the file keeps
    log.writer.buffer.write(big)  # as a server would, through the pipe
    log.writer.flush()
    _wait_done(log)
    assert log.written == len(big)
    assert log.last_line() == "fatal: the last words"
    assert log.last_line(since=len(big)) == ""  # nothing after that point
    saved = (tmp_path / "srv.log").read_bytes()
    assert saved.startswith(b"noise noise") and saved.endswith(b"fatal: the last words\n")
    assert len(saved) < 1_100_000
    assert (tmp_path / "srv.log.1").read_text() == "the run before\n"
    log.close()


def test_a_line_without_end_is_cut_to_what_is_kept(tmp_path: Path) -> None:
    log = StderrLog(tmp_path, "srv")
    log.writer.write("started\n" + "z" * 100_000)  # no line break at all in the last 100 kB
    log.writer.flush()
    _wait_done(log)
    assert log.last_line() == "z" * 4096  # what co keeps in memory, whatever the line's length
    log.close()


def test_detach_lets_the_reader_end_only_once_the_server_side_is_closed(tmp_path: Path) -> None:
    log = StderrLog(tmp_path, "srv")
    server_side = os.dup(log.writer.fileno())  # the server's copy
    log.detach()
    log.settle(0.2)
    assert not log._done.is_set()
    os.write(server_side, b"still writing\n")
    os.close(server_side)
    log.settle(5)
    assert log._done.is_set() and log.last_line() == "still writing"
    log.close()
