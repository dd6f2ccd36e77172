"""End to end: the real `co chat` in a pseudo-terminal against the scripted server, the model changing files with
write_file and edit_file: the diff is the question, one key answers it."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pexpect
import pytest

from tests.support.co_process import expect_prompt, run_co, send_line, spawn_co
from tests.support.screen import line_colour, screen_lines
from tests.support.scripted_server import Hang, ScriptedServer, Text, ToolCalls

pytestmark = pytest.mark.e2e


@pytest.fixture
def repl(co_server_env: dict[str, str], workdir: Path):  # type: ignore[no-untyped-def]
    child = spawn_co(["chat"], env=co_server_env, cwd=workdir)
    expect_prompt(child)
    yield child
    if child.isalive():
        child.terminate(force=True)


def tool_results(server: ScriptedServer) -> list[str]:
    return [str(m.get("content")) for m in server.chat_requests[-1].messages if m.get("role") == "tool"]


def test_an_edit_is_shown_as_a_coloured_diff_and_applied(
    repl: pexpect.spawn, scripted_server: ScriptedServer, workdir: Path
) -> None:
    target = workdir / "app.py"
    target.write_text("def main():\n    print('old greeting')\n")
    edit = {"path": "app.py", "old_string": "print('old greeting')", "new_string": "print('new greeting')"}
    scripted_server.script(ToolCalls([("edit_file", edit)]), Text("Changed it."))
    send_line(repl, "change the greeting")
    repl.expect("yes, once", timeout=20)
    screen = screen_lines(repl)
    assert "Approve edit_file: app.py" in screen
    assert "-    print('old greeting')" in screen and "+    print('new greeting')" in screen
    assert line_colour(repl, "+    print('new greeting')") == "green"
    assert line_colour(repl, "-    print('old greeting')") == "red"
    assert any("allow edits of app.py for the rest of the session" in line for line in screen)
    assert target.read_text() == "def main():\n    print('old greeting')\n"  # nothing before the answer
    repl.send("y")
    assert "Changed it." in expect_prompt(repl)
    assert target.read_text() == "def main():\n    print('new greeting')\n"
    assert any("Edited app.py (+1 -1 lines)" in r for r in tool_results(scripted_server))


def test_a_denied_edit_leaves_the_file_untouched(
    repl: pexpect.spawn, scripted_server: ScriptedServer, workdir: Path
) -> None:
    target = workdir / "notes.txt"
    target.write_bytes(b"keep me\r\n")
    scripted_server.script(ToolCalls([("write_file", {"path": "notes.txt", "content": "gone\n"})]), Text("Fine."))
    send_line(repl, "replace the notes")
    repl.expect("yes, once", timeout=20)
    repl.send("n")
    assert "Fine." in expect_prompt(repl)
    assert target.read_bytes() == b"keep me\r\n"
    assert any("denied" in r.lower() for r in tool_results(scripted_server))


def test_a_long_diff_is_cut_to_the_screen_and_d_shows_the_rest(
    co_server_env: dict[str, str], scripted_server: ScriptedServer, workdir: Path
) -> None:
    child = spawn_co(["chat"], env=co_server_env, cwd=workdir, dimensions=(24, 100))
    try:
        expect_prompt(child)
        content = "".join(f"line number {n}\n" for n in range(1, 61))
        scripted_server.script(ToolCalls([("write_file", {"path": "long.txt", "content": content})]), Text("Wrote."))
        send_line(child, "write it")
        child.expect("more lines of the diff", timeout=20)
        screen = "\n".join(screen_lines(child))
        assert "+line number 1" in screen and "+line number 60" not in screen
        assert "(d shows them)" in screen
        child.send("d")
        child.expect("yes, once", timeout=10)
        assert "+line number 60" in "\n".join(screen_lines(child))
        child.send("y")
        assert "Wrote." in expect_prompt(child)
        assert (workdir / "long.txt").read_text() == content
    finally:
        child.terminate(force=True)


def test_print_mode_denies_an_edit_unless_approve_all(
    co_server_env: dict[str, str], scripted_server: ScriptedServer, workdir: Path
) -> None:
    call = ToolCalls([("write_file", {"path": "p.txt", "content": "made\n"})])
    scripted_server.script(call, Text("could not"))
    result = run_co(["-p", "make p.txt"], env=co_server_env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert not (workdir / "p.txt").exists()
    scripted_server.script(call, Text("made it"))
    result = run_co(["--approve-all", "-p", "make p.txt"], env=co_server_env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert (workdir / "p.txt").read_text() == "made\n"


def _two_turns_of_edits(child: pexpect.spawn, server: ScriptedServer, workdir: Path) -> None:
    """Turn 1 creates new.txt and edits a.txt (CRLF, "a": edits of a.txt allowed from now); turn 2 edits a.txt
    again without a question and replaces gone.txt."""
    (workdir / "a.txt").write_bytes(b"A0\r\nkeep\r\n")
    (workdir / "gone.txt").write_bytes(b"bye\n")
    server.script(
        ToolCalls(
            [
                ("write_file", {"path": "new.txt", "content": "created\n"}),
                ("edit_file", {"path": "a.txt", "old_string": "A0", "new_string": "A1"}),
            ]
        ),
        Text("turn one done"),
        ToolCalls(
            [
                ("edit_file", {"path": "a.txt", "old_string": "A1", "new_string": "A2"}),
                ("write_file", {"path": "gone.txt", "content": "replaced\n"}),
            ]
        ),
        Text("turn two done"),
    )
    send_line(child, "turn one")
    child.expect("Approve write_file: new.txt", timeout=20)
    child.expect("yes, once", timeout=5)
    child.send("y")
    child.expect("Approve edit_file: a.txt", timeout=20)
    child.expect("yes, once", timeout=5)
    child.send("a")
    assert "turn one done" in expect_prompt(child)
    send_line(child, "turn two")
    child.expect("Approve write_file: gone.txt", timeout=20)
    child.expect("yes, once", timeout=5)
    child.send("y")
    assert "turn two done" in expect_prompt(child)
    assert (workdir / "a.txt").read_bytes() == b"A2\r\nkeep\r\n"
    assert (workdir / "gone.txt").read_bytes() == b"replaced\n"
    assert (workdir / "new.txt").read_bytes() == b"created\n"


def test_rewind_takes_the_files_back_and_asks_about_a_file_the_user_changed(
    repl: pexpect.spawn, scripted_server: ScriptedServer, workdir: Path
) -> None:
    _two_turns_of_edits(repl, scripted_server, workdir)
    send_line(repl, "/rewind")
    repl.expect("Take the files back too", timeout=10)
    listed = [line for line in screen_lines(repl) if "co changed" in line][-1]
    assert "a.txt (restore)" in listed and "gone.txt (restore)" in listed and "new.txt" not in listed
    send_line(repl, "f")
    expect_prompt(repl)
    assert (workdir / "a.txt").read_bytes() == b"A1\r\nkeep\r\n"
    assert (workdir / "gone.txt").read_bytes() == b"bye\n"
    assert (workdir / "new.txt").read_bytes() == b"created\n"
    # Back to the start, with a.txt changed by hand since co's edit: its own question, answered no.
    (workdir / "a.txt").write_bytes(b"my own edit\n")
    send_line(repl, "/rewind")
    repl.expect("Take the files back too", timeout=10)
    send_line(repl, "f")
    repl.expect("a.txt was changed since co's edit; restore it anyway", timeout=10)
    send_line(repl, "n")
    expect_prompt(repl)
    assert not (workdir / "new.txt").exists()
    assert (workdir / "a.txt").read_bytes() == b"my own edit\n"
    assert (workdir / "gone.txt").read_bytes() == b"bye\n"


def test_rewind_conversation_only_leaves_the_files(
    repl: pexpect.spawn, scripted_server: ScriptedServer, workdir: Path
) -> None:
    _two_turns_of_edits(repl, scripted_server, workdir)
    send_line(repl, "/rewind")
    repl.expect("Take the files back too", timeout=10)
    send_line(repl, "c")
    out = expect_prompt(repl)
    assert "co sessions undo-files" in out
    assert (workdir / "a.txt").read_bytes() == b"A2\r\nkeep\r\n"
    assert (workdir / "gone.txt").read_bytes() == b"replaced\n"


def test_fork_at_takes_the_files_back_to_that_point(
    co_server_env: dict[str, str], scripted_server: ScriptedServer, workdir: Path
) -> None:
    child = spawn_co(["chat"], env=co_server_env, cwd=workdir)
    try:
        expect_prompt(child)
        _two_turns_of_edits(child, scripted_server, workdir)
        send_line(child, "/exit")
        child.expect(pexpect.EOF, timeout=20)
    finally:
        child.terminate(force=True)
    listed = run_co(["sessions", "list", "--json"], env=co_server_env, cwd=workdir)
    session_id = json.loads(listed.stdout)[0]["id"]
    shown = run_co(["sessions", "show", session_id], env=co_server_env, cwd=workdir)
    assert "a.txt" in shown.stdout and "new.txt" in shown.stdout and "gone.txt" in shown.stdout
    assert "new.txt (created): #0 write_file" in shown.stdout and "a.txt: #0 edit_file, #4 edit_file" in shown.stdout
    # Turn one: #0 the prompt, #1 the two tool calls, #2 their results, #3 the answer; fork after it.
    end_of_turn_one = 3
    child = spawn_co(
        ["chat", "--resume", session_id, "--fork-at", str(end_of_turn_one)], env=co_server_env, cwd=workdir
    )
    try:
        child.expect("Take the files back too", timeout=20)
        child.send("f\r")
        expect_prompt(child)
        assert (workdir / "a.txt").read_bytes() == b"A1\r\nkeep\r\n"
        assert (workdir / "gone.txt").read_bytes() == b"bye\n"
        assert (workdir / "new.txt").read_bytes() == b"created\n"
    finally:
        child.terminate(force=True)


def test_kill_9_after_an_edit_keeps_the_new_file_and_its_checkpoint(
    co_server_env: dict[str, str], scripted_server: ScriptedServer, workdir: Path
) -> None:
    """co killed while the model answers after an edit: the new file and its checkpoint; resumed, /rewind
    takes the file back to the bytes it had."""
    target = workdir / "f.txt"
    target.write_bytes(b"before\n")
    scripted_server.script(ToolCalls([("write_file", {"path": "f.txt", "content": "after\n"})]), Hang(30))
    child = spawn_co(["chat"], env=co_server_env, cwd=workdir)
    try:
        expect_prompt(child)
        send_line(child, "change f")
        child.expect("yes, once", timeout=20)
        child.send("y")
        scripted_server.wait_for_requests(2, timeout=20)  # the answer is being waited for: the edit is done
        assert target.read_bytes() == b"after\n"
        os.kill(child.pid, signal.SIGKILL)
        child.expect(pexpect.EOF, timeout=10)
    finally:
        child.terminate(force=True)
    scripted_server.script(Text("resumed"))
    child = spawn_co(["chat", "--resume", "@latest"], env=co_server_env, cwd=workdir)
    try:
        expect_prompt(child)
        send_line(child, "/rewind")
        child.expect("Take the files back too", timeout=10)
        send_line(child, "f")
        expect_prompt(child)
        assert target.read_bytes() == b"before\n"
    finally:
        child.terminate(force=True)
