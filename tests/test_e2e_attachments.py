"""End to end in a pseudo-terminal (pyte at 70 columns): ``@path`` completes with Tab and sends the file with
the prompt; ``!command`` runs at once, shows its output, and sends it with the next prompt, also after resume."""

from __future__ import annotations

from pathlib import Path

import pexpect
import pytest

from tests.support.co_process import expect_prompt, send_line, spawn_co
from tests.support.screen import screen_lines
from tests.support.scripted_server import ScriptedServer, Text, message_text

pytestmark = pytest.mark.e2e

WIDTH = 70


def user_messages(server: ScriptedServer) -> list[str]:
    return [message_text(m) for m in server.chat_requests[-1].messages if m.get("role") == "user"]


@pytest.mark.timeout(90)
def test_at_path_completes_with_tab_and_bang_command_runs_and_goes_with_the_next_prompt(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    (workdir / "launch-notes.txt").write_text("the launch moved to Friday\n")
    scripted_server.script(Text("Friday."), Text("Three files."), Text("Still here."))
    child = spawn_co(["chat"], env=co_server_env, cwd=workdir, dimensions=(40, WIDTH))
    try:
        expect_prompt(child)
        child.send("when is the launch? @launch")
        for _ in range(20):  # Tab completes once the conversation is built (a second or so after the prompt)
            child.send("\t")
            if child.expect(["launch-notes.txt", pexpect.TIMEOUT], timeout=1) == 0:
                break
        child.send("\r")
        expect_prompt(child, timeout=20)
        assert "the launch moved to Friday" in user_messages(scripted_server)[-1]
        assert user_messages(scripted_server)[-1].startswith("when is the launch? @launch-notes.txt")

        send_line(child, "!printf 'one\\ntwo\\nthree\\n'; ls | wc -l")
        expect_prompt(child, timeout=20)
        screen = screen_lines(child)
        assert "↳ the command and its output go with your next prompt" in screen
        assert "two" in screen and "three" in screen
        assert len(scripted_server.chat_requests) == 1  # nothing went to the model yet
        send_line(child, "how many files?")
        expect_prompt(child, timeout=20)
        sent = user_messages(scripted_server)[-1]
        assert sent.startswith("[I ran this command myself: $ printf 'one\\ntwo\\nthree\\n'; ls | wc -l]")
        assert "one\ntwo\nthree\n1" in sent and sent.endswith("how many files?")
        send_line(child, "/quit")
        child.expect("co chat -c", timeout=20)
    finally:
        child.terminate(force=True)

    child = spawn_co(["chat", "-c"], env=co_server_env, cwd=workdir, dimensions=(40, WIDTH))
    try:
        expect_prompt(child)
        send_line(child, "still there?")
        expect_prompt(child, timeout=20)
        assert any("one\ntwo\nthree" in text for text in user_messages(scripted_server)[:-1])
    finally:
        child.terminate(force=True)
