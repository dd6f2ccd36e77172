"""End to end, on a 70-column terminal emulator (pyte): a tool's output shows its size and first lines under
the call, and `/last` shows the whole of the last one in the pager, an offloaded one from its file."""

from __future__ import annotations

from pathlib import Path

import pexpect
import pytest

from tests.support.co_process import expect_prompt, send_line, spawn_co
from tests.support.screen import screen_lines
from tests.support.scripted_server import ScriptedServer, Text, ToolCalls

pytestmark = pytest.mark.e2e

WIDTH = 70


NO_SANDBOX = {"CO_CLI_SHELL_SANDBOX": "off"}
"""The output is drawn the same with or without bubblewrap (without it, co's once-a-session notice that commands
are not sandboxed would be one more line of the output)."""


def run_approved(child: pexpect.spawn, command: str) -> None:
    send_line(child, "run it")
    child.expect("yes, once", timeout=20)
    child.send("y")
    expect_prompt(child, timeout=20)


@pytest.mark.timeout(90)
def test_a_commands_output_shows_its_first_lines_cut_to_the_width_and_last_pages_it_whole(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    command = "seq 1 12; printf 'x%.0s' $(seq 1 150); echo"
    scripted_server.script(ToolCalls([("run_shell", {"command": command})]), Text("Done."))
    env = {**co_server_env, "PAGER": "", **NO_SANDBOX}
    child = spawn_co(["chat"], env=env, cwd=workdir, dimensions=(40, WIDTH))
    try:
        expect_prompt(child)
        run_approved(child, command)
        screen = screen_lines(child)
        assert all(len(line) <= WIDTH for line in screen), screen
        at = next(i for i, line in enumerate(screen) if "↳ run_shell:" in line)
        assert "16 lines" in screen[at] and "/last shows it all" in screen[at], screen[at]
        assert [line.strip() for line in screen[at + 1 : at + 6]] == ["exit code: 0", "stdout:", "1", "2", "3"]
        assert screen[at + 6].strip() == "… 11 more lines", screen[at : at + 8]
        assert "    12" not in screen

        send_line(child, "/last")  # less, which quits by itself when the text fits the screen
        expect_prompt(child, timeout=20)
        screen = screen_lines(child)
        paged = screen[max(i for i, line in enumerate(screen) if line.startswith("run_shell: 16 lines")) :]
        assert "12" in paged and "stderr: (empty)" in paged, paged
        assert any(line.startswith("x" * 60) for line in paged), paged  # wrapped, not cut
    finally:
        child.terminate(force=True)


@pytest.mark.timeout(90)
def test_last_shows_an_offloaded_output_from_its_file(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    scripted_server.script(ToolCalls([("run_shell", {"command": "seq 1000 1199"})]), Text("Done."))
    env = {**co_server_env, "PAGER": "cat", "CO_CLI_TOOL_OUTPUT_OFFLOAD_CHARS": "300", **NO_SANDBOX}
    child = spawn_co(["chat"], env=env, cwd=workdir, dimensions=(40, WIDTH))
    try:
        expect_prompt(child)
        run_approved(child, "seq 1000 1199")
        sent = [str(m.get("content")) for m in scripted_server.chat_requests[-1].messages if m.get("role") == "tool"]
        assert "ref=" in sent[0] and "1100" not in sent[0]  # the model got the preview: the middle is on disk
        send_line(child, "/last")
        expect_prompt(child, timeout=20)
        screen = screen_lines(child)
        paged = screen[max(i for i, line in enumerate(screen) if line.startswith("run_shell: 203 lines")) :]
        assert "saved as ref=" in paged[0]
        assert [line for line in paged if line.isdigit()] == [str(n) for n in range(1000, 1200)]
    finally:
        child.terminate(force=True)
