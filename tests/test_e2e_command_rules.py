"""End to end: a command rule saved with `co config trust allow --command` lets a matching command run without the
question; another command, or a compound one starting with the prefix, is still asked about."""

from __future__ import annotations

from pathlib import Path

import pexpect
import pytest

from tests.support.co_process import expect_prompt, run_co, send_line, spawn_co
from tests.support.screen import screen_lines
from tests.support.scripted_server import ScriptedServer, Text, ToolCalls

pytestmark = pytest.mark.e2e


def tool_results(request: object) -> list[str]:
    return [str(m.get("content")) for m in request.messages if m.get("role") == "tool"]  # type: ignore[attr-defined]


def test_a_saved_prefix_rule_skips_the_question_only_for_matching_simple_commands(
    co_server_env: dict[str, str], scripted_server: ScriptedServer, workdir: Path
) -> None:
    saved = run_co(["config", "trust", "allow", "--command", "echo rule"], co_server_env, workdir)
    assert saved.returncode == 0, saved.stderr
    scripted_server.script(
        ToolCalls([("run_shell", {"command": "echo rule matched"})]),
        Text("first done"),
        ToolCalls([("run_shell", {"command": "echo other"})]),
        Text("second done"),
        ToolCalls([("run_shell", {"command": "echo rule && echo chained"})]),
        Text("third done"),
    )
    child = spawn_co(["chat"], env=co_server_env, cwd=workdir)
    try:
        expect_prompt(child)
        send_line(child, "first")
        assert "first done" in expect_prompt(child)
        assert not any("Approve" in line for line in screen_lines(child))
        assert any("rule matched" in r and "exit code: 0" in r for r in tool_results(scripted_server.chat_requests[-1]))

        send_line(child, "second")
        child.expect("Approve run_shell: echo other", timeout=20)
        child.expect("yes, once", timeout=5)
        child.send("n")
        assert "second done" in expect_prompt(child)

        send_line(child, "third")
        child.expect("Approve run_shell: echo rule && echo chained", timeout=20)
        child.expect("yes, once", timeout=5)
        child.send("n")
        assert "third done" in expect_prompt(child)
        shown = screen_lines(child)
        assert any(line.startswith("Approve run_shell: echo other") for line in shown)
        assert any(line.startswith("Approve run_shell: echo rule && echo chained") for line in shown)
        assert not any("Approve run_shell: echo rule matched" in line for line in shown)
        assert sum("✗ denied" in line for line in shown) == 2
        child.sendcontrol("d")
        child.expect(pexpect.EOF, timeout=10)
    finally:
        if child.isalive():
            child.terminate(force=True)
