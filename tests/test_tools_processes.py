"""What co starts carries a mark in its environment: found however it left its group, even in the middle of an
exec; ended at exit, and by the next co when its owner was killed with SIGKILL; never a process co did not
start, nor one whose owner still runs."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from co_cli.tools import processes
from co_cli.tools.processes import (
    MARK_VARIABLE,
    end_orphans,
    kill_marks,
    marked_pids,
    new_mark,
    owner_id,
)
from tests.support.processes import assert_dies, process_alive

pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="marks are found through /proc")

REPO = Path(__file__).resolve().parent.parent
EXEC_LOOP = 'exec /bin/sh "$0"\n'
"""A process that runs ``exec`` again and again: its environment reads empty a few percent of the time."""


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts; killed and reaped whatever the test left."""
    made: list[subprocess.Popen[bytes]] = []
    yield made
    for process in made:
        if process.poll() is None:
            process.kill()
        process.wait()


def start(made: list[subprocess.Popen[bytes]], command: list[str], mark: str | None) -> int:
    env = {k: v for k, v in os.environ.items() if k != MARK_VARIABLE}
    env["PYTHONPATH"] = str(REPO)
    if mark is not None:
        env[MARK_VARIABLE] = mark
    process = subprocess.Popen(command, env=env, start_new_session=True)
    made.append(process)
    return process.pid


def reap(made: list[subprocess.Popen[bytes]]) -> None:
    """Collect the exit of the killed ones (they are this test's children)."""
    for process in made:
        if process.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=0.01)


def test_a_process_in_the_middle_of_an_exec_is_found_every_time(
    started: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    script = tmp_path / "loop.sh"
    script.write_text(EXEC_LOOP)
    mark = new_mark("test")
    looping = [start(started, ["/bin/sh", str(script)], mark) for _ in range(3)]
    time.sleep(0.05)
    for _ in range(150):  # one look each time: a miss is a process left running at exit
        assert sorted(marked_pids(lambda m: m == mark)) == sorted(looping)
    assert kill_marks({mark}) == 3
    for pid in looping:
        assert_dies(pid)


def test_a_cleared_environment_costs_a_look_only_briefly(started: list[subprocess.Popen[bytes]]) -> None:
    """A process with no environment at all (``env -i``) is not taken for one in the middle of an exec for long."""
    start(started, ["env", "-i", "sleep", "30"], None)
    time.sleep(0.2)
    began = time.monotonic()
    assert marked_pids(lambda m: True) is not None
    assert time.monotonic() - began < processes.SETTLE_SECONDS / 2


def test_kill_marks_reaches_every_descendant_and_nothing_else(started: list[subprocess.Popen[bytes]]) -> None:
    mark, other = new_mark("test"), new_mark("test")
    tree = start(started, ["bash", "-c", "setsid sleep 300 & (sleep 300 &) ; sleep 300 & wait"], mark)
    neighbour = start(started, ["sleep", "300"], other)
    unmarked = start(started, ["sleep", "300"], None)
    deadline = time.monotonic() + 5
    while len(marked_pids(lambda m: m == mark)) < 4:  # bash, its sleep, the setsid one, the double-forked one
        assert time.monotonic() < deadline
        time.sleep(0.02)
    descendants = marked_pids(lambda m: m == mark)
    assert kill_marks({mark}) == 4
    for pid in [tree, *descendants]:
        assert_dies(pid)
    assert process_alive(neighbour) and process_alive(unmarked)


def _exited_pid(started: list[subprocess.Popen[bytes]]) -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_orphans_of_a_gone_owner_are_ended_and_nothing_else(started: list[subprocess.Popen[bytes]]) -> None:
    _, start_time, namespace = owner_id().split(".")
    keeper = start(started, ["sleep", "300"], None)  # a live co stand-in: its real identity
    keeper_stat = processes._stat(keeper)
    assert keeper_stat is not None
    marks = {
        "gone owner": f"{_exited_pid(started)}.{start_time}.{namespace}/shell-1",
        "pid taken by another process": f"{keeper}.{keeper_stat.started + 1}.{namespace}/mcp-1",
        "zombie owner": "",
        "live owner": f"{keeper}.{keeper_stat.started}.{namespace}/mcp-2",
        "this process": f"{owner_id()}/shell-9",
        "other pid namespace": f"{_exited_pid(started)}.{start_time}.{int(namespace) + 1}/shell-1",
        "not co's": "12345/shell-1",
        "odd": "x.y.z/../..",
    }
    zombie = subprocess.Popen(["true"])  # exited, not reaped: a zombie co counts as gone
    started.append(zombie)
    while (stat := processes._stat(zombie.pid)) is not None and stat.state != "Z":
        time.sleep(0.01)
    zombie_stat = processes._stat(zombie.pid)
    assert zombie_stat is not None
    marks["zombie owner"] = f"{zombie.pid}.{zombie_stat.started}.{namespace}/shell-2"
    pids = {name: start(started, ["sleep", "300"], mark) for name, mark in marks.items()}
    unmarked = start(started, ["sleep", "300"], None)
    time.sleep(0.1)

    assert end_orphans() >= 3  # another co's leftovers on this machine may be ended too
    reap(started)
    ended = {"gone owner", "pid taken by another process", "zombie owner"}
    for name, pid_of in pids.items():
        if name in ended:
            assert_dies(pid_of)
        else:
            assert process_alive(pid_of), name
    assert process_alive(unmarked) and process_alive(keeper)


def test_ancestors_are_never_ended(started: list[subprocess.Popen[bytes]], tmp_path: Path) -> None:
    """A co started by a command of a co that was killed (the command carries the dead co's mark) ends that
    co's other leftovers, never the command it runs in."""
    _, start_time, namespace = owner_id().split(".")
    dead = f"{_exited_pid(started)}.{start_time}.{namespace}/shell-1"
    sibling = start(started, ["sleep", "300"], dead)
    report = tmp_path / "report"
    code = (
        "import os, sys\n"
        "from co_cli.tools.processes import end_orphans\n"
        "end_orphans()\n"
        f"open({str(report)!r}, 'w').write(str(os.getppid()))\n"
    )
    parent = start(
        started,
        ["bash", "-c", f'{sys.executable} -c "$0"; sleep 300', code],
        dead,
    )
    deadline = time.monotonic() + 30
    while not report.exists() or not report.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    reap(started)
    assert int(report.read_text()) == parent
    assert process_alive(parent)
    assert_dies(sibling)
