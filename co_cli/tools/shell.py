"""run_shell: a bash command in the working directory, run only with the user's approval (or a command rule the
user keeps for the project, see ``project_trust.prefix_allows``), in the sandbox where the machine allows it
(``tools.sandbox``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path

from pydantic_ai import ApprovalRequired, RunContext

from co_cli.deps import CoDeps
from co_cli.project_trust import command_rule
from co_cli.tools.paths import is_inside, own_files, working_dir
from co_cli.tools.processes import (
    forget_process_group,
    group_alive,
    kill_marks,
    marked_environment,
    new_mark,
    signal_group,
    track_process_group,
)
from co_cli.tools.sandbox import Confinement, blocked_by_sandbox, confinement

SANDBOX_HINT = (
    "\n[co's sandbox may have stopped this command: it could write only in {writable}{network}. To run it "
    "outside the sandbox, call run_shell again with sandbox=false: the user is asked (just this once). The user "
    "can also turn the sandbox off for this session with /sandbox off (or allow the network with /sandbox "
    'network), or in their own settings: "shell_sandbox": "off" or "shell_network": true.]'
)
NOT_SANDBOXED_NOTE = (
    "\n[This command ran without a sandbox: {reason}. Commands run as in the user's own shell until then.]"
)

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
    signal_group(process.pid, signal.SIGTERM)
    await _exited(process, TERM_GRACE_SECONDS)
    signal_group(process.pid, signal.SIGKILL)
    await asyncio.to_thread(kill_marks, {mark})
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


async def _start(command: str, cwd: str, mark: str, prefix: tuple[str, ...] = ()) -> asyncio.subprocess.Process:
    """Start ``bash -c command`` in a new process group, tracked until it has no members
    (``processes.track_process_group``).

    The start is shielded from cancellation: cancelled while it connects the pipes, asyncio would kill
    bash alone and then wait for every pipe to close, which a background child holding them never does.
    Here a cancelled start lets the process come up, kills its whole group and every process carrying its
    mark, waits for bash's exit only (not for its pipes: a child that left the group may hold them for ever),
    then lets the cancellation on.
    """
    starting = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *prefix,
            "bash",
            "-c",
            command,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            env={**os.environ, **marked_environment(mark)},
        )
    )
    try:
        process = await asyncio.shield(starting)
    except asyncio.CancelledError:
        with contextlib.suppress(OSError):
            process = await starting
            track_process_group(process.pid)
            signal_group(process.pid, signal.SIGKILL)
            kill_marks({mark})
            await _exited(process, TERM_GRACE_SECONDS)
            _close_pipes(process)
        raise
    track_process_group(process.pid)
    return process


async def execute_command(
    command: str, *, cwd: str, timeout: float, output_limit: int, confined: Confinement | None = None
) -> str:
    """Run ``command`` with ``bash -c`` in its own process group; return exit code, stdout and stderr as text.
    ``confined`` (a sandbox) puts its words before ``bash``; a failure that looks like the sandbox's ends with
    what to do about it.

    The process group is killed on timeout and when the caller is cancelled. Output beyond
    ``output_limit`` characters keeps its head and tail around a marker. Standard input is empty.

    The environment is the user's own, unfiltered, API keys included: the command is the one the user
    read and approved, run as if typed in their shell, and stripping variables would break the tools
    (git, cloud CLIs, package managers) that the user expects to work there. co adds its mark
    (``processes.MARK_VARIABLE``), by which whatever the command starts is found and killed with it.
    """
    mark = new_mark("shell")
    try:
        process = await _start(command, cwd, mark, confined.prefix if confined is not None else ())
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
        signal_group(process.pid, signal.SIGKILL)
        kill_marks({mark})
        raise
    finally:
        for task in (waiter, *pumps):
            task.cancel()
        if process.returncode is None:
            signal_group(process.pid, signal.SIGKILL)
            await asyncio.shield(_exited(process, TERM_GRACE_SECONDS))
        _close_pipes(process)
        if not group_alive(process.pid):  # else something it started in the background lives on until exit
            forget_process_group(process.pid)
    out_budget, err_budget = split_budget(out.size(), err.size(), output_limit)
    result = format_result(process.returncode, out.shortened(out_budget), err.shortened(err_budget), timed_out_after)
    if confined is not None and blocked_by_sandbox(confined, process.returncode, out.text() + err.text()):
        writable = " and ".join(str(path) for path in confined.writable)
        result += SANDBOX_HINT.format(writable=writable, network="" if confined.network else ", with no network")
    return result


def shell_confinement(deps: CoDeps, sandbox: bool = True) -> tuple[Confinement, bool]:
    """How a command runs (the session's ``/sandbox`` choice, else the settings) and whether it runs outside the
    sandbox only because the call asked to (``sandbox=False`` where it would have been sandboxed)."""
    settings, state = deps.settings, deps.state
    mode = state.shell_sandbox or settings.shell_sandbox
    network = settings.shell_network if state.shell_network is None else state.shell_network
    cwd = working_dir(deps)
    protected = (*own_files(deps).roots, deps.paths.project_settings.parent.resolve())
    read_only = tuple(dict.fromkeys(path for path in protected if path != cwd and is_inside(cwd, path)))
    confined = confinement(mode, network, cwd, read_only)
    if sandbox or not confined.sandboxed or mode == "on":
        return confined, False
    return confinement("off", True, cwd), True


def _question(command: str, confined: Confinement, outside: bool, noted: bool) -> dict[str, object]:
    """What the approval question says about the command: how it runs, and whether "a" may allow it again."""
    if outside:
        why = "OUTSIDE the sandbox, as asked: it may write anywhere you can and use the network"
        return {"reason": f"{SHELL_REASON} {why}", "command": command, "once": True}
    shown = confined.describe() if not noted or confined.sandboxed else "not sandboxed"
    return {"reason": f"{SHELL_REASON}; {shown}", "command": command}


def _refusal(deps: CoDeps, confined: Confinement, sandbox: bool) -> str:
    """Why the command may not run at all ("" if it may): ``shell_sandbox`` "on" and no sandbox, or a call asking
    to run outside it."""
    if (deps.state.shell_sandbox or deps.settings.shell_sandbox) != "on":
        return ""
    if confined.unavailable:
        return f'Error: not run: shell_sandbox is "on" and {confined.unavailable}. The user can allow it: /sandbox off.'
    if not sandbox:
        return 'Error: not run outside the sandbox: shell_sandbox is "on". The user can allow it: /sandbox off.'
    return ""


def _allowed_without_asking(deps: CoDeps, command: str) -> bool:
    """The exact command allowed for the session ("a"), or a command rule the user keeps for this project (not
    under ``co serve``: through the server only what changes nothing runs)."""
    if command in deps.state.approved_commands:
        return True
    if deps.origin == "serve":
        return False
    return command_rule(deps.paths.user_settings.parent, Path(deps.project), command) is not None


async def run_shell(ctx: RunContext[CoDeps], command: str, timeout: float | None = None, sandbox: bool = True) -> str:
    """Run a bash command in the working directory and return its exit code, stdout and stderr.

    The user approves each command. It gets no standard input and is killed after the timeout. Where the
    machine allows it, it runs in a sandbox: it may write only in the working directory and TMPDIR, and may not
    use the network.

    Args:
        command: The bash command line to run.
        timeout: Seconds before the command is killed; at most (and by default) the configured limit.
        sandbox: False runs it outside the sandbox; only after it failed because of the sandbox (the user is
            asked every time).
    """
    deps = ctx.deps
    confined, outside = await asyncio.to_thread(shell_confinement, deps, sandbox)
    refused = _refusal(deps, confined, sandbox)
    if refused:
        return refused
    if not ctx.tool_call_approved and (outside or not _allowed_without_asking(deps, command)):
        raise ApprovalRequired(metadata=_question(command, confined, outside, deps.state.sandbox_noted))
    settings = deps.settings
    result = await execute_command(
        command,
        cwd=str(working_dir(deps)),
        timeout=effective_timeout(timeout, settings.shell_timeout),
        output_limit=settings.shell_output_limit,
        confined=confined,
    )
    if confined.unavailable and not deps.state.sandbox_noted:
        deps.state.sandbox_noted = True
        result += NOT_SANDBOXED_NOTE.format(reason=confined.unavailable)
    return result
