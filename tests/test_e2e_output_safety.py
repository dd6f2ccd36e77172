"""Terminal control sequences from files, models and servers never reach the terminal in `co chat -p`."""

from __future__ import annotations

from pathlib import Path

import pexpect
import pytest

from tests.support.co_process import run_co, spawn_co
from tests.support.scripted_server import Error, ScriptedServer, Text, ToolCalls

pytestmark = pytest.mark.e2e

CLIPBOARD = "\x1b]52;c;ZXZpbA==\x07"  # OSC 52: write the clipboard
CLIPBOARD_C1 = "\x9d52;c;ZXZpbA==\x9c"  # the same with the 8-bit OSC and ST
ANSWER = f"The file says \x1b[31mhello\x1b[0m{CLIPBOARD}{CLIPBOARD_C1}\x1b]0;title\x07 done."


def _script(server: ScriptedServer, workdir: Path) -> None:
    (workdir / "evil.txt").write_text(f"{CLIPBOARD}first line{CLIPBOARD_C1}\nsecond line\n")
    (workdir / "sub").mkdir()
    calls = [("read_file", {"path": "evil.txt"}), ("grep", {"pattern": f"x{CLIPBOARD}", "path": "sub"})]
    server.script(ToolCalls(calls), Text(ANSWER))


def test_print_mode_in_a_terminal_writes_no_clipboard(
    co_server_env: dict[str, str], scripted_server: ScriptedServer, workdir: Path
) -> None:
    _script(scripted_server, workdir)
    child = spawn_co(["chat", "-p", "what is in evil.txt?"], env=co_server_env, cwd=workdir)
    child.expect(pexpect.EOF, timeout=30)
    child.close()
    raw = child.logfile_read.getvalue()
    assert child.exitstatus == 0, raw
    assert "first line" in raw and "done." in raw  # the tool line and the answer were shown
    for control in ("\x1b]", "\x9d", "\x9c", "\x07", "\x1b[31m"):
        assert control not in raw, (control, raw)


def test_print_mode_keeps_the_answer_exact_for_a_pipe(
    co_server_env: dict[str, str], scripted_server: ScriptedServer, workdir: Path
) -> None:
    _script(scripted_server, workdir)
    result = run_co(["chat", "-p", "what is in evil.txt?"], co_server_env, workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ANSWER + "\n"  # data for the next program, byte for byte
    assert "first line" in result.stderr
    assert "\x1b" not in result.stderr and "\x9d" not in result.stderr and "\x07" not in result.stderr


def test_provider_error_body_carries_no_controls(
    co_server_env: dict[str, str], scripted_server: ScriptedServer, workdir: Path
) -> None:
    scripted_server.script(Error(500, f"upstream {CLIPBOARD}exploded\x1b[2J"))
    child = spawn_co(["chat", "-p", "hi"], env=co_server_env, cwd=workdir)
    child.expect(pexpect.EOF, timeout=30)
    child.close()
    raw = child.logfile_read.getvalue()
    assert child.exitstatus == 1 and "exploded" in raw
    assert "\x1b]" not in raw and "\x1b[2J" not in raw and "\x07" not in raw
