"""Approval flow through a real Agent: confinement, denial, "always" for exact commands, non-interactive."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import HandleDeferredToolCalls
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests, ToolApproved

from co_cli.deps import CoDeps
from co_cli.tools import build_toolset
from co_cli.tools.approval import (
    NON_INTERACTIVE_DENIED_MESSAGE,
    USER_DENIED_MESSAGE,
    ApprovalRequest,
    build_request,
    describe_call,
    make_approval_handler,
)
from co_cli.tools.paths import OUTSIDE_CWD_REASON
from tests.support.deps import make_deps


@pytest.fixture
def deps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CoDeps:
    for name in list(os.environ):
        if name.startswith("CO_CLI_"):
            monkeypatch.delenv(name)
    deps = make_deps(tmp_path)
    (deps.cwd / "inside.txt").write_text("inside line\n")
    (tmp_path / "secret.txt").write_text("outside secret\n")
    return deps


class Script:
    """A FunctionModel making the given tool calls one per step, then answering with the last tool result."""

    def __init__(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        self.calls = calls
        self.returns: list[ToolReturnPart] = []

    def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest):
            self.returns.extend(part for part in last.parts if isinstance(part, ToolReturnPart))
        step = sum(isinstance(message, ModelResponse) for message in messages)
        if step < len(self.calls):
            name, args = self.calls[step]
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call-{step}")])
        final = self.returns[-1].model_response_str() if self.returns else "no tools"
        return ModelResponse(parts=[TextPart(f"final: {final}")])


class Prompter:
    """Answers approval prompts from a list and records what was asked."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> str:
        self.asked.append(request)
        return self.answers.pop(0)


def run(script: Script, deps: CoDeps, ask: Prompter | None, *, approve_all: bool = False) -> str:
    agent = Agent(
        FunctionModel(script.respond),
        deps_type=CoDeps,
        toolsets=[build_toolset()],
        capabilities=[HandleDeferredToolCalls(handler=make_approval_handler(ask, approve_all=approve_all))],
    )
    return agent.run_sync("go", deps=deps).output


def test_inside_cwd_needs_no_approval(deps: CoDeps) -> None:
    script = Script([("read_file", {"path": "inside.txt"})])
    prompter = Prompter()
    output = run(script, deps, prompter)
    assert prompter.asked == []
    assert "inside line" in output


@pytest.mark.parametrize("path_kind", ["dotdot", "absolute", "symlink"])
def test_outside_cwd_asks_and_runs_when_approved(deps: CoDeps, path_kind: str) -> None:
    secret = deps.cwd.parent / "secret.txt"
    if path_kind == "dotdot":
        path = "../secret.txt"
    elif path_kind == "absolute":
        path = str(secret)
    else:
        (deps.cwd / "link.txt").symlink_to(secret)
        path = "link.txt"
    script = Script([("read_file", {"path": path})])
    prompter = Prompter("y")
    output = run(script, deps, prompter)
    assert len(prompter.asked) == 1
    asked = prompter.asked[0]
    assert asked.tool_name == "read_file"
    assert asked.reason == f"{OUTSIDE_CWD_REASON}: {secret.resolve()}"
    assert asked.command is None
    assert "outside secret" in output


@pytest.mark.parametrize(
    ("tool", "args"),
    [("list_dir", {"path": ".."}), ("grep", {"pattern": "secret", "path": ".."})],
)
def test_list_dir_and_grep_outside_cwd_ask(deps: CoDeps, tool: str, args: dict[str, Any]) -> None:
    prompter = Prompter("n")
    script = Script([(tool, args)])
    output = run(script, deps, prompter)
    assert [request.tool_name for request in prompter.asked] == [tool]
    assert output == f"final: {USER_DENIED_MESSAGE}"


def test_denial_reaches_model_and_run_continues(deps: CoDeps) -> None:
    script = Script([("run_shell", {"command": "echo hi"}), ("read_file", {"path": "inside.txt"})])
    prompter = Prompter("n")
    output = run(script, deps, prompter)
    denial = script.returns[0]
    assert denial.tool_name == "run_shell"
    assert denial.content == USER_DENIED_MESSAGE
    assert denial.outcome == "denied"
    assert "inside line" in output
    assert deps.state.approved_commands == set()


def test_shell_always_asks_even_with_y(deps: CoDeps) -> None:
    script = Script([("run_shell", {"command": "echo once"}), ("run_shell", {"command": "echo once"})])
    prompter = Prompter("y", "y")
    run(script, deps, prompter)
    assert [request.command for request in prompter.asked] == ["echo once", "echo once"]
    assert all("once" in str(part.content) for part in script.returns)
    assert deps.state.approved_commands == set()


def test_always_allows_only_the_exact_command(deps: CoDeps) -> None:
    script = Script(
        [
            ("run_shell", {"command": "echo same"}),
            ("run_shell", {"command": "echo same"}),
            ("run_shell", {"command": "echo same "}),
        ]
    )
    prompter = Prompter("a", "n")
    output = run(script, deps, prompter)
    assert [request.command for request in prompter.asked] == ["echo same", "echo same "]
    assert deps.state.approved_commands == {"echo same"}
    assert "exit code: 0" in str(script.returns[0].content)
    assert "exit code: 0" in str(script.returns[1].content)
    assert output == f"final: {USER_DENIED_MESSAGE}"


def test_always_on_a_file_tool_approves_once(deps: CoDeps) -> None:
    script = Script([("read_file", {"path": "../secret.txt"}), ("read_file", {"path": "../secret.txt"})])
    prompter = Prompter("a", "y")
    run(script, deps, prompter)
    assert len(prompter.asked) == 2
    assert deps.state.approved_commands == set()


def test_non_interactive_denies_with_message(deps: CoDeps) -> None:
    script = Script([("run_shell", {"command": "touch made.txt"})])
    output = run(script, deps, None)
    assert output == f"final: {NON_INTERACTIVE_DENIED_MESSAGE}"
    assert "--approve-all" in NON_INTERACTIVE_DENIED_MESSAGE
    assert not (deps.cwd / "made.txt").exists()


def test_approve_all_runs_without_asking(deps: CoDeps) -> None:
    script = Script([("run_shell", {"command": "touch made.txt"}), ("read_file", {"path": "../secret.txt"})])
    output = run(script, deps, None, approve_all=True)
    assert (deps.cwd / "made.txt").exists()
    assert "outside secret" in output


def test_handler_uses_deps_getter(deps: CoDeps) -> None:
    other = CoDeps(settings=deps.settings, paths=deps.paths, cwd=deps.cwd, store=deps.store)
    handler = make_approval_handler(Prompter("a"), approve_all=False, deps_getter=lambda: other)
    call = ToolCallPart("run_shell", {"command": "ls"}, tool_call_id="c1")
    requests = DeferredToolRequests(approvals=[call], metadata={"c1": {"reason": "runs a shell command"}})
    results = asyncio.run(handler(None, requests))  # type: ignore[arg-type]
    assert results is not None
    assert isinstance(results.approvals["c1"], ToolApproved)
    assert other.state.approved_commands == {"ls"}
    assert deps.state.approved_commands == set()
    assert asyncio.run(handler(None, DeferredToolRequests())) is None  # type: ignore[arg-type]


def test_describe_call_shows_exact_command_and_paths() -> None:
    assert describe_call("run_shell", {"command": "rm -rf build && make"}) == "run_shell: rm -rf build && make"
    assert describe_call("run_shell", {"command": "echo a\nrm x"}) == "run_shell: 'echo a\\nrm x'"
    assert describe_call("run_shell", {"command": "ls", "timeout": 5}) == "run_shell: ls  (timeout 5 s)"
    assert describe_call("read_file", {"path": "../x.txt"}) == "read_file: ../x.txt"
    assert describe_call("list_dir", {}) == "list_dir: ."
    assert describe_call("grep", {"pattern": "a.c", "path": "/etc", "glob": "*.conf"}) == (
        "grep: 'a.c' in /etc (files *.conf)"
    )
    assert "\n" not in describe_call("read_file", {"path": "a\nb"})
    assert describe_call("other", {"x": 1}) == "other(x=1)"


def test_build_request_reason_and_command() -> None:
    request = build_request("read_file", {"path": "../a"}, {"reason": OUTSIDE_CWD_REASON, "path": "/tmp/a"})
    assert request.reason == f"{OUTSIDE_CWD_REASON}: /tmp/a"
    assert request.command is None
    shell = build_request("run_shell", {"command": "ls"}, None)
    assert shell.command == "ls"
    assert shell.reason
