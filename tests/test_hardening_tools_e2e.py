"""End to end: the real co against the scripted server, with hostile tool calls and signals."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.co_process import CO_COMMAND, co_environment, expect_prompt, run_co, send_line, spawn_co
from tests.support.processes import assert_dies, wait_for_file
from tests.support.scripted_server import ScriptedServer, Text, ToolCalls

pytestmark = pytest.mark.e2e


def tool_results(server: ScriptedServer) -> list[str]:
    return [str(m.get("content")) for r in server.chat_requests for m in r.messages if m.get("role") == "tool"]


def start_co(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CO_COMMAND, *args],
        env=co_environment(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


WORDS_PATTERN = r"^(\w+\s?)*$"


@pytest.fixture
def co_server_env(co_server_env: dict[str, str]) -> dict[str, str]:
    """Commands write their pids to files: pids as seen outside the sandbox's pid namespace."""
    return {**co_server_env, "CO_CLI_SHELL_SANDBOX": "off"}


@pytest.mark.timeout(60)
def test_pathological_grep_in_print_mode_returns(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    (workdir / "words.txt").write_text("one two three four five six seven eight!\n" * 100)
    (workdir / "as.txt").write_text("a" * 40 + "b\n")
    scripted_server.script(
        ToolCalls(
            [
                ("grep", {"pattern": WORDS_PATTERN, "path": "words.txt"}),
                ("grep", {"pattern": "(a+)+$", "path": "as.txt"}),
            ]
        ),
        Text("searched"),
    )
    started = time.monotonic()
    result = run_co(["chat", "-p", "search"], co_server_env, workdir, timeout=45)
    assert time.monotonic() - started < 20
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "searched"
    assert tool_results(scripted_server) == [
        f"No matches for {WORDS_PATTERN!r} in words.txt.",
        f"No matches for {'(a+)+$'!r} in as.txt.",
    ]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_signal_during_a_command_kills_it_and_ends_co(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer, sig: signal.Signals
) -> None:
    command = "echo $$ > shell.pid; sleep 300 & echo $! > sleep.pid; wait"
    scripted_server.script(ToolCalls([("run_shell", {"command": command})]), Text("never reached"))
    co = start_co(["chat", "-p", "run it", "--approve-all"], co_server_env, workdir)
    try:
        shell_pid = int(wait_for_file(workdir / "shell.pid", 20))
        sleep_pid = int(wait_for_file(workdir / "sleep.pid", 5))
        co.send_signal(sig)
        co.wait(timeout=10)
    finally:
        if co.poll() is None:
            co.kill()
        output = co.communicate()
    assert co.returncode == 128 + sig, output
    assert_dies(shell_pid)
    assert_dies(sleep_pid)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
@pytest.mark.parametrize(
    "command",
    [
        "setsid bash -c 'echo $$ > escaped.pid; sleep 300' & wait",
        "( ( exec sleep 300 ) & echo $! > escaped.pid ) ; sleep 300",
        "setsid sleep 300 > /dev/null 2>&1 & echo $! > escaped.pid; sleep 300",
    ],
    ids=["setsid holding the output", "double fork", "setsid"],
)
def test_a_signal_ends_co_when_a_command_left_its_group(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer, sig: signal.Signals, command: str
) -> None:
    """A process that left the command's group (and may hold its output pipe) neither keeps co from ending
    nor outlives it; co exits without a traceback."""
    scripted_server.script(ToolCalls([("run_shell", {"command": command})]), Text("never reached"))
    co = start_co(["chat", "-p", "run it", "--approve-all"], co_server_env, workdir)
    try:
        escaped = int(wait_for_file(workdir / "escaped.pid", 20))
        co.send_signal(sig)
        co.wait(timeout=10)
    finally:
        if co.poll() is None:
            co.kill()
        output = co.communicate()
    assert co.returncode == 128 + sig, output
    assert_dies(escaped)
    assert "Traceback" not in output[1] and "Event loop is closed" not in output[1]


@pytest.mark.timeout(60)
def test_background_process_of_a_finished_command_is_killed_at_exit(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    command = "sleep 300 >/dev/null 2>&1 & echo $! > bg.pid; setsid sleep 300 >/dev/null 2>&1 & echo $! > sid.pid"
    scripted_server.script(ToolCalls([("run_shell", {"command": command})]), Text("started it"))
    result = run_co(["chat", "-p", "start", "--approve-all"], co_server_env, workdir)
    assert result.returncode == 0, result.stderr
    assert_dies(int((workdir / "bg.pid").read_text()))
    assert_dies(int((workdir / "sid.pid").read_text()))
    assert "Traceback" not in result.stderr and "Event loop is closed" not in result.stderr


@pytest.mark.timeout(60)
def test_terminal_closed_at_the_prompt_kills_background_commands(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    command = "sleep 300 >/dev/null 2>&1 & echo $! > bg.pid"
    scripted_server.script(ToolCalls([("run_shell", {"command": command})]), Text("started it"))
    child = spawn_co(["chat"], env=co_server_env, cwd=workdir)
    try:
        expect_prompt(child)
        send_line(child, "start a server")
        child.expect("Approve run_shell", timeout=20)
        child.send("y")
        child.expect("started it", timeout=20)
        expect_prompt(child)
        bg_pid = int(wait_for_file(workdir / "bg.pid"))
        child.kill(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while child.isalive():
            assert time.monotonic() < deadline, "co ignored SIGHUP"
            time.sleep(0.05)
    finally:
        if child.isalive():
            child.terminate(force=True)
    assert_dies(bg_pid)


@pytest.mark.timeout(60)
def test_local_error_is_named_not_called_a_connection_failure(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    data_dir = Path(co_server_env["CO_CLI_DATA_DIR"])
    (data_dir / "tool-outputs").write_text("a file where co keeps a directory\n")
    (workdir / "big.txt").write_text("some text\n" * 200)
    scripted_server.script(ToolCalls([("read_file", {"path": "big.txt"})]), Text("read"))
    env = {**co_server_env, "CO_CLI_TOOL_OUTPUT_OFFLOAD_CHARS": "500"}
    result = run_co(["chat", "-p", "read it"], env, workdir)
    assert result.returncode != 0
    assert "connection failed" not in result.stderr and "Traceback" not in result.stderr
    assert f"cannot access {data_dir / 'tool-outputs'}" in result.stderr
    assert "Not a directory" in result.stderr
