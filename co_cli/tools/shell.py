"""run_shell: a bash command in the working directory, run only with the user's approval."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import os
import signal
import threading
import time
from types import FrameType

from pydantic_ai import ApprovalRequired, RunContext

from co_cli.deps import CoDeps
from co_cli.tools.paths import working_dir

SHELL_REASON = "runs a shell command"
READ_CHUNK_BYTES = 65536
TERM_GRACE_SECONDS = 1.0
DRAIN_SECONDS = 2.0


class BoundedCapture:
    """Keeps the first and last ``keep`` bytes of a stream and counts the rest."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.keep:
                del self.tail[: len(self.tail) - self.keep]

    @property
    def complete(self) -> bool:
        return self.total == len(self.head) + len(self.tail)

    def size(self) -> int:
        """Characters when nothing was dropped, else the byte count (an upper bound)."""
        return len(self.text()) if self.complete else self.total

    def text(self) -> str:
        return bytes(self.head + self.tail).decode("utf-8", errors="replace")

    def shortened(self, budget: int) -> str:
        """The captured text, cut to about ``budget`` characters keeping head and tail, with a marker."""
        if self.complete:
            text = self.text()
            if len(text) <= budget:
                return text
            head_text, tail_text = text, text
        else:
            head_text = bytes(self.head).decode("utf-8", errors="replace")
            tail_text = bytes(self.tail).decode("utf-8", errors="replace")
        head_chars = budget // 2
        tail_chars = budget - head_chars
        tail_part = tail_text[-tail_chars:] if tail_chars else ""
        marker = (
            f"\n[... output truncated: {self.total} bytes in total; "
            f"the first {head_chars} and last {tail_chars} characters are shown ...]\n"
        )
        return head_text[:head_chars] + marker + tail_part


def split_budget(stdout_size: int, stderr_size: int, limit: int) -> tuple[int, int]:
    """Share ``limit`` characters between stdout and stderr; a short stream stays whole."""
    if stdout_size + stderr_size <= limit:
        return stdout_size, stderr_size
    half = limit // 2
    if stdout_size <= half:
        return stdout_size, limit - stdout_size
    if stderr_size <= half:
        return limit - stderr_size, stderr_size
    return half, limit - half


def effective_timeout(requested: float | None, configured: float) -> float:
    """The model may ask for a shorter timeout than the configured one, never a longer one."""
    if requested is None or requested <= 0:
        return configured
    return min(requested, configured)


EXIT_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))

_live_groups: set[int] = set()
"""Process groups of commands started by this process that may still have members (their ids are the
commands' pids). Each command runs in its own session, so closing the terminal does not reach it: co
kills these groups when it exits."""

COMMAND_MARK = "CO_CLI_COMMAND"
"""Every command's environment holds ``CO_CLI_COMMAND=<co's pid>-<n>``, which whatever it starts inherits:
a process that left the command's group (``setsid``, a double fork) is still found by it (on Linux, through
``/proc/<pid>/environ``) and killed with the group."""
_live_marks: set[str] = set()
_mark_count = itertools.count(1)


def _new_mark() -> str:
    return f"{os.getpid()}-{next(_mark_count)}"


def _marked_processes(marks: set[str]) -> list[int]:
    """Pids of this user's processes whose environment carries one of ``marks`` (none where ``/proc`` is
    missing)."""
    if not marks:
        return []
    wanted = {f"{COMMAND_MARK}={mark}".encode() for mark in marks}
    found: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    own = os.getpid()
    for entry in entries:
        if not entry.isdigit() or int(entry) == own:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                variables = handle.read().split(b"\0")
        except OSError:  # gone, or another user's
            continue
        if any(variable in wanted for variable in variables):
            found.append(int(entry))
    return found


def _kill_marked(marks: set[str]) -> int:
    """SIGKILL every process carrying one of ``marks``, until none is left; how many were killed."""
    killed = 0
    for _ in range(5):  # a process may fork while the others are killed
        pids = _marked_processes(marks)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
    return killed


def track_process_group(pgid: int) -> None:
    """Kill this process group too when co exits, however it exits (e.g. an MCP server, which runs in a session
    of its own and may outlive its stdin)."""
    _live_groups.add(pgid)
    install_exit_handlers()


def forget_process_group(pgid: int) -> None:
    _live_groups.discard(pgid)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):  # gone (or the id now belongs to someone else's group)
        return False
    return True


def live_groups() -> set[int]:
    """The process groups of commands this process started that still have members."""
    for pgid in [pgid for pgid in _live_groups if not _group_alive(pgid)]:
        _live_groups.discard(pgid)
    return set(_live_groups)


def kill_live_groups() -> None:
    """SIGKILL every process group a command started that is still alive, and every process that left one
    (at exit: nothing may outlive co)."""
    for pgid in live_groups():
        _signal_group(pgid, signal.SIGKILL)
        _live_groups.discard(pgid)
    _kill_marked(_live_marks)
    _live_marks.clear()


atexit.register(kill_live_groups)


def _kill_groups_and_die(signum: int, frame: FrameType | None) -> None:
    kill_live_groups()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def install_exit_handlers() -> None:
    """Make SIGTERM and SIGHUP (terminal closed) kill the commands' process groups before co ends.

    Only replaces the default action, and only in the main thread (where Python runs signal handlers);
    while a turn runs, the chat loop's own handlers cancel the turn instead.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in EXIT_SIGNALS:
        if signal.getsignal(sig) == signal.SIG_DFL:
            signal.signal(sig, _kill_groups_and_die)


async def _exited(process: asyncio.subprocess.Process, seconds: float) -> bool:
    """Whether the command's own process has exited within ``seconds``. Not ``process.wait()``: that also
    waits for the output pipes to close, which a process that left the group may keep open for ever."""
    deadline = time.monotonic() + seconds
    while process.returncode is None:
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def kill_process_group(process: asyncio.subprocess.Process, mark: str) -> None:
    """SIGTERM the command's process group, give it a moment, then SIGKILL whatever is left of it and every
    process it started elsewhere."""
    _signal_group(process.pid, signal.SIGTERM)
    await _exited(process, TERM_GRACE_SECONDS)
    _signal_group(process.pid, signal.SIGKILL)
    _kill_marked({mark})
    await _exited(process, TERM_GRACE_SECONDS)


async def _pump(stream: asyncio.StreamReader, capture: BoundedCapture) -> None:
    while chunk := await stream.read(READ_CHUNK_BYTES):
        capture.feed(chunk)


def _close_pipes(process: asyncio.subprocess.Process) -> None:
    """Close the command's pipes now: left open (a process that escaped still holds them), asyncio would
    close them at exit, after its loop is gone ("Event loop is closed")."""
    transport = getattr(process, "_transport", None)
    if transport is not None:
        transport.close()


def format_result(exit_code: int | None, stdout: str, stderr: str, timed_out_after: float | None) -> str:
    lines: list[str] = []
    if timed_out_after is not None:
        lines.append(f"Timed out after {timed_out_after:g} s: the command and every process it started were killed.")
    if exit_code is not None and exit_code < 0:
        lines.append(f"exit code: {exit_code} (killed by {signal.Signals(-exit_code).name})")
    else:
        lines.append(f"exit code: {exit_code}")
    lines.append("stdout:" + ("\n" + stdout.rstrip("\n") if stdout else " (empty)"))
    lines.append("stderr:" + ("\n" + stderr.rstrip("\n") if stderr else " (empty)"))
    return "\n".join(lines)


async def _start(command: str, cwd: str, mark: str) -> asyncio.subprocess.Process:
    """Start ``bash -c command`` in a new process group, tracked in ``_live_groups``.

    The start is shielded from cancellation: cancelled while it connects the pipes, asyncio would kill
    bash alone and then wait for every pipe to close, which a background child holding them never does.
    Here a cancelled start lets the process come up, kills its whole group, then lets the cancellation on.
    """
    starting = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            "bash",
            "-c",
            command,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            env={**os.environ, COMMAND_MARK: mark},
        )
    )
    try:
        process = await asyncio.shield(starting)
    except asyncio.CancelledError:
        with contextlib.suppress(OSError):
            process = await starting
            _live_groups.add(process.pid)
            _signal_group(process.pid, signal.SIGKILL)
            await process.wait()
        raise
    _live_groups.add(process.pid)
    return process


async def execute_command(command: str, *, cwd: str, timeout: float, output_limit: int) -> str:
    """Run ``command`` with ``bash -c`` in its own process group; return exit code, stdout and stderr as text.

    The process group is killed on timeout and when the caller is cancelled. Output beyond
    ``output_limit`` characters keeps its head and tail around a marker. Standard input is empty.

    The environment is the user's own, unfiltered, API keys included: the command is the one the user
    read and approved, run as if typed in their shell, and stripping variables would break the tools
    (git, cloud CLIs, package managers) that the user expects to work there. co adds ``COMMAND_MARK``.
    """
    mark = _new_mark()
    _live_marks.add(mark)
    try:
        process = await _start(command, cwd, mark)
    except OSError as exc:
        return f"Error: cannot start bash: {exc.strerror or exc}"
    assert process.stdout is not None and process.stderr is not None
    out, err = BoundedCapture(output_limit * 4), BoundedCapture(output_limit * 4)
    pumps = [
        asyncio.ensure_future(_pump(process.stdout, out)),
        asyncio.ensure_future(_pump(process.stderr, err)),
    ]
    waiter = asyncio.ensure_future(process.wait())
    timed_out_after: float | None = None
    try:
        _, pending = await asyncio.wait([waiter, *pumps], timeout=timeout)
        if pending:
            timed_out_after = timeout
            await kill_process_group(process, mark)
            # A process that escaped (a cleared environment) may still hold the pipes: read a little more.
            await asyncio.wait(pumps, timeout=DRAIN_SECONDS)
    except BaseException:  # cancelled (Ctrl-C, SIGTERM, SIGHUP): nothing the command started may go on
        _signal_group(process.pid, signal.SIGKILL)
        _kill_marked({mark})
        raise
    finally:
        for task in (waiter, *pumps):
            task.cancel()
        if process.returncode is None:
            _signal_group(process.pid, signal.SIGKILL)
            await asyncio.shield(_exited(process, TERM_GRACE_SECONDS))
        _close_pipes(process)
        if not _group_alive(process.pid):  # else something it started in the background lives on until exit
            _live_groups.discard(process.pid)
        if not _marked_processes({mark}):
            _live_marks.discard(mark)
    out_budget, err_budget = split_budget(out.size(), err.size(), output_limit)
    return format_result(process.returncode, out.shortened(out_budget), err.shortened(err_budget), timed_out_after)


async def run_shell(ctx: RunContext[CoDeps], command: str, timeout: float | None = None) -> str:
    """Run a bash command in the working directory and return its exit code, stdout and stderr.

    The user approves each command. It gets no standard input and is killed after the timeout.

    Args:
        command: The bash command line to run.
        timeout: Seconds before the command is killed; at most (and by default) the configured limit.
    """
    if not ctx.tool_call_approved and command not in ctx.deps.state.approved_commands:
        raise ApprovalRequired(metadata={"reason": SHELL_REASON, "command": command})
    settings = ctx.deps.settings
    return await execute_command(
        command,
        cwd=str(working_dir(ctx.deps)),
        timeout=effective_timeout(timeout, settings.shell_timeout),
        output_limit=settings.shell_output_limit,
    )
