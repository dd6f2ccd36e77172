"""End to end: the real `co` with hostile session content on a terminal, a session held by another co,
imports that must be resumable, a database on read-only media, and credentials in the server URL."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.support.co_process import CO_COMMAND, co_environment, run_co, spawn_co
from tests.support.scripted_server import ScriptedServer, Text

pytestmark = pytest.mark.e2e

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
CLEAR = "\x1b[2J"
C1_CSI = "\x9b2J"


def db_path(env: dict[str, str]) -> Path:
    return Path(env["CO_CLI_DATA_DIR"]) / "co-cli.db"


def seed(db: Path, messages: list[Any], *, model: str = "scripted", cwd: str = "/work", title: str = "") -> str:
    from co_cli.store import Store

    db.parent.mkdir(parents=True, exist_ok=True)
    with Store.open(db) as store:
        sid = store.sessions.create(model=model, cwd=cwd, title=title).id
        seq = store.messages.begin_turn(sid, messages[0].parts[0].content)
        store.messages.finish_turn(sid, seq, messages)
    return sid


def plain_turn(prompt: str, answer: str) -> list[Any]:
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    return [ModelRequest(parts=[UserPromptPart(prompt)]), ModelResponse(parts=[TextPart(answer)])]


def terminal_output(args: list[str], env: dict[str, str], cwd: Path) -> tuple[str, int]:
    """Everything ``co ARGS`` writes to a terminal (raw, escape sequences included) and its exit status."""
    child = spawn_co(args, env, cwd, dimensions=(50, 200))
    child.expect(pexpect.EOF, timeout=30)
    child.close()
    log = child.logfile_read.getvalue()
    return log, child.exitstatus


def assert_ok(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"


# ----- control sequences from a session never reach the terminal ---------------------------------------


def test_sessions_commands_on_a_terminal_print_no_control_sequences(co_env: dict[str, str], workdir: Path) -> None:
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    db = db_path(co_env)
    sid = seed(
        db,
        [
            ModelRequest(parts=[UserPromptPart(f"pelican {OSC52}")]),
            ModelResponse(parts=[ToolCallPart(f"read{CLEAR}_file", {"path": f"a{C1_CSI}"}, "c1")]),
            ModelRequest(parts=[ToolReturnPart(f"read{CLEAR}_file", f"pelican {OSC52}{C1_CSI}", "c1")]),
            ModelResponse(parts=[TextPart(f"pelican done {CLEAR}{C1_CSI}")]),
        ],
        model=f"evil{OSC52}",
        cwd=f"/w{CLEAR}",
    )
    conn = sqlite3.connect(db)  # as another program or an older co may have stored it
    conn.execute("UPDATE sessions SET title = ? WHERE id = ?", (f"pelican {OSC52}{C1_CSI}", sid))
    conn.commit()
    conn.close()
    for args in (["export", sid], ["export", sid, "-f", "json"]):
        raw, status = terminal_output(["sessions", *args], co_env, workdir)
        assert status == 0, raw
        assert "pelican" in raw and "\x1b" not in raw and "\x9b" not in raw, repr(raw)
    for args in (["show", sid], ["list"], ["search", "pelican"]):
        raw, status = terminal_output(["sessions", *args], co_env, workdir)
        assert status == 0, raw
        assert "pelican" in raw
        # co's own colours are fine; the session's sequences are not.
        assert "\x1b]" not in raw and CLEAR not in raw and "\x9b" not in raw and "\x07" not in raw, repr(raw)
    piped = run_co(["sessions", "export", sid], co_env, workdir)
    assert_ok(piped)
    assert OSC52 in piped.stdout and CLEAR in piped.stdout  # a pipe gets the transcript exactly


# ----- a session open in another co: refused, taken when its holder is gone, taken with --force -------


def _wait_for_owner(db: Path, sid: str, pid: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while True:
        conn = sqlite3.connect(db)
        owner = conn.execute("SELECT owner_pid FROM sessions WHERE id = ?", (sid,)).fetchone()[0]
        conn.close()
        if owner == pid:
            return
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the first co never opened the session"
        time.sleep(0.05)


def test_force_takes_over_a_session_open_in_a_live_co(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    db = db_path(co_server_env)
    sid = seed(db, plain_turn("shared start", "shared answer"))
    holder = subprocess.Popen(
        [*CO_COMMAND, "chat", "--resume", sid],
        env=co_environment(co_server_env),
        cwd=workdir,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_owner(db, sid, holder.pid, holder)
        refused = run_co(["chat", "--resume", sid, "-p", "second writer"], co_server_env, workdir)
        assert refused.returncode == 5, refused.stderr
        assert refused.stderr.count("\n") == 1 and "--fork" in refused.stderr and "--force" in refused.stderr
        forced = run_co(["chat", "--resume", sid, "--force", "-p", "taken over"], co_server_env, workdir)
        assert_ok(forced)
        assert forced.stdout.strip() == "echo: taken over"
    finally:
        holder.kill()
        holder.communicate()
    # The holder died with its lock: the session is free again without --force.
    after = run_co(["chat", "--resume", sid, "-p", "after the holder died"], co_server_env, workdir)
    assert_ok(after)
    usage = run_co(["chat", "--force", "-p", "x"], co_server_env, workdir)
    assert usage.returncode == 2 and "--force needs --resume" in usage.stderr


# ----- an imported session ending in an unanswered tool call can be continued --------------------------


def test_imported_session_ending_in_a_tool_call_resumes(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer, tmp_path: Path
) -> None:
    from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponse, ToolCallPart

    db = db_path(co_server_env)
    sid = seed(db, plain_turn("list the files", "sure"))
    exported = run_co(["sessions", "export", sid, "-f", "json"], co_server_env, workdir)
    assert_ok(exported)
    document = json.loads(exported.stdout)
    dangling = ModelResponse(parts=[ToolCallPart("list_dir", {"path": "."}, "never_answered")])
    message = ModelMessagesTypeAdapter.dump_python([dangling], mode="json")[0]
    document["messages"].append(
        {"seq": 2, "created_at": time.time(), "kind": "tool-call", "status": "ok", "message": message}
    )
    document["session"]["id"] = "0" * 20
    file = tmp_path / "dangling.json"
    file.write_text(json.dumps(document))
    imported = run_co(["sessions", "import", str(file)], co_server_env, workdir)
    assert_ok(imported)
    scripted_server.script(Text("continued fine"))
    resumed = run_co(["chat", "--resume", "0" * 20, "-p", "go on"], co_server_env, workdir)
    assert_ok(resumed)
    assert "continued fine" in resumed.stdout
    sent = scripted_server.chat_requests[-1].messages
    calls = [m for m in sent if m.get("tool_calls")]
    results = [m for m in sent if m.get("role") == "tool"]
    assert [c["tool_calls"][0]["id"] for c in calls] == [r["tool_call_id"] for r in results] == ["never_answered"]


# ----- a database on read-only media --------------------------------------------------------------------


def test_database_on_a_read_only_mount_lists_and_exports(co_env: dict[str, str], workdir: Path) -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare to mount a read-only directory")
    db = db_path(co_env)
    sid = seed(db, plain_turn("backup of the pelican talk", "kept"))
    data = str(db.parent)
    probe = subprocess.run(["unshare", "-m", "mount", "--bind", "-o", "ro", data, data], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("cannot make a private read-only mount here")

    def in_read_only_mount(*args: str) -> subprocess.CompletedProcess[str]:
        script = 'mount --bind -o ro "$0" "$0" && exec "$@"'
        return subprocess.run(
            ["unshare", "-m", "sh", "-c", script, data, *CO_COMMAND, *args],
            env=co_environment(co_env),
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=60,
        )

    for args in (["sessions", "list"], ["sessions", "show", sid], ["sessions", "search", "pelican"]):
        result = in_read_only_mount(*args)
        assert_ok(result)
        assert sid in result.stdout or "pelican" in result.stdout
    exported = in_read_only_mount("sessions", "export", sid, "-f", "json")
    assert_ok(exported)
    assert json.loads(exported.stdout)["session"]["id"] == sid
    rename = in_read_only_mount("sessions", "rename", sid, "new")
    assert rename.returncode == 3 and rename.stderr.count("\n") == 1 and "read-only" in rename.stderr
    assert sorted(p.name for p in db.parent.iterdir()) == ["co-cli.db"]


# ----- credentials in base_url never reach the database or an export ------------------------------------


def test_credentials_in_base_url_are_not_saved(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    secret = "pw-canary-73b1"
    base = scripted_server.base_url
    scheme, rest = base.split("://", 1)
    # (A key in the query does not survive the SDK's URL joining; the unit tests cover that form.)
    env = {**co_server_env, "CO_CLI_BASE_URL": f"{scheme}://me:{secret}@{rest}"}
    scripted_server.script(Text("hello there"))
    result = run_co(["chat", "-p", "hi"], env, workdir)
    assert_ok(result)
    db = db_path(env)
    conn = sqlite3.connect(db)
    urls = [json.loads(row[0])[0].get("provider_url") for row in conn.execute("SELECT json FROM messages")]
    sid = conn.execute("SELECT id FROM sessions").fetchone()[0]
    conn.close()
    assert any(urls) and all(secret not in (url or "") for url in urls)
    for path in db.parent.iterdir():
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    exported = run_co(["sessions", "export", sid, "-f", "json"], env, workdir)
    assert_ok(exported)
    assert secret not in exported.stdout
