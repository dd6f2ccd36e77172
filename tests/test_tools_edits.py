"""write_file and edit_file through a real Agent: the diff is the question, nothing is written before "yes",
the file's encoding and line ends are kept, the path rules of read_file hold, and every change is kept first."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import HandleDeferredToolCalls
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from co_cli.deps import CoDeps
from co_cli.store.file_changes import FileChange
from co_cli.tools import build_toolset
from co_cli.tools.approval import USER_DENIED_MESSAGE, ApprovalRequest, make_approval_handler
from co_cli.tools.edits import EDIT_MAX_BYTES, write_atomically
from tests.support.deps import make_deps


@pytest.fixture
def deps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CoDeps:
    for name in list(os.environ):
        if name.startswith("CO_CLI_"):
            monkeypatch.delenv(name)
    deps = make_deps(tmp_path)
    kept: list[FileChange] = []
    deps.keep_file_change = kept.append
    return deps


def kept(deps: CoDeps) -> list[FileChange]:
    keep = deps.keep_file_change
    assert keep is not None
    return keep.__self__  # type: ignore[attr-defined, no-any-return]


class Script:
    """A FunctionModel making the given tool calls one per step, then answering with every tool result."""

    def __init__(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        self.calls = calls
        self.returns: list[str] = []

    def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest):
            self.returns.extend(p.model_response_str() for p in last.parts if isinstance(p, ToolReturnPart))
        step = sum(isinstance(message, ModelResponse) for message in messages)
        if step < len(self.calls):
            name, args = self.calls[step]
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call-{step}")])
        return ModelResponse(parts=[TextPart("done")])


class Prompter:
    def __init__(self, *answers: str, before: Any = None) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []
        self.before = before

    async def __call__(self, request: ApprovalRequest) -> str:
        self.asked.append(request)
        if self.before is not None:
            self.before()
        return self.answers.pop(0)


def run(deps: CoDeps, calls: list[tuple[str, dict[str, Any]]], ask: Prompter | None, **kw: Any) -> list[str]:
    script = Script(calls)
    agent = Agent(
        FunctionModel(script.respond),
        deps_type=CoDeps,
        toolsets=[build_toolset()],
        capabilities=[HandleDeferredToolCalls(handler=make_approval_handler(ask, approve_all=False, **kw))],
    )
    agent.run_sync("go", deps=deps)
    return script.returns


def test_a_new_file_is_shown_as_a_diff_and_written_once_approved(deps: CoDeps) -> None:
    prompter = Prompter("y")
    results = run(deps, [("write_file", {"path": "src/new.py", "content": "print('hi')\n"})], prompter)
    request = prompter.asked[0]
    assert request.diff is not None
    assert request.diff.splitlines()[:3] == ["--- /dev/null", "+++ b/src/new.py", "@@ -0,0 +1 @@"]
    assert "+print('hi')" in request.diff
    assert (deps.cwd / "src" / "new.py").read_bytes() == b"print('hi')\n"
    assert results == ["Wrote src/new.py (new file)."]
    assert [(c.before, c.after, c.tool) for c in kept(deps)] == [(None, b"print('hi')\n", "write_file")]


def test_a_denied_edit_leaves_the_file_untouched(deps: CoDeps) -> None:
    target = deps.cwd / "a.txt"
    target.write_bytes(b"one\ntwo\n")
    results = run(deps, [("edit_file", {"path": "a.txt", "old_string": "two", "new_string": "2"})], Prompter("n"))
    assert target.read_bytes() == b"one\ntwo\n"
    assert results == [USER_DENIED_MESSAGE]
    assert kept(deps) == []


def test_non_interactive_denies(deps: CoDeps) -> None:
    results = run(deps, [("write_file", {"path": "x.txt", "content": "x"})], None)
    assert not (deps.cwd / "x.txt").exists()
    assert "approve-all" in results[0]


def test_edit_keeps_crlf_and_bom_and_shows_lf_diff(deps: CoDeps) -> None:
    target = deps.cwd / "w.txt"
    target.write_bytes(b"\xef\xbb\xbfalpha\r\nbeta\r\ngamma\r\n")
    prompter = Prompter("y")
    run(deps, [("edit_file", {"path": "w.txt", "old_string": "beta\ngamma", "new_string": "BETA\ngamma"})], prompter)
    assert target.read_bytes() == b"\xef\xbb\xbfalpha\r\nBETA\r\ngamma\r\n"
    diff = prompter.asked[0].diff or ""
    assert "-beta" in diff and "+BETA" in diff and "\r" not in diff


def test_a_latin1_file_keeps_its_bytes(deps: CoDeps) -> None:
    target = deps.cwd / "l.txt"
    target.write_bytes(b"caf\xe9\nold\n")
    run(deps, [("edit_file", {"path": "l.txt", "old_string": "old", "new_string": "new"})], Prompter("y"))
    assert target.read_bytes() == b"caf\xe9\nnew\n"


def test_replacing_a_file_keeps_its_mode(deps: CoDeps) -> None:
    target = deps.cwd / "run.sh"
    target.write_text("echo a\n")
    target.chmod(0o755)
    run(deps, [("write_file", {"path": "run.sh", "content": "echo b\n"})], Prompter("y"))
    assert target.read_text() == "echo b\n"
    assert target.stat().st_mode & 0o777 == 0o755
    assert [c.before for c in kept(deps)] == [b"echo a\n"]


def test_not_found_and_not_unique_list_the_candidates(deps: CoDeps) -> None:
    (deps.cwd / "c.py").write_text("def alpha():\n    return 1\n\ndef beta():\n    return 1\n")
    calls = [
        ("edit_file", {"path": "c.py", "old_string": "    return 1", "new_string": "    return 2"}),
        ("edit_file", {"path": "c.py", "old_string": "def alpah():", "new_string": "def a():"}),
    ]
    prompter = Prompter()
    not_unique, not_found = run(deps, calls, prompter)
    assert prompter.asked == []
    assert "occurs 2 times" in not_unique and "line 2:" in not_unique and "line 5:" in not_unique
    assert "was not found" in not_found and "line 1: def alpha():" in not_found


@pytest.mark.parametrize("kind", ["outside", "symlink", "own", "hardlink", "binary", "large", "directory"])
def test_the_read_file_path_rules_hold(deps: CoDeps, tmp_path: Path, kind: str) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n")
    path = {"outside": "../outside.txt", "symlink": "link.txt", "own": str(deps.paths.db)}.get(kind, "f.bin")
    if kind == "symlink":
        (deps.cwd / "link.txt").symlink_to(outside)
    elif kind == "hardlink":
        secret = deps.paths.config_dir / "secret.txt"
        secret.parent.mkdir(parents=True, exist_ok=True)
        secret.write_text("key\n")
        os.link(secret, deps.cwd / "f.bin")
    elif kind == "binary":
        (deps.cwd / "f.bin").write_bytes(b"a\0b")
    elif kind == "large":
        (deps.cwd / "f.bin").write_bytes(b"a" * (EDIT_MAX_BYTES + 1))
    elif kind == "directory":
        (deps.cwd / "f.bin").mkdir()
    prompter = Prompter()
    (result,) = run(deps, [("write_file", {"path": path, "content": "changed\n"})], prompter)
    assert result.startswith("Error:"), result
    assert prompter.asked == []
    assert outside.read_text() == "keep\n"
    assert kept(deps) == []


def test_a_file_changed_while_the_question_was_open_is_not_written(deps: CoDeps) -> None:
    target = deps.cwd / "r.txt"
    target.write_text("first\n")
    prompter = Prompter("y", before=lambda: target.write_text("first\nadded meanwhile\n"))
    (result,) = run(deps, [("edit_file", {"path": "r.txt", "old_string": "first", "new_string": "1st"})], prompter)
    assert "changed after the diff was shown" in result
    assert target.read_text() == "first\nadded meanwhile\n"
    assert kept(deps) == []


def test_always_allows_edits_of_that_file_only(deps: CoDeps) -> None:
    (deps.cwd / "a.txt").write_text("a\n")
    (deps.cwd / "b.txt").write_text("b\n")
    prompter = Prompter("a", "n")
    calls = [
        ("edit_file", {"path": "a.txt", "old_string": "a", "new_string": "A"}),
        ("edit_file", {"path": "a.txt", "old_string": "A", "new_string": "AA"}),
        ("edit_file", {"path": "b.txt", "old_string": "b", "new_string": "B"}),
    ]
    run(deps, calls, prompter, deps_getter=lambda: deps)
    assert (deps.cwd / "a.txt").read_text() == "AA\n"
    assert (deps.cwd / "b.txt").read_text() == "b\n"
    assert [r.args["path"] for r in prompter.asked] == ["a.txt", "b.txt"]
    assert prompter.asked[0].always_label == "edits of a.txt"


def test_without_a_place_to_keep_the_change_nothing_is_written(deps: CoDeps) -> None:
    deps.keep_file_change = None
    (result,) = run(deps, [("write_file", {"path": "n.txt", "content": "n"})], Prompter("y"))
    assert result.startswith("Error: no session")
    assert not (deps.cwd / "n.txt").exists()


def test_write_atomically_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "t.txt"
    write_atomically(target, b"one")
    write_atomically(target, b"two")
    assert [p.name for p in tmp_path.iterdir()] == ["t.txt"]
    write_atomically(target, None)
    assert not target.exists()
