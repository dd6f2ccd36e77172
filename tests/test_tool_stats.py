"""Tool statistics, in process: each tool call of a turn is saved with the turn (ok, failed, denied, and the
time it ran, not counting the wait for the user's approval), summed per session in /usage and
``co sessions show`` and across sessions in ``co usage --by tool``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage
from typer.testing import CliRunner

from co_cli.store.tool_calls import ToolStats
from co_cli.tools.approval import ApprovalRequest
from tests.support.chat_app import ChatRun
from tests.support.turn_core import Core, core, run, streaming_model

__all__ = ["core"]

pytestmark = pytest.mark.allow_model_requests

APPROVAL_WAIT = 0.4


def busy_model(core: Core) -> Any:
    """A model whose first turn runs a command, has another one denied, reads a file and sets a task list after
    one refused try."""
    calls = iter(
        [
            ("run_shell", {"command": "echo approved"}),
            ("run_shell", {"command": "echo denied"}),
            ("read_file", {"path": "notes.txt"}),
            ("set_tasks", {"tasks": [{"text": "a"}, {"text": "a"}]}),
            ("set_tasks", {"tasks": [{"text": "a"}]}),
        ]
    )

    def step(messages: list[ModelMessage]) -> str | tuple[str, dict[str, Any]]:
        return next(calls, "done")

    (core.cwd / "notes.txt").write_text("some notes\n")
    return streaming_model(step)


def busy_turn(core: Core) -> Any:
    """A conversation over ``busy_model`` whose user approves the first command after a wait, denies the other."""

    async def ask(request: ApprovalRequest) -> str:
        await asyncio.sleep(APPROVAL_WAIT)
        return "y" if request.command == "echo approved" else "n"

    return core.conversation(busy_model(core), ask=ask)


def test_each_call_is_saved_with_its_outcome_and_time(core: Core) -> None:
    conv = busy_turn(core)
    assert run(conv, "work").status == "ok"
    assert conv.session is not None
    stats = core.store.tool_calls.by_tool(conv.session.id)
    counts = {name: (s.calls, s.failed, s.denied) for name, s in stats.items()}
    assert counts == {"read_file": (1, 0, 0), "run_shell": (2, 0, 1), "set_tasks": (2, 1, 0)}
    # The command ran for milliseconds; the wait for the approval is not tool time.
    assert 0 < stats["run_shell"].seconds < APPROVAL_WAIT
    rows = core.store.db.read("SELECT seq FROM tool_calls WHERE session_id = ?", (conv.session.id,))
    assert {row["seq"] for row in rows} == {0}  # filed under the turn's prompt
    run(conv, "again")  # a turn without tools adds nothing
    assert core.store.tool_calls.by_tool(conv.session.id)["run_shell"].calls == 2


def test_slash_usage_and_sessions_show_list_the_tools(core: Core) -> None:
    from co_cli.terminal.sessions_cli import app

    chat = ChatRun(core, busy_model(core))  # piped: nobody can approve, both commands are denied
    printed = chat.send("work", "/usage")
    assert printed.code == 0, printed.err
    tools_line = next(line for line in printed.lines if line.startswith("  tools: "))
    assert tools_line == "  tools: read_file 1 (0.0 s), run_shell 2 (2 denied; 0.0 s), set_tasks 2 (1 failed; 0.0 s)"
    assert chat.conv.session is not None
    chat.conv.release()
    shown = CliRunner().invoke(app, ["show", chat.conv.session.id])
    assert shown.exit_code == 0, shown.output
    assert tools_line.removeprefix("  tools: ") in shown.output


def test_co_usage_by_tool_sums_every_session(core: Core) -> None:
    from co_cli.terminal.usage_cli import app

    runner = CliRunner()
    assert runner.invoke(app, ["--by", "tool"]).output.strip() == "No tool calls recorded yet."
    for _ in range(2):
        conv = busy_turn(core)
        run(conv, "work")
        conv.release()
    table = runner.invoke(app, ["--by", "tool"], env={"COLUMNS": "120"})
    assert table.exit_code == 0, table.output
    lines = [line.split() for line in table.output.splitlines()]
    assert lines[0] == ["Tool", "Calls", "Failed", "Denied", "Time"]
    assert lines[1][:4] == ["read_file", "2", "0", "0"] and lines[2][:4] == ["run_shell", "4", "0", "2"]
    assert lines[3][:4] == ["set_tasks", "4", "2", "0"] and lines[-1][:4] == ["total", "10", "2", "2"]
    data = json.loads(runner.invoke(app, ["--by", "tool", "--json", "--since", "1d"]).output)
    assert data["by"] == "tool"
    assert [(r["key"], r["calls"], r["failed"], r["denied"]) for r in data["rows"]] == [
        ("read_file", 2, 0, 0),
        ("run_shell", 4, 0, 2),
        ("set_tasks", 4, 2, 0),
    ]
    assert data["total"]["calls"] == 10 and data["total"]["seconds"] > 0


def test_tool_stats_merge() -> None:
    total = ToolStats()
    total.merge(ToolStats(2, 1, 0, 1.5))
    total.merge(ToolStats(1, 0, 1, 0.5))
    assert total == ToolStats(3, 1, 1, 2.0)
