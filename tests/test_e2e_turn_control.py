"""End to end: stopping a turn (Ctrl-C, Esc), the approval question's keys, and a model that cannot start."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pexpect
import pytest

from tests.support.co_process import ctrl_c, expect_prompt, send_line, spawn_co
from tests.support.processes import wait_for_file
from tests.support.readings import WRITES_GO
from tests.support.repl import repl
from tests.support.screen import screen_lines
from tests.support.scripted_server import ScriptedServer, Text, ToolCalls

pytestmark = pytest.mark.e2e


__all__ = ["repl"]


def slow_command(workdir: Path) -> str:
    return f"echo started > {workdir / 'started.txt'}; sleep 15"


@pytest.mark.timeout(60)
def test_ctrl_c_stops_a_command_the_user_has_just_approved(
    repl: pexpect.spawn, scripted_server: ScriptedServer, workdir: Path
) -> None:
    """The approval question took SIGINT over and gave it back to nobody: Ctrl-C waited for the command."""
    scripted_server.script(ToolCalls([("run_shell", {"command": slow_command(workdir)})]), Text("never reached"))
    send_line(repl, "wait a while")
    repl.expect("Approve run_shell", timeout=20)
    repl.send("y")
    wait_for_file(workdir / "started.txt", 10)
    ctrl_c(repl)
    out = expect_prompt(repl, timeout=8)  # the command alone would take 15 s
    assert "[interrupted]" in out


def held_reply(server: ScriptedServer, reply: Text) -> threading.Event:
    """The next chat request is answered with ``reply`` only once the returned event is set."""
    release = threading.Event()

    def responder(body: dict[str, object]) -> Text | None:
        server.responder = None
        release.wait(20)
        return reply

    server.responder = responder
    return release


def working_lines(child: pexpect.spawn) -> list[str]:
    return [line for line in screen_lines(child) if "waiting for the model" in line or "running " in line]


@pytest.mark.timeout(60)
def test_the_working_line_shows_what_co_waits_for_and_leaves_nothing_behind(
    repl: pexpect.spawn, scripted_server: ScriptedServer, workdir: Path
) -> None:
    release = held_reply(scripted_server, Text("The answer."))
    send_line(repl, "hello")
    repl.expect("waiting for the model", timeout=5)
    repl.expect(r"1s", timeout=5)  # the seconds count
    shown = working_lines(repl)
    assert len(shown) == 1 and shown[0].endswith("waiting for the model · 1s · Esc or Ctrl-C to stop"), shown
    release.set()
    out = expect_prompt(repl)
    assert "The answer." in out
    assert working_lines(repl) == []  # nothing left, scrollback included

    scripted_server.script(ToolCalls([("run_shell", {"command": slow_command(workdir)})]), Text("done"))
    send_line(repl, "run it")
    repl.expect("yes, once", timeout=20)
    assert working_lines(repl) == []  # the question stands alone
    repl.send("y")
    wait_for_file(workdir / "started.txt", 10)
    repl.expect("running run_shell: echo started", timeout=5)
    shown = working_lines(repl)
    assert len(shown) == 1 and "running run_shell: echo started" in shown[0] and "Esc or Ctrl-C to stop" in shown[0]
    ctrl_c(repl)
    expect_prompt(repl, timeout=8)
    assert working_lines(repl) == []


@pytest.mark.timeout(60)
def test_esc_stops_a_streaming_answer_and_a_running_command(
    repl: pexpect.spawn, scripted_server: ScriptedServer, workdir: Path
) -> None:
    scripted_server.script(Text("partial words " * 200, chunk_size=6, delay=0.02), Text("second answer ok"))
    send_line(repl, "tell me a long story")
    repl.expect("partial words", timeout=20)
    repl.send("\x1b")
    out = expect_prompt(repl, timeout=10)
    assert "[interrupted]" in out
    send_line(repl, "and now?")
    assert "second answer ok" in expect_prompt(repl)

    scripted_server.script(ToolCalls([("run_shell", {"command": slow_command(workdir)})]), Text("never reached"))
    send_line(repl, "wait a while")
    repl.expect("yes, once", timeout=20)
    repl.send("y")
    wait_for_file(workdir / "started.txt", 10)
    time.sleep(0.2)
    repl.send("\x1b")
    assert "[interrupted]" in expect_prompt(repl, timeout=8)  # the command alone would take 15 s


@pytest.mark.timeout(60)
def test_keys_typed_while_an_answer_streams_wait_at_the_next_prompt(
    repl: pexpect.spawn, scripted_server: ScriptedServer
) -> None:
    scripted_server.script(Text("streaming along " * 60, chunk_size=6, delay=0.02), Text("second"))
    send_line(repl, "first")
    repl.expect("streaming along", timeout=20)
    repl.send("next question")
    expect_prompt(repl, timeout=20)
    repl.send("\r")
    assert "second" in expect_prompt(repl)
    assert scripted_server.chat_requests[-1].messages[-1] == {"role": "user", "content": "next question"}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("typed", ["/help", "/quit", "hello"])
def test_an_unusable_model_ends_co_whatever_was_typed(co_env: dict[str, str], workdir: Path, typed: str) -> None:
    """The prompt is drawn while the model loads; input typed before its check failed printed the error again
    and again, with the toolbar saying "loading…" for ever."""
    child = spawn_co(["chat", "-m", "openai:gpt-4o"], env=co_env, cwd=workdir)
    expect_prompt(child)
    send_line(child, typed)
    child.expect(pexpect.EOF, timeout=20)
    shown = screen_lines(child)
    child.close()
    assert child.exitstatus == 2
    errors = [line for line in shown if "error" in line.lower()]
    assert len(errors) == 1 and "OPENAI_API_KEY" in errors[0], errors


@pytest.mark.timeout(60)
def test_leaving_while_the_memory_extraction_runs_shows_it_on_the_working_line(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    env = {**co_server_env, "CO_CLI_MEMORY_EXTRACT": "review"}
    release = threading.Event()

    def responder(body: dict[str, object]) -> ToolCalls | None:
        tools = [t.get("function", {}).get("name") for t in body.get("tools") or []]  # type: ignore[union-attr]
        if "final_result" not in tools:
            return None  # the chat's own requests: the scripted queue answers them
        release.wait(20)
        return ToolCalls([("final_result", {"facts": [WRITES_GO]})])

    scripted_server.responder = responder
    scripted_server.script(Text("Noted, Go it is."))
    child = spawn_co(["chat"], env=env, cwd=workdir)
    try:
        expect_prompt(child)
        send_line(child, "I write Go at work every day, keep that in mind")
        assert "Noted, Go it is." in expect_prompt(child)
        child.sendcontrol("d")
        child.expect("finishing the memory extraction of the last turn", timeout=10)
        shown = [line for line in screen_lines(child) if "memory extraction" in line]
        assert len(shown) == 1 and "s · Ctrl-C leaves it for the next co" in shown[0], shown
        release.set()
        child.expect(pexpect.EOF, timeout=20)
        assert not any("memory extraction" in line for line in screen_lines(child))
    finally:
        release.set()
        child.terminate(force=True)
