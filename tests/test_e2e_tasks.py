"""End to end, checked on a terminal emulator: the task list the model sets is counted in the toolbar, and
``/tasks`` lists and changes it."""

from __future__ import annotations

import io
from pathlib import Path

import pexpect
import pyte
import pytest

from tests.support.co_process import CO_COMMAND, co_environment, expect_prompt, send_line
from tests.support.screen import screen_lines
from tests.support.scripted_server import ScriptedServer, Text, ToolCalls

pytestmark = pytest.mark.e2e

PLAN = {
    "tasks": [
        {"text": "read the config", "status": "in_progress"},
        {"text": "fix the \x1b[31mparser", "status": "pending"},
        {"text": "write the tests", "status": "pending"},
    ]
}
CURSOR_REQUEST = "\x1b[6n"


def spawn_with_toolbar(env: dict[str, str], cwd: Path) -> pexpect.spawn:
    """``co chat`` in a pseudo-terminal whose cursor-position requests the test answers: prompt-toolkit draws
    the bottom toolbar only once it knows where the cursor is."""
    environment = co_environment(env)
    environment.pop("PROMPT_TOOLKIT_NO_CPR", None)
    child = pexpect.spawn(
        CO_COMMAND[0], [*CO_COMMAND[1:], "chat"], env=environment, cwd=str(cwd), dimensions=(30, 140), timeout=20,
        encoding="utf-8", codec_errors="replace",
    )  # fmt: skip
    child.logfile_read = io.StringIO()
    return child


def settle(child: pexpect.spawn) -> list[str]:
    """Read what co draws after its prompt, answering its cursor-position requests as a terminal does; the
    screen."""
    answered = 0
    while True:
        child.expect(pexpect.TIMEOUT, timeout=0.7)
        log = child.logfile_read.getvalue()
        if log.count(CURSOR_REQUEST) == answered:
            return screen_lines(child)
        answered = log.count(CURSOR_REQUEST)
        rows, columns = child.getwinsize()
        screen = pyte.Screen(columns, rows)
        pyte.Stream(screen).feed(log)
        child.send(f"\x1b[{screen.cursor.y + 1};{screen.cursor.x + 1}R")


def toolbar(lines: list[str]) -> str:
    return [line for line in lines if "│ context " in line][-1]


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
