"""End to end, checked on a terminal emulator: the task list the model sets is counted in the toolbar, and
``/tasks`` lists and changes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.co_process import expect_prompt, send_line
from tests.support.screen import settle, spawn_with_toolbar, toolbar
from tests.support.scripted_server import ScriptedServer, Text, ToolCalls

pytestmark = pytest.mark.e2e

PLAN = {
    "tasks": [
        {"text": "read the config", "status": "in_progress"},
        {"text": "fix the \x1b[31mparser", "status": "pending"},
        {"text": "write the tests", "status": "pending"},
    ]
}


def test_tasks_in_the_toolbar_and_slash_tasks(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    scripted_server.script(ToolCalls([("set_tasks", PLAN)]), Text("Planned."))
    child = spawn_with_toolbar(co_server_env, workdir)
    try:
        expect_prompt(child)
        send_line(child, "plan the fix")
        expect_prompt(child)
        assert toolbar(settle(child)).endswith("│ 3 open tasks")
        send_line(child, "/tasks done 1")
        expect_prompt(child)
        send_line(child, "/tasks")
        expect_prompt(child)
        lines = settle(child)
        listed = lines[lines.index("Tasks (3 tasks: 2 pending, 1 done; [ ] pending, [~] in progress, [x] done):") :]
        assert listed[1:4] == ["  1. [x] read the config", "  2. [ ] fix the parser", "  3. [ ] write the tests"]
        assert toolbar(lines).endswith("│ 2 open tasks")
        send_line(child, "/tasks clear")
        expect_prompt(child)
        assert "open task" not in toolbar(settle(child))
    finally:
        child.terminate(force=True)
