"""End to end: the real `co chat` in a pseudo-terminal against the scripted server, the model changing files with
write_file and edit_file: the diff is the question, one key answers it."""

from __future__ import annotations

from pathlib import Path

import pexpect
import pytest

from tests.support.co_process import expect_prompt, run_co, send_line, spawn_co
from tests.support.screen import line_colour, screen_lines
from tests.support.scripted_server import ScriptedServer, Text, ToolCalls

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
