"""End to end: MCP servers through the real `co` (subprocess and pseudo-terminal) and the scripted model server.

The MCP server is the tests' own (tests/support/mcp_server.py, the ``mcp`` package's server side) over stdio.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.support.co_process import (
    CO_COMMAND,
    co_environment,
    ctrl_d,
    expect_prompt,
    run_co,
    send_line,
    spawn_co,
    transcript,
)
from tests.support.mcp_servers import http_server
from tests.support.processes import wait_for_file
from tests.support.saved_sessions import assert_ok
from tests.support.scripted_server import ScriptedServer, Text, ToolCalls

__all__ = ["http_server"]

pytestmark = pytest.mark.e2e

SERVER = str(Path(__file__).parent / "support" / "mcp_server.py")


def server_spec(pid_file: Path | None = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"command": sys.executable, "args": [SERVER, "stdio"], **extra}
    if pid_file is not None:
        spec["env"] = {"MCP_TEST_PID_FILE": str(pid_file)}
    return spec


def with_servers(env: dict[str, str], **servers: dict[str, Any]) -> dict[str, str]:
    return {**env, "CO_CLI_MCP_SERVERS": json.dumps(servers)}


def offered(request: Any) -> list[str]:
    return [tool["function"]["name"] for tool in (request.body or {}).get("tools", [])]


def tool_results(request: Any) -> list[str]:
    return [str(m.get("content")) for m in request.messages if m.get("role") == "tool"]


def pids(pid_file: Path) -> list[int]:
    return [int(line) for line in pid_file.read_text().split()] if pid_file.exists() else []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for good, only not reaped yet (its parent is the test's child)
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def wait_gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_print_mode_offers_the_tools_and_runs_an_approved_call(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    env = with_servers(co_server_env, tracker=server_spec(pid_file))
    scripted_server.script(ToolCalls([("mcp__tracker__echo", {"text": "from co"})]), Text("The server echoed."))
    result = run_co(["chat", "-p", "use the tracker", "--approve-all"], env, workdir)
    assert_ok(result)
    assert "The server echoed." in result.stdout
    first, second = scripted_server.chat_requests
    assert "mcp__tracker__echo" in offered(first) and "read_file" in offered(first)
    assert tool_results(second) == ["echo: from co"]
    [pid] = pids(pid_file)
    assert wait_gone(pid)  # stopped when co ended


def test_print_mode_denies_a_call_without_approve_all(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    env = with_servers(co_server_env, tracker=server_spec())
    scripted_server.script(ToolCalls([("mcp__tracker__echo", {"text": "x"})]), Text("Denied, fine."))
    result = run_co(["chat", "-p", "use the tracker"], env, workdir)
    assert_ok(result)
    [denied] = tool_results(scripted_server.chat_requests[1])
    assert "--approve-all" in denied and "echo: x" not in denied


def test_an_untrusted_project_server_is_not_started_until_allowed(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    project = workdir / ".co-cli"
    project.mkdir()
    settings = project / "settings.json"
    settings.write_text(json.dumps({"mcp_servers": {"proj": server_spec(pid_file, trust=True)}}))
    scripted_server.script(Text("no tools"))
    result = run_co(["chat", "-p", "hi"], co_server_env, workdir)
    assert_ok(result)
    assert "co config trust allow --mcp proj" in result.stderr
    assert "'trust' and 'trusted_tools' count only in your own settings" in result.stderr
    assert not any(name.startswith("mcp__") for name in offered(scripted_server.chat_requests[0]))
    assert pids(pid_file) == []  # never started

    listed = run_co(["mcp", "list"], co_server_env, workdir)
    assert_ok(listed)
    assert "not allowed" in listed.stdout and pids(pid_file) == []

    allowed = run_co(["config", "trust", "allow", "--mcp", "proj"], co_server_env, workdir)
    assert_ok(allowed)
    assert "MCP server proj" in allowed.stdout
    assert f"\n  run {sys.executable} {SERVER} stdio\n  env MCP_TEST_PID_FILE={pid_file}\n" in allowed.stdout
    assert "MCP server proj" in run_co(["config", "trust", "list"], co_server_env, workdir).stdout

    scripted_server.script(ToolCalls([("mcp__proj__echo", {"text": "y"})]), Text("done"))
    result = run_co(["chat", "-p", "hi"], co_server_env, workdir)
    assert_ok(result)
    assert "mcp__proj__echo" in offered(scripted_server.chat_requests[1])
    # The project's own "trust" does not count: without --approve-all the call is denied.
    assert "--approve-all" in tool_results(scripted_server.chat_requests[2])[0]

    # A changed definition is another server: not allowed until allowed again.
    settings.write_text(json.dumps({"mcp_servers": {"proj": server_spec(pid_file, args=[SERVER, "stdio", "-x"])}}))
    changed = run_co(["chat", "-p", "hi"], co_server_env, workdir)
    assert "co config trust allow --mcp proj" in changed.stderr


def test_the_start_question_shows_env_and_cwd_and_no_planted_line(
    co_server_env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    pid_file, hack = tmp_path / "pids", workdir / "hack"
    hack.mkdir()
    (hack / "sitecustomize.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    spec = server_spec(pid_file, cwd=str(workdir), args=[SERVER, "stdio", "\nAllow? this is fine \u202eenif"])
    spec["env"]["PYTHONPATH"] = "./hack"
    (workdir / ".co-cli").mkdir()
    (workdir / ".co-cli" / "settings.json").write_text(json.dumps({"mcp_servers": {"proj": spec}}))
    child = spawn_co(["chat"], env=co_server_env, cwd=workdir)
    try:
        child.expect_exact("[y/N] ", timeout=20)
        question = transcript(child).splitlines()
        start = next(i for i, line in enumerate(question) if "asks co to start MCP server 'proj'" in line)
        assert question[start + 1 :] == [
            f"  run {sys.executable} {SERVER} stdio '\\nAllow? this is fine \\u202eenif'",
            f"  env MCP_TEST_PID_FILE={pid_file} PYTHONPATH=./hack",
            f"  cwd {workdir}",
            f"Allow this MCP server for {workdir.resolve()}? (remembered; undo with `co config trust revoke`) [y/N] ",
        ]
        send_line(child, "n")
        expect_prompt(child)
        ctrl_d(child)
        child.expect(pexpect.EOF, timeout=10)
    finally:
        child.terminate(force=True)
    assert pids(pid_file) == [] and not (tmp_path / "ran").exists()


def test_mcp_list_shows_servers_tools_and_schema_tokens(co_env: dict[str, str], workdir: Path) -> None:
    env = with_servers(
        co_env, tracker=server_spec(), broken={"command": sys.executable, "args": [SERVER, "stdio", "--fail-start"]}
    )
    result = run_co(["mcp", "list", "--json"], env, workdir)
    assert_ok(result)
    listed = {server["name"]: server for server in json.loads(result.stdout)}
    tracker, broken = listed["tracker"], listed["broken"]
    assert tracker["status"] == "running" and tracker["transport"] == "stdio"
    names = [tool["name"] for tool in tracker["tools"]]
    assert "mcp__tracker__echo" in names and all(tool["tokens"] > 0 for tool in tracker["tools"])
    assert tracker["tokens"] == sum(tool["tokens"] for tool in tracker["tools"])
    assert broken["status"] == "failed" and "cannot start: missing configuration" in broken["detail"]


def test_config_show_masks_env_and_header_values(co_env: dict[str, str], workdir: Path) -> None:
    env = with_servers(
        co_env,
        local={"command": "srv", "env": {"API_TOKEN": "sk-hidden-1"}},
        remote={"url": "https://user:pw@example.com/mcp", "headers": {"Authorization": "Bearer hidden-2"}},
    )
    result = run_co(["config", "show", "--json"], env, workdir)
    assert_ok(result)
    [row] = [r for r in json.loads(result.stdout) if r["name"] == "mcp_servers"]
    assert "API_TOKEN" in row["value"] and "Authorization" in row["value"]
    for secret in ("sk-hidden-1", "hidden-2", "pw@"):
        assert secret not in result.stdout


def test_a_saved_mcp_call_is_shown_exported_and_resumed_without_its_server(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    env = with_servers(co_server_env, tracker=server_spec())
    scripted_server.script(ToolCalls([("mcp__tracker__echo", {"text": "keep me"})]), Text("Echoed."))
    assert_ok(run_co(["chat", "-p", "use the tracker", "--approve-all"], env, workdir))
    session_id = json.loads(run_co(["sessions", "list", "--json"], co_server_env, workdir).stdout)[0]["id"]
    shown = run_co(["sessions", "show", session_id], co_server_env, workdir)
    assert_ok(shown)
    assert "mcp__tracker__echo" in shown.stdout and "echo: keep me" in shown.stdout
    exported = run_co(["sessions", "export", session_id, "--format", "json"], co_server_env, workdir)
    assert_ok(exported)
    assert "mcp__tracker__echo" in exported.stdout and "echo: keep me" in exported.stdout

    # The server is gone from the settings: the session resumes, and the model is sent the old call and result.
    scripted_server.script(Text("Still here."))
    resumed = run_co(["chat", "-c", "-p", "what did the tracker say?"], co_server_env, workdir)
    assert_ok(resumed)
    last = scripted_server.chat_requests[-1]
    assert tool_results(last) == ["echo: keep me"] and not any(n.startswith("mcp__") for n in offered(last))


@pytest.mark.parametrize("how", ["ctrl-d", "SIGTERM", "SIGHUP"])
def test_no_server_process_outlives_co(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer, tmp_path: Path, how: str
) -> None:
    pid_file = tmp_path / "pids"
    # A server that stays alive when its stdin closes: only co killing it ends it.
    env = with_servers(co_server_env, tracker=server_spec(pid_file, args=[SERVER, "stdio", "--linger"]))
    child = spawn_co(["chat"], env=env, cwd=workdir)
    try:
        expect_prompt(child)
        deadline = time.monotonic() + 20
        while not pids(pid_file) and time.monotonic() < deadline:
            time.sleep(0.1)
        [pid] = pids(pid_file)
        assert alive(pid)
        if how == "ctrl-d":
            ctrl_d(child)
        else:
            child.kill(getattr(signal, how))
        child.expect(pexpect.EOF, timeout=15)
        assert wait_gone(pid), f"the MCP server {pid} outlived co ({how})"
    finally:
        if child.isalive():
            child.terminate(force=True)


@pytest.mark.timeout(120)
def test_what_a_co_killed_with_sigkill_left_running_ends_when_the_next_co_starts(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer, tmp_path: Path
) -> None:
    """kill -9 gives co no chance to end anything: its MCP server (one that outlives its stdin, and one process it
    detached) and its running command (with a child that left the group) go on. The next co ends them all, even
    one with no MCP server configured."""
    pid_file, detached_file = tmp_path / "pids", tmp_path / "detached.pid"
    spec = server_spec(pid_file, args=[SERVER, "stdio", "--linger", "--detach", str(detached_file)])
    command = "echo $$ > shell.pid; setsid sleep 300 >/dev/null 2>&1 </dev/null & echo $! > escaped.pid; sleep 300"
    scripted_server.script(ToolCalls([("run_shell", {"command": command})]), Text("never reached"))
    co = subprocess.Popen(
        [*CO_COMMAND, "chat", "-p", "run it", "--approve-all"],
        # outside the sandbox: inside it the pids are the sandbox's own, and its processes end with it
        env=co_environment({**with_servers(co_server_env, busy=spec), "CO_CLI_SHELL_SANDBOX": "off"}),
        cwd=workdir,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        left = [
            int(wait_for_file(path, 30)) for path in (workdir / "shell.pid", workdir / "escaped.pid", detached_file)
        ]
        [server] = pids(pid_file)
        left.append(server)
        co.kill()
        co.wait(timeout=10)
    finally:
        if co.poll() is None:
            co.kill()
    time.sleep(0.5)
    assert all(alive(pid) for pid in left), "nothing ends them while no co runs"

    scripted_server.script(Text("hello again"))
    assert_ok(run_co(["chat", "-p", "hi"], co_server_env, workdir))
    for pid in left:
        assert wait_gone(pid), f"{pid} outlived the co that started it and the next one"


def test_the_repl_asks_with_always_for_this_tool_and_shows_mcp(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    env = with_servers(co_server_env, tracker=server_spec())
    child = spawn_co(["chat"], env=env, cwd=workdir)
    try:
        expect_prompt(child)
        scripted_server.script(
            ToolCalls([("mcp__tracker__add", {"a": 2, "b": 3})]),
            ToolCalls([("mcp__tracker__add", {"a": 4, "b": 5})]),
            Text("Added twice."),
        )
        send_line(child, "add please")
        child.expect("Approve mcp__tracker__add", timeout=30)
        child.expect("allow this tool of tracker for the rest of the session", timeout=10)
        child.send("a")
        out = expect_prompt(child, timeout=30)
        assert "Added twice." in out and out.count("Approve mcp__tracker__add") == 0  # asked once
        assert tool_results(scripted_server.chat_requests[-1]) == ["5", "9"]
        send_line(child, "/mcp")
        out = expect_prompt(child)
        assert "tracker" in out and "running" in out and "mcp__tracker__add" in out
        ctrl_d(child)
        child.expect(pexpect.EOF, timeout=15)
    finally:
        if child.isalive():
            child.terminate(force=True)


def test_a_huge_output_is_offloaded_and_the_model_gets_a_preview(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    env = with_servers(co_server_env, tracker=server_spec(trust=True))
    scripted_server.script(ToolCalls([("mcp__tracker__big", {"chars": 200_000})]), Text("Summarised."))
    assert_ok(run_co(["chat", "-p", "get the big one"], env, workdir))
    [preview] = tool_results(scripted_server.chat_requests[1])
    assert len(preview) < 5_000 and "saved as ref=" in preview
    saved = list((Path(co_server_env["CO_CLI_DATA_DIR"]) / "tool-outputs").rglob("*.txt"))
    assert [len(path.read_text()) for path in saved] == [200_000]


def test_a_server_that_crashes_is_one_line_and_the_answer_still_comes(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    env = with_servers(co_server_env, tracker=server_spec(trust=True))
    scripted_server.script(ToolCalls([("mcp__tracker__crash", {})]), Text("The tracker is down."))
    result = run_co(["chat", "-p", "crash it"], env, workdir)
    assert_ok(result)
    assert "The tracker is down." in result.stdout
    [notice] = [line for line in result.stderr.splitlines() if line.startswith("note: MCP server tracker")]
    assert "stopped: Connection closed" in notice and "tracker.log" in notice
    assert "not available" in tool_results(scripted_server.chat_requests[1])[0]


def test_a_streamable_http_server_through_co(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer, http_server: str
) -> None:
    env = with_servers(co_server_env, web={"url": http_server, "headers": {"X-Token": "t0k"}})
    scripted_server.script(ToolCalls([("mcp__web__echo", {"text": "over http"})]), Text("Done."))
    assert_ok(run_co(["chat", "-p", "use the web server", "--approve-all"], env, workdir))
    assert "mcp__web__echo" in offered(scripted_server.chat_requests[0])
    assert tool_results(scripted_server.chat_requests[1]) == ["echo: over http"]
