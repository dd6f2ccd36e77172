"""End to end: the session picker, fork at a message, /rewind and /usage through the real `co`."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pexpect
import pytest

from tests.support.co_process import ctrl_d, expect_prompt, run_co, send_line, spawn_co, transcript
from tests.support.saved_sessions import (
    assert_ok,
    assert_one_line_error,
    conversation,
    db_path,
    query,
    seed_session,
    session_row,
    stored_texts,
    tool_turn,
    turn,
)
from tests.support.scripted_server import ScriptedServer, Text, Usage

pytestmark = pytest.mark.e2e


def shown(child: pexpect.spawn) -> str:
    """What the terminal shows now (a full-screen program redraws only what changed: read the screen)."""
    import io

    import pyte

    log = child.logfile_read
    assert isinstance(log, io.StringIO)
    rows, columns = child.getwinsize()
    screen = pyte.Screen(columns, rows)
    pyte.Stream(screen).feed(log.getvalue())
    return "\n".join(line.rstrip() for line in screen.display)


def wait_for_screen(child: pexpect.spawn, text: str, timeout: float = 15) -> str:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(pexpect.TIMEOUT):
            child.expect(r"(?s).+", timeout=0.2)
        screen = shown(child)
        if text in screen:
            return screen
        assert time.monotonic() < deadline, f"{text!r} never shown; the screen:\n{screen}"


def new_sessions(db: Path, known: set[str]) -> list[str]:
    return [r[0] for r in query(db, "SELECT id FROM sessions") if r[0] not in known]


def test_resume_without_an_id_opens_the_picker_filter_and_enter_resumes(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    db = db_path(co_server_env)
    walrus = seed_session(db, turn("tell me about the walrus", "walruses have tusks"))
    otter = seed_session(db, turn("and otters?", "otters hold hands"))
    child = spawn_co(["chat"], env=co_server_env, cwd=workdir)
    try:
        expect_prompt(child)
        send_line(child, "/resume")
        wait_for_screen(child, "2 of 2")
        child.send("tusks")
        wait_for_screen(child, "1 of 2")
        assert "walruses have tusks" in wait_for_screen(child, "walrus")
        child.send("\r")
        out = expect_prompt(child)
        assert f"Resumed {walrus} · tell me about the walrus" in out
        send_line(child, "what do they eat?")
        assert "echo: what do they eat?" in expect_prompt(child)
        send_line(child, "/resume")
        wait_for_screen(child, "2 of 2")
        child.send("\x1b")
        expect_prompt(child)
        ctrl_d(child)
        child.expect(pexpect.EOF, timeout=15)
    finally:
        if child.isalive():
            child.terminate(force=True)
    assert conversation(scripted_server.chat_requests[-1])[0] == ("user", "tell me about the walrus")
    assert [t[3] for t in stored_texts(db, otter)] == ["and otters?", "otters hold hands"]


def test_chat_pick_f_forks_and_piped_resume_without_id_says_how(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    db = db_path(co_server_env)
    walrus = seed_session(db, turn("tell me about the walrus", "walruses have tusks"))
    otter = seed_session(db, turn("and otters?", "otters hold hands"))
    child = spawn_co(["chat", "--pick"], env=co_server_env, cwd=workdir)
    try:
        wait_for_screen(child, "2 of 2")
        child.send("otter")
        wait_for_screen(child, "1 of 2")
        child.send("\x06")  # Ctrl-F forks the selected session (typed letters always filter)
        out = expect_prompt(child)
        [fork] = new_sessions(db, {walrus, otter})
        assert f"Resumed {fork}" in out
        send_line(child, "in the fork")
        assert "echo: in the fork" in expect_prompt(child)
        ctrl_d(child)
        child.expect(pexpect.EOF, timeout=15)
    finally:
        if child.isalive():
            child.terminate(force=True)
    assert session_row(db, fork)["parent_id"] == otter
    assert [t[3] for t in stored_texts(db, otter)] == ["and otters?", "otters hold hands"]
    piped = run_co(["chat"], co_server_env, workdir, input="/resume\n")
    assert piped.returncode == 1 and "usage: /resume <id or prefix>" in piped.stderr
    no_terminal = run_co(["chat", "--pick"], co_server_env, workdir)
    assert_one_line_error(no_terminal, 2, "--pick needs a terminal")


def test_fork_at_a_message_and_refusal_mid_tool_call(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    db = db_path(co_server_env)
    sid = seed_session(db, turn("first question", "first answer"), tool_turn("list it", "notes.txt is there"))
    shown = run_co(["sessions", "show", sid], {**co_server_env, "COLUMNS": "120"}, workdir)
    assert_ok(shown)
    assert "#3" in shown.stdout and "tools list_dir 1" in shown.stdout
    refused = run_co(["chat", "--resume", sid, "--fork-at", "3", "-p", "x"], co_server_env, workdir)
    assert_one_line_error(refused, 1, "#3 is a tool call whose result follows it", "#1", "#5")
    assert new_sessions(db, {sid}) == []
    forked = run_co(["chat", "--resume", sid, "--fork-at", "1", "-p", "second try"], co_server_env, workdir)
    assert_ok(forked)
    [fork] = new_sessions(db, {sid})
    row = session_row(db, fork)
    assert row["parent_id"] == sid and row["fork_seq"] == 1
    assert conversation(scripted_server.chat_requests[-1]) == [
        ("user", "first question"),
        ("assistant", "first answer"),
        ("user", "second try"),
    ]
    assert len(stored_texts(db, sid)) == 6


def test_rewind_then_usage(co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer) -> None:
    db = db_path(co_server_env)
    sid = seed_session(db, turn("one", "answer one"), turn("two", "answer two"))
    scripted_server.script(Text("a better two", usage=Usage(prompt_tokens=120, completion_tokens=7)))
    child = spawn_co(["chat", "--resume", sid], env=co_server_env, cwd=workdir)
    try:
        expect_prompt(child)
        send_line(child, "/rewind")
        out = expect_prompt(child)
        [fork] = new_sessions(db, {sid})
        assert f"Rewound after message #1: continuing in {fork}; {sid[:8]} stays as it was." in out
        send_line(child, "two, differently")
        assert "a better two" in expect_prompt(child)
        send_line(child, "/usage")
        out = expect_prompt(child)
        assert "Last turn: 1 request · 120 in" in out and "7 out · unknown" in out
        assert "This session:" in out and "chat: 1 request" in out
        send_line(child, "/rewind 7")
        assert "no message #7" in expect_prompt(child)
        ctrl_d(child)
        child.expect(pexpect.EOF, timeout=15)
    finally:
        if child.isalive():
            child.terminate(force=True)
    assert "Traceback" not in transcript(child)
    assert conversation(scripted_server.chat_requests[-1]) == [
        ("user", "one"),
        ("assistant", "answer one"),
        ("user", "two, differently"),
    ]
    assert [t[3] for t in stored_texts(db, sid)] == ["one", "answer one", "two", "answer two"]
    usage = run_co(["usage", "--by", "session", "--json"], co_server_env, workdir)
    assert_ok(usage)
    assert '"key": "' + fork in usage.stdout and '"cost_usd": null' in usage.stdout


def test_a_title_is_written_after_the_first_exchange(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    env = {**co_server_env, "CO_CLI_AUTO_TITLE": "true"}
    scripted_server.script(Text("Paris, I think."), Text("Capital of France"))
    result = run_co(["chat", "-p", "what is the capital of france, roughly speaking?"], env, workdir)
    assert_ok(result)
    assert result.stdout.strip() == "Paris, I think."
    [(sid, title)] = query(db_path(env), "SELECT id, title FROM sessions")
    assert title == "Capital of France"
    assert len(scripted_server.chat_requests) == 2
    assert "Title (at most 8 words)" in scripted_server.chat_requests[1].all_text
    shown = run_co(["sessions", "show", sid], {**env, "COLUMNS": "160"}, workdir)
    assert "usage chat: 1 request" in shown.stdout and "usage title: 1 request" in shown.stdout
