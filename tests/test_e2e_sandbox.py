"""End to end: a command that writes to $HOME is stopped by the sandbox (the question says it is sandboxed, the
model is told why it failed); after `/sandbox off` the same command works."""

from __future__ import annotations

from pathlib import Path

import pytest

from co_cli.tools.sandbox import probe
from tests.support.co_process import expect_prompt, send_line, spawn_co
from tests.support.screen import screen_lines
from tests.support.scripted_server import ScriptedServer, Text, ToolCalls

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(bool(probe(False)), reason=f"bubblewrap cannot sandbox commands here: {probe(False)}"),
]


def tool_results(request: object) -> list[str]:
    return [str(m.get("content")) for m in request.messages if m.get("role") == "tool"]  # type: ignore[attr-defined]


def test_the_sandbox_stops_a_write_to_home_until_the_user_turns_it_off(
    co_server_env: dict[str, str], scripted_server: ScriptedServer, workdir: Path
) -> None:
    target = Path(co_server_env["HOME"]) / "note.txt"
    command = f"echo hello > {target}"
    scripted_server.script(
        ToolCalls([("run_shell", {"command": command})]),
        Text("the sandbox stopped it"),
        ToolCalls([("run_shell", {"command": command})]),
        Text("written now"),
    )
    child = spawn_co(["chat"], env=co_server_env, cwd=workdir)
    try:
        expect_prompt(child)
        send_line(child, "write the note")
        child.expect("yes, once", timeout=20)
        child.send("y")
        assert "the sandbox stopped it" in expect_prompt(child)
        assert not target.exists()
        result = tool_results(scripted_server.chat_requests[-1])[-1]
        assert "Read-only file system" in result and "co's sandbox may have stopped this command" in result
        assert any(
            "sandboxed: writes only in the working directory and TMPDIR, no network" in line
            for line in screen_lines(child)
        )

        send_line(child, "/sandbox off")
        expect_prompt(child)
        assert any("Shell commands run without a sandbox, as in your shell" in line for line in screen_lines(child))
        send_line(child, "again")
        child.expect("yes, once", timeout=20)
        child.send("y")
        assert "written now" in expect_prompt(child)
        assert target.read_text() == "hello\n"
    finally:
        if child.isalive():
            child.terminate(force=True)
