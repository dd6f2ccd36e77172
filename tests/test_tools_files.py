"""read_file, list_dir and grep: output, limits, and confinement to the working directory."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, ApprovalRequired
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from co_cli.deps import CoDeps
from co_cli.tools import build_toolset
from co_cli.tools.files import GREP_MATCH_CAP, LIST_DIR_CAP, MAX_LINE_CHARS, grep, list_dir, read_file
from co_cli.tools.paths import OUTSIDE_CWD_REASON
from tests.support.deps import ctx_for, make_deps


@pytest.fixture
def deps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CoDeps:
    for name in list(os.environ):
        if name.startswith("CO_CLI_"):
            monkeypatch.delenv(name)
    return make_deps(tmp_path)


def call(tool: Callable[..., Awaitable[str]], *args: Any, **kwargs: Any) -> str:
    """Run an (async) file tool to completion."""
    return asyncio.run(tool(*args, **kwargs))


def write_lines(path: Path, count: int) -> None:
    path.write_text("".join(f"line {number}\n" for number in range(1, count + 1)))


# read_file


def test_read_file_numbers_lines_and_gives_next_offset(deps: CoDeps) -> None:
    write_lines(deps.cwd / "ten.txt", 10)
    first = call(read_file, ctx_for(deps), "ten.txt", offset=0, limit=3)
    lines = first.splitlines()
    assert lines[:3] == ["     1\tline 1", "     2\tline 2", "     3\tline 3"]
    assert "offset=3" in lines[3]
    assert "line 4" not in first
    middle = call(read_file, ctx_for(deps), "ten.txt", offset=3, limit=3)
    assert middle.splitlines()[0] == "     4\tline 4"
    assert "offset=6" in middle


def test_read_file_end_and_past_end(deps: CoDeps) -> None:
    write_lines(deps.cwd / "ten.txt", 10)
    tail = call(read_file, ctx_for(deps), "ten.txt", offset=8, limit=5)
    assert tail.splitlines() == ["     9\tline 9", "    10\tline 10", "[end of file: 10 lines]"]
    exact = call(read_file, ctx_for(deps), "ten.txt", offset=0, limit=10)
    assert "more lines remain" not in exact
    assert "end of file: 10 lines" in exact
    past = call(read_file, ctx_for(deps), "ten.txt", offset=50)
    assert "10 lines" in past and "past the end" in past


def test_read_file_default_limit_is_400(deps: CoDeps) -> None:
    write_lines(deps.cwd / "big.txt", 1000)
    text = call(read_file, ctx_for(deps), "big.txt")
    assert "   400\tline 400" in text
    assert "line 401" not in text
    assert "offset=400" in text


def test_read_file_missing_binary_directory_empty(deps: CoDeps) -> None:
    assert call(read_file, ctx_for(deps), "nope.txt") == "Error: nope.txt does not exist."
    (deps.cwd / "blob.bin").write_bytes(b"\x89PNG\x00\x01\x02" * 10)
    binary = call(read_file, ctx_for(deps), "blob.bin")
    assert binary.startswith("Error: blob.bin is a binary file") and "70 bytes" in binary
    (deps.cwd / "sub").mkdir()
    assert "is a directory" in call(read_file, ctx_for(deps), "sub")
    (deps.cwd / "empty.txt").write_text("")
    assert call(read_file, ctx_for(deps), "empty.txt") == "empty.txt is empty."
    assert call(read_file, ctx_for(deps), "empty.txt", limit=0).startswith("Error:")


def test_read_file_clips_very_long_lines(deps: CoDeps) -> None:
    (deps.cwd / "long.txt").write_text("x" * (MAX_LINE_CHARS + 500) + "\n")
    text = call(read_file, ctx_for(deps), "long.txt")
    assert "[500 more characters]" in text
    assert "x" * (MAX_LINE_CHARS + 1) not in text


# list_dir


def test_list_dir_types_sizes_sorted(deps: CoDeps) -> None:
    (deps.cwd / "b.txt").write_text("hello")
    (deps.cwd / "a_dir").mkdir()
    (deps.cwd / "c_link").symlink_to("b.txt")
    lines = call(list_dir, ctx_for(deps)).splitlines()
    assert len(lines) == 3
    assert lines[0].split() == ["dir", "-", "a_dir/"]
    assert lines[1].split() == ["file", "5", "b.txt"]
    assert lines[2].split() == ["link", "-", "c_link", "->", "b.txt"]


def test_list_dir_caps_entries(deps: CoDeps) -> None:
    folder = deps.cwd / "many"
    folder.mkdir()
    for number in range(LIST_DIR_CAP + 7):
        (folder / f"f{number:04d}").touch()
    lines = call(list_dir, ctx_for(deps), "many").splitlines()
    assert len(lines) == LIST_DIR_CAP + 1
    assert lines[0].endswith("f0000")
    assert lines[LIST_DIR_CAP - 1].endswith(f"f{LIST_DIR_CAP - 1:04d}")
    assert lines[-1] == f"[7 more entries not shown; {LIST_DIR_CAP + 7} in total]"


def test_list_dir_missing_and_not_a_directory(deps: CoDeps) -> None:
    assert call(list_dir, ctx_for(deps), "nope") == "Error: nope does not exist."
    (deps.cwd / "f.txt").write_text("x")
    assert "not a directory" in call(list_dir, ctx_for(deps), "f.txt")
    (deps.cwd / "empty").mkdir()
    assert call(list_dir, ctx_for(deps), "empty") == "empty is empty."


# grep


def test_grep_reports_file_line_text(deps: CoDeps) -> None:
    (deps.cwd / "src").mkdir()
    (deps.cwd / "src" / "a.py").write_text("import os\ndef main():\n    return os.getcwd()\n")
    (deps.cwd / "notes.md").write_text("main idea\n")
    result = call(grep, ctx_for(deps), r"main\b")
    assert result.splitlines() == ["notes.md:1: main idea", "src/a.py:2: def main():"]
    assert call(grep, ctx_for(deps), "main", glob="*.py").splitlines() == ["src/a.py:2: def main():"]
    assert call(grep, ctx_for(deps), "os", path="src/a.py").splitlines() == [
        "src/a.py:1: import os",
        "src/a.py:3:     return os.getcwd()",
    ]


def test_grep_skips_binary_and_tool_directories(deps: CoDeps) -> None:
    for skipped in (".git", ".venv", "node_modules"):
        (deps.cwd / skipped).mkdir()
        (deps.cwd / skipped / "f.txt").write_text("needle\n")
    (deps.cwd / "blob.bin").write_bytes(b"needle\x00\x01")
    (deps.cwd / "keep.txt").write_text("a needle here\n")
    assert call(grep, ctx_for(deps), "needle").splitlines() == ["keep.txt:1: a needle here"]


def test_grep_invalid_regex_is_a_message(deps: CoDeps) -> None:
    result = call(grep, ctx_for(deps), "foo(")
    assert result.startswith("Error: invalid regular expression 'foo('")
    assert "missing )" in result


def test_grep_caps_matches(deps: CoDeps) -> None:
    (deps.cwd / "many.txt").write_text("hit\n" * (GREP_MATCH_CAP + 50))
    lines = call(grep, ctx_for(deps), "hit").splitlines()
    assert len(lines) == GREP_MATCH_CAP + 1
    assert lines[GREP_MATCH_CAP - 1] == f"many.txt:{GREP_MATCH_CAP}: hit"
    assert lines[-1].startswith(f"[stopped at {GREP_MATCH_CAP} matches")


def test_grep_no_match_and_missing_path(deps: CoDeps) -> None:
    (deps.cwd / "a.txt").write_text("alpha\n")
    assert call(grep, ctx_for(deps), "zeta") == "No matches for 'zeta' in .."
    assert call(grep, ctx_for(deps), "x", path="nope") == "Error: nope does not exist."


def test_grep_does_not_follow_symlinks_out_of_cwd(deps: CoDeps) -> None:
    outside = deps.cwd.parent / "outside.txt"
    outside.write_text("needle outside\n")
    (deps.cwd / "escape.txt").symlink_to(outside)
    (deps.cwd / "escape_dir").symlink_to(deps.cwd.parent, target_is_directory=True)
    (deps.cwd / "inside.txt").write_text("needle inside\n")
    assert call(grep, ctx_for(deps), "needle").splitlines() == ["inside.txt:1: needle inside"]


# confinement


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        (read_file, {"path": "../outside.txt"}),
        (list_dir, {"path": ".."}),
        (grep, {"pattern": "x", "path": "../outside.txt"}),
    ],
)
def test_outside_cwd_raises_approval_required(deps: CoDeps, tool: Any, args: dict[str, Any]) -> None:
    (deps.cwd.parent / "outside.txt").write_text("x\n")
    with pytest.raises(ApprovalRequired) as raised:
        call(tool, ctx_for(deps), **args)
    assert raised.value.metadata is not None
    assert raised.value.metadata["reason"] == OUTSIDE_CWD_REASON
    assert not Path(raised.value.metadata["path"]).is_relative_to(deps.cwd.resolve())
    assert call(tool, ctx_for(deps, approved=True), **args)


def test_symlinked_directory_escaping_cwd_needs_approval(deps: CoDeps) -> None:
    elsewhere = deps.cwd.parent / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "f.txt").write_text("far\n")
    (deps.cwd / "door").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(ApprovalRequired):
        call(read_file, ctx_for(deps), "door/f.txt")
    with pytest.raises(ApprovalRequired):
        call(list_dir, ctx_for(deps), "door")
    with pytest.raises(ApprovalRequired):
        call(read_file, ctx_for(deps), str(elsewhere / "f.txt"))


def test_paths_inside_cwd_need_no_approval(deps: CoDeps) -> None:
    (deps.cwd / "sub").mkdir()
    (deps.cwd / "sub" / "f.txt").write_text("near\n")
    (deps.cwd / "alias").symlink_to(deps.cwd / "sub", target_is_directory=True)
    assert "near" in call(read_file, ctx_for(deps), "sub/../sub/f.txt")
    assert "near" in call(read_file, ctx_for(deps), "alias/f.txt")
    assert "near" in call(read_file, ctx_for(deps), str(deps.cwd / "sub" / "f.txt"))
    assert "f.txt" in call(list_dir, ctx_for(deps), "sub")


# through an agent


def test_agent_calls_each_file_tool(deps: CoDeps) -> None:
    write_lines(deps.cwd / "notes.txt", 3)
    calls = [
        ("list_dir", {"path": "."}),
        ("read_file", {"path": "notes.txt", "offset": 1, "limit": 1}),
        ("grep", {"pattern": "line [13]"}),
        ("grep", {"pattern": "["}),
    ]
    returns: list[ToolReturnPart] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns[:] = [part for message in messages for part in message.parts if isinstance(part, ToolReturnPart)]
        step = sum(isinstance(message, ModelResponse) for message in messages)
        if step < len(calls):
            name, args = calls[step]
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"c{step}")])
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(respond), deps_type=CoDeps, toolsets=[build_toolset()])
    result = agent.run_sync("look around", deps=deps)
    assert result.output == "done"
    contents = [str(part.content) for part in returns]
    assert [part.tool_name for part in returns] == ["list_dir", "read_file", "grep", "grep"]
    assert "notes.txt" in contents[0]
    assert contents[1].startswith("     2\tline 2")
    assert contents[2].splitlines() == ["notes.txt:1: line 1", "notes.txt:3: line 3"]
    assert contents[3].startswith("Error: invalid regular expression")


def test_read_file_refuses_a_fifo(deps: CoDeps) -> None:
    os.mkfifo(deps.cwd / "pipe")
    assert "not a regular file" in call(read_file, ctx_for(deps), "pipe")
