"""The processes co starts (shell commands, stdio MCP servers) and everything they start: ended when co ends,
and by the next co when this one could not end them (killed with SIGKILL).

Two handles on them:

- **A process group.** Each command and each stdio server runs in a session of its own (closing the terminal does
  not reach it); co kills the group when it ends, however it ends (exit, SIGTERM, SIGHUP).
- **A mark in the environment**, ``CO_CLI_OWNER=<owner>/<what>-<n>``, which every process they start inherits, so
  one that left the group (``setsid``, a double fork) is still found, through ``/proc/<pid>/environ`` of the
  user's own processes (on Linux). ``<owner>`` names the co process that started it: its pid, its start time
  and its pid namespace. A co whose processes outlive it (it was killed with SIGKILL) cannot end them itself:
  the next co finds the marks whose owner no longer runs and ends those processes (``end_orphans``). A mark is
  only ever acted on when its owner is this process, or when its owner is certainly gone (no process with that
  pid and that start time in this pid namespace): a process co did not start carries no mark, and a running
  co's processes are never touched by another.

A process reads as having an empty environment while it is in the middle of an ``exec`` (the kernel sets the new
program's environment last), so a look that finds one retries it for a moment before giving up on it: a child
caught in its ``exec`` is not missed. A process that clears its environment (``env -i``) and leaves the group
is out of reach.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

MARK_VARIABLE = "CO_CLI_OWNER"
PROC = Path("/proc")

SETTLE_SECONDS = 2.0
"""How long a process whose environment reads empty (in the middle of an exec) is looked at again."""
SETTLE_STEP = 0.005
CLEARED_READS = 5
"""Empty reads in a row, with the same command line each time, that mean the process cleared its environment
(it is not in the middle of an exec)."""
EXIT_WAIT_SECONDS = 2.0
"""How long killed processes get to be gone before the next look (for what they started meanwhile)."""
KILL_ROUNDS = 5
PF_KTHREAD = 0x00200000
EXIT_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


# ----- the mark ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Stat:
    ppid: int
    state: str
    flags: int
    started: int
    """Clock ticks after boot."""

    @property
    def running(self) -> bool:
        """Not a zombie, not a kernel thread."""
        return self.state not in "ZXx" and not self.flags & PF_KTHREAD


def _stat(pid: int | str) -> _Stat | None:
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # after the command name, which may hold anything
    try:
        return _Stat(int(fields[1]), fields[0], int(fields[6]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def _namespace() -> str:
    try:
        link = os.readlink(PROC / "self" / "ns" / "pid")  # "pid:[4026531836]"
    except OSError:
        return "0"
    return "".join(char for char in link if char.isdigit()) or "0"


@functools.cache
def owner_id() -> str:
    """This process as a mark names it: ``<pid>.<start time>.<pid namespace>``."""
    stat = _stat("self")
    return f"{os.getpid()}.{stat.started if stat else 0}.{_namespace()}"


_counter = itertools.count(1)
_marked_any = False


def new_mark(what: str) -> str:
    """A mark for one command or server this process starts (``what``: ``shell``, ``mcp``)."""
    global _marked_any
    _marked_any = True
    return f"{owner_id()}/{what}-{next(_counter)}"


def marked_environment(mark: str) -> dict[str, str]:
    """The variable to add to a process's environment."""
    return {MARK_VARIABLE: mark}


def owner_of(mark: str) -> str:
    return mark.split("/", 1)[0]


def _owner_gone(owner: str) -> bool:
    """The co process ``owner`` names certainly no longer runs (False when that cannot be known here)."""
    pid, _, rest = owner.partition(".")
    started, _, namespace = rest.partition(".")
    if not (pid.isdigit() and started.isdigit() and namespace.isdigit()) or namespace != _namespace():
        return False  # not a mark this co wrote, or one of another pid namespace: not ours to judge
    if owner == owner_id():
        return False
    stat = _stat(pid)
    return stat is None or not stat.running or stat.started != int(started)


# ----- finding marked processes -----------------------------------------------------------------------------


@dataclass
class _Process:
    pid: int
    handle: int | None
    """A pidfd: a signal sent through it reaches this process, never one that took its pid later."""
    mark: str = ""
    command_line: bytes | None = None
    empty_reads: int = 0

    def close(self) -> None:
        if self.handle is not None:
            with contextlib.suppress(OSError):
                os.close(self.handle)
            self.handle = None


def _read(pid: int, name: str) -> bytes | None:
    try:
        with open(PROC / str(pid) / name, "rb") as handle:
            return handle.read()
    except OSError:  # gone, or not ours to read
        return None


def _mark_in(environment: bytes) -> str:
    prefix = MARK_VARIABLE.encode() + b"="
    for variable in environment.split(b"\0"):
        if variable.startswith(prefix):
            return variable[len(prefix) :].decode("utf-8", "replace")
    return ""


def _own_processes(exclude: set[int]) -> Iterator[int]:
    """Pids of this user's processes, but for ``exclude``."""
    try:
        entries = os.listdir(PROC)
    except OSError:
        return
    uid = os.getuid()
    for entry in entries:
        if not entry.isdigit() or int(entry) in exclude:
            continue
        with contextlib.suppress(OSError):
            if os.stat(PROC / entry).st_uid == uid:
                yield int(entry)


def _ancestors() -> set[int]:
    """This process and the ones it descends from (never ended by it)."""
    found = {os.getpid()}
    pid = os.getppid()
    while pid > 1 and pid not in found:
        found.add(pid)
        stat = _stat(pid)
        if stat is None:
            break
        pid = stat.ppid
    return found


def _open(pid: int) -> _Process | None:
    try:
        return _Process(pid, os.pidfd_open(pid))
    except ProcessLookupError:
        return None
    except (AttributeError, OSError):  # no pidfds here: the pid itself
        return _Process(pid, None)


def _look(process: _Process) -> str:
    """``marked``, ``unmarked``, ``gone`` or ``unsettled`` (an empty environment that may be an exec's)."""
    environment = _read(process.pid, "environ")
    if environment is None:
        return "gone"
    if environment:
        process.mark = _mark_in(environment)
        return "marked" if process.mark else "unmarked"
    stat = _stat(process.pid)
    if stat is None or not stat.running:
        return "gone"  # a zombie or a kernel thread: nothing to end
    command_line = _read(process.pid, "cmdline")
    if command_line and command_line == process.command_line:
        process.empty_reads += 1
    else:
        process.empty_reads = 1
    process.command_line = command_line
    return "unmarked" if process.empty_reads >= CLEARED_READS else "unsettled"


def _find(choose: Callable[[str], bool], exclude: set[int]) -> list[_Process]:
    """This user's processes whose mark ``choose`` accepts, each with a handle to signal it by (close them)."""
    found: list[_Process] = []
    unsettled: list[_Process] = []

    def sort(process: _Process, outcome: str) -> None:
        if outcome == "marked" and choose(process.mark):
            found.append(process)
        elif outcome == "unsettled":
            unsettled.append(process)
        else:
            process.close()

    for pid in _own_processes(exclude):
        process = _open(pid)
        if process is not None:
            sort(process, _look(process))
    deadline = time.monotonic() + SETTLE_SECONDS
    while unsettled and time.monotonic() < deadline:
        time.sleep(SETTLE_STEP)
        again, unsettled = unsettled, []
        for process in again:
            sort(process, _look(process))
    for process in unsettled:
        process.close()
    return found


def marked_pids(choose: Callable[[str], bool]) -> list[int]:
    """Pids of this user's processes (other than this one) whose mark ``choose`` accepts."""
    found = _find(choose, {os.getpid()})
    for process in found:
        process.close()
    return [process.pid for process in found]


# ----- ending them ------------------------------------------------------------------------------------------


def _send(process: _Process, sig: int) -> bool:
    try:
        if process.handle is not None:
            signal.pidfd_send_signal(process.handle, sig)
        else:
            os.kill(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _wait_gone(processes: list[_Process], seconds: float) -> None:
    """Until every process has exited (a pidfd reads ready then), at most ``seconds``."""
    deadline = time.monotonic() + seconds
    waiting = list(processes)
    while waiting:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        handles = [p.handle for p in waiting if p.handle is not None]
        if handles:
            ready, _, _ = select.select(handles, [], [], min(remaining, 0.1))
            waiting = [p for p in waiting if p.handle is not None and p.handle not in ready]
        else:
            time.sleep(min(remaining, 0.01))
            waiting = [p for p in waiting if (stat := _stat(p.pid)) is not None and stat.running]


def kill_marked(choose: Callable[[str], bool], *, exclude: set[int] | None = None) -> int:
    """SIGKILL every process whose mark ``choose`` accepts, looking again until none is left (a process may
    start another while the others are killed); how many were killed."""
    exclude = exclude if exclude is not None else {os.getpid()}
    killed = 0
    for _ in range(KILL_ROUNDS):
        found = _find(choose, exclude)
        if not found:
            break
        try:
            killed += sum(_send(process, signal.SIGKILL) for process in found)
            _wait_gone(found, EXIT_WAIT_SECONDS)
        finally:
            for process in found:
                process.close()
    return killed


def kill_marks(marks: set[str]) -> int:
    """Kill every process carrying one of ``marks`` (a command or a server and all it started)."""
    if not marks:
        return 0
    return kill_marked(lambda mark: mark in marks)


def end_orphans() -> int:
    """Kill what a co that is gone left running (it was killed with SIGKILL): every process of this user whose
    mark names an owner that no longer runs. This process and its ancestors are never touched. How many."""
    judged: dict[str, bool] = {}

    def orphaned(mark: str) -> bool:
        owner = owner_of(mark)
        if owner not in judged:
            judged[owner] = _owner_gone(owner)
        return judged[owner]

    return kill_marked(orphaned, exclude=_ancestors())


# ----- process groups, and the end of co --------------------------------------------------------------------

_live_groups: set[int] = set()
"""Process groups of commands and servers started by this process that may still have members (each id is its
leader's pid)."""


def track_process_group(pgid: int) -> None:
    """Kill this process group too when co ends, however it ends."""
    _live_groups.add(pgid)
    install_exit_handlers()


def forget_process_group(pgid: int) -> None:
    _live_groups.discard(pgid)


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):  # gone (or the id now belongs to someone else's group)
        return False
    return True


def live_groups() -> set[int]:
    """The process groups this process started that still have members."""
    for pgid in [pgid for pgid in _live_groups if not group_alive(pgid)]:
        _live_groups.discard(pgid)
    return set(_live_groups)


def kill_started_processes() -> None:
    """SIGKILL every process group this process started and every process carrying its mark (at exit: nothing
    co started may outlive it)."""
    for pgid in live_groups():
        signal_group(pgid, signal.SIGKILL)
        _live_groups.discard(pgid)
    if _marked_any:
        own = owner_id()
        kill_marked(lambda mark: owner_of(mark) == own)


atexit.register(kill_started_processes)


def _kill_and_die(signum: int, frame: FrameType | None) -> None:
    kill_started_processes()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def install_exit_handlers() -> None:
    """Make SIGTERM and SIGHUP (terminal closed) kill what co started before co ends.

    Only replaces the default action, and only in the main thread (where Python runs signal handlers); while a
    turn runs, the chat loop's own handlers cancel the turn instead.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in EXIT_SIGNALS:
        if signal.getsignal(sig) == signal.SIG_DFL:
            signal.signal(sig, _kill_and_die)
