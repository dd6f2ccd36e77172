"""run_shell: approval gate, exit code and streams, timeout and cancellation kill the group, output limit."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path

import pytest
from pydantic_ai import Agent, ApprovalRequired
from pydantic_ai.capabilities import HandleDeferredToolCalls
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from co_cli.deps import CoDeps
from co_cli.tools import build_toolset
from co_cli.tools.approval import make_approval_handler
from co_cli.tools.processes import kill_started_processes, marked_pids, owner_id, owner_of
from co_cli.tools.shell import (
    SHELL_REASON,
    BoundedCapture,
    effective_timeout,
    execute_command,
    run_shell,
    split_budget,
)
from tests.support.deps import ctx_for, make_deps
from tests.support.processes import assert_dies, process_alive, wait_for_file


@pytest.fixture
def deps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CoDeps:
    for name in list(os.environ):
        if name.startswith("CO_CLI_"):
            monkeypatch.delenv(name)
    # The process machinery as it works outside the sandbox (test_tools_sandbox.py runs commands inside it).
    return make_deps(tmp_path, shell_sandbox="off")


def shell(deps: CoDeps, command: str, timeout: float | None = None) -> str:
    return asyncio.run(run_shell(ctx_for(deps, approved=True), command, timeout))


def test_needs_approval_unless_approved_or_allowed(deps: CoDeps) -> None:
    with pytest.raises(ApprovalRequired) as raised:
        asyncio.run(run_shell(ctx_for(deps), "echo hi"))
    assert raised.value.metadata is not None
    assert raised.value.metadata["command"] == "echo hi"
    assert raised.value.metadata["reason"].startswith(SHELL_REASON)
    deps.state.approved_commands.add("echo hi")
    assert "hi" in asyncio.run(run_shell(ctx_for(deps), "echo hi"))
    with pytest.raises(ApprovalRequired):
        asyncio.run(run_shell(ctx_for(deps), "echo hi; rm -rf /nothing"))
    with pytest.raises(ApprovalRequired):
        asyncio.run(run_shell(ctx_for(deps), "echo"))


def test_exit_code_stdout_and_stderr(deps: CoDeps) -> None:
    result = shell(deps, "echo to-out; echo to-err >&2; exit 3")
    assert result.splitlines() == ["exit code: 3", "stdout:", "to-out", "stderr:", "to-err"]
    quiet = shell(deps, "true")
    assert quiet.splitlines() == ["exit code: 0", "stdout: (empty)", "stderr: (empty)"]


def test_runs_in_cwd_with_bash_and_empty_stdin(deps: CoDeps) -> None:
    result = shell(deps, 'pwd; echo "${BASH_VERSION:+bash}"; cat; echo after-cat')
    assert result.splitlines()[2:5] == [str(deps.cwd.resolve()), "bash", "after-cat"]


def test_environment_is_the_users(deps: CoDeps, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXAMPLE_API_KEY", "kept")
    assert "kept" in shell(deps, "echo $EXAMPLE_API_KEY")


def test_timeout_kills_the_process_group(deps: CoDeps) -> None:
    deps.settings.shell_timeout = 0.5
    pid_file = deps.cwd / "child.pid"
    started = time.monotonic()
    result = shell(deps, f"sleep 30 & echo $! > {pid_file}; echo started; wait")
    elapsed = time.monotonic() - started
    child = int(pid_file.read_text())
    assert elapsed < 10
    assert result.startswith("Timed out after 0.5 s")
    assert "killed by SIGTERM" in result
    assert "started" in result
    assert_dies(child)


def test_term_ignoring_command_is_killed(deps: CoDeps) -> None:
    deps.settings.shell_timeout = 0.3
    result = shell(deps, "trap '' TERM; sleep 30")
    assert result.startswith("Timed out after 0.3 s")
    assert "killed by SIGKILL" in result


def test_model_timeout_is_capped_by_the_setting(deps: CoDeps) -> None:
    assert effective_timeout(None, 60) == 60
    assert effective_timeout(5, 60) == 5
    assert effective_timeout(600, 60) == 60
    assert effective_timeout(0, 60) == 60
    deps.settings.shell_timeout = 30
    started = time.monotonic()
    assert shell(deps, "sleep 10", timeout=0.3).startswith("Timed out after 0.3 s")
    assert time.monotonic() - started < 5


def test_cancellation_kills_the_process_group(deps: CoDeps) -> None:
    pid_file = deps.cwd / "child.pid"

    async def cancel_midway() -> None:
        task = asyncio.ensure_future(run_shell(ctx_for(deps, approved=True), f"sleep 30 & echo $! > {pid_file}; wait"))
        await asyncio.to_thread(wait_for_file, pid_file)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_midway())
    assert_dies(int(pid_file.read_text()))


ESCAPES = {
    "setsid": "setsid sleep 300 & echo $! > {pid}",
    "setsid holding the output": "setsid bash -c 'echo $$ > {pid}; sleep 300' & sleep 0.2",
    "double fork": "( ( sleep 300 & echo $! > {pid} ) & ) ; sleep 0.2",
    "nohup setsid": "nohup setsid bash -c 'echo $$ > {pid}; exec sleep 300' >/dev/null 2>&1 & sleep 0.2",
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", list(ESCAPES.values()), ids=list(ESCAPES))
def test_a_process_that_left_the_group_is_killed_on_timeout(deps: CoDeps, command: str) -> None:
    deps.settings.shell_timeout = 1.0
    pid_file = deps.cwd / "escaped.pid"
    result = shell(deps, command.format(pid=pid_file) + "; sleep 30")
    assert result.startswith("Timed out after 1 s: the command and every process it started were killed.")
    assert_dies(int(wait_for_file(pid_file)))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", list(ESCAPES.values()), ids=list(ESCAPES))
def test_a_process_that_left_the_group_is_killed_on_cancel(deps: CoDeps, command: str) -> None:
    """Cancelled (Ctrl-C, SIGTERM): the tool returns at once even when an escaped process holds its output
    pipe, and that process dies too."""
    pid_file = deps.cwd / "escaped.pid"

    async def cancel_midway() -> float:
        task = asyncio.ensure_future(
            run_shell(ctx_for(deps, approved=True), command.format(pid=pid_file) + "; sleep 30")
        )
        await asyncio.to_thread(wait_for_file, pid_file)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - started

    assert asyncio.run(cancel_midway()) < 5
    assert_dies(int(pid_file.read_text()))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("escape", ["setsid sleep 300 &", "( sleep 300 & ) ;"], ids=["setsid", "double fork"])
def test_a_cancel_at_any_moment_of_the_start_returns_and_leaves_nothing(deps: CoDeps, escape: str) -> None:
    """Cancelled while bash is starting (its pipes not yet connected), with a child that holds them: the tool
    still returns at once and nothing it started goes on."""

    def ours() -> set[int]:
        return set(marked_pids(lambda mark: owner_of(mark) == owner_id()))

    async def cancel_after(steps: int) -> float:
        task = asyncio.ensure_future(run_shell(ctx_for(deps, approved=True), f"{escape} sleep 30"))
        for _ in range(steps):
            await asyncio.sleep(0)
        started = time.monotonic()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
        return time.monotonic() - started

    before = ours()
    for steps in range(16):  # each a different point of the start (and, past it, of the run)
        assert asyncio.run(cancel_after(steps)) < 5
        deadline = time.monotonic() + 5
        while left := ours() - before:
            assert time.monotonic() < deadline, f"left running after a cancel at step {steps}: {left}"
            time.sleep(0.02)


@pytest.mark.timeout(60)
def test_a_finished_command_escaped_child_is_killed_at_exit(deps: CoDeps) -> None:
    pid_file = deps.cwd / "escaped.pid"
    result = shell(deps, f"setsid sleep 300 >/dev/null 2>&1 < /dev/null & echo $! > {pid_file}")
    assert result.startswith("exit code: 0")
    escaped = int(wait_for_file(pid_file))
    assert process_alive(escaped)
    kill_started_processes()  # what co runs at exit
    assert_dies(escaped)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "escape",
    ["setsid /bin/sh {script} {quiet} & echo $! > {pid}", "( /bin/sh {script} {quiet} & echo $! > {pid} ) &"],
    ids=["setsid", "double fork"],
)
def test_escaped_children_caught_in_an_exec_are_killed_at_exit(deps: CoDeps, escape: str) -> None:
    """Each child runs ``exec`` over and over: its environment reads empty now and then, which must neither make
    co forget the command's mark when it finishes nor hide the child at exit."""
    script = deps.cwd / "loop.sh"
    script.write_text('exec /bin/sh "$0"\n')
    escaped = []
    for n in range(12):
        pid_file = deps.cwd / f"escaped-{n}.pid"
        command = escape.format(script=script, pid=pid_file, quiet=">/dev/null 2>&1 </dev/null")
        assert shell(deps, command).startswith("exit code: 0")
        escaped.append(int(wait_for_file(pid_file)))
    kill_started_processes()
    for pid in escaped:
        assert_dies(pid)


def test_output_limit_keeps_head_and_tail(deps: CoDeps) -> None:
    deps.settings.shell_output_limit = 1000
    result = shell(deps, "echo START; head -c 100000 /dev/zero | tr '\\0' a; echo; echo END")
    stdout = result.split("stdout:\n", 1)[1].split("\nstderr:", 1)[0]
    assert stdout.startswith("START\naaa")
    assert stdout.endswith("aaa\nEND")
    assert "output truncated: 100011 bytes in total" in stdout
    assert len(stdout) < 1000 + 200


def test_huge_output_stays_bounded(deps: CoDeps) -> None:
    deps.settings.shell_output_limit = 1000
    result = shell(deps, "yes | head -c 20000000; echo; echo LAST")
    assert "20000006 bytes in total" in result
    assert result.rstrip().endswith("LAST\nstderr: (empty)")
    assert len(result) < 1500


def test_output_budget_shared_between_streams() -> None:
    assert split_budget(10, 20, 100) == (10, 20)
    assert split_budget(10, 500, 100) == (10, 90)
    assert split_budget(500, 10, 100) == (90, 10)
    assert split_budget(500, 500, 100) == (50, 50)


def test_bounded_capture_keeps_head_and_tail() -> None:
    capture = BoundedCapture(4)
    for chunk in (b"abc", b"defgh", b"ijkl"):
        capture.feed(chunk)
    assert capture.total == 12
    assert not capture.complete
    assert bytes(capture.head) == b"abcd" and bytes(capture.tail) == b"ijkl"
    assert capture.shortened(4).startswith("ab\n[... output truncated: 12 bytes")
    assert capture.shortened(4).endswith("kl")
    small = BoundedCapture(4)
    small.feed(b"abcdef")
    assert small.complete and small.shortened(10) == "abcdef"


def test_missing_cwd_is_reported(tmp_path: Path) -> None:
    result = asyncio.run(execute_command("true", cwd=str(tmp_path / "gone"), timeout=5, output_limit=100))
    assert result.startswith("Error: cannot start bash")


def test_agent_runs_shell_after_approval(deps: CoDeps) -> None:
    returns: list[ToolReturnPart] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if sum(isinstance(message, ModelResponse) for message in messages) == 0:
            call = ToolCallPart("run_shell", {"command": "echo via-agent; exit 7"}, tool_call_id="s1")
            return ModelResponse(parts=[call])
        returns.extend(part for part in messages[-1].parts if isinstance(part, ToolReturnPart))
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(
        FunctionModel(respond),
        deps_type=CoDeps,
        toolsets=[build_toolset()],
        capabilities=[HandleDeferredToolCalls(handler=make_approval_handler(None, approve_all=True))],
    )
    assert agent.run_sync("run it", deps=deps).output == "done"
    assert len(returns) == 1
    assert str(returns[0].content).splitlines()[:3] == ["exit code: 7", "stdout:", "via-agent"]
