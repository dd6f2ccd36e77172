"""run_shell's sandbox: a sandboxed command cannot write outside the working directory and TMPDIR nor reach the
network, says so when it fails for that reason, and runs outside it only when the user approves that run."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic_ai import ApprovalRequired

from co_cli.config import load_settings
from co_cli.deps import CoDeps
from co_cli.tools import sandbox
from co_cli.tools.approval import build_request
from co_cli.tools.sandbox import bwrap_arguments, probe
from co_cli.tools.shell import run_shell, shell_confinement
from tests.support.deps import ctx_for, make_deps

NO_BWRAP = probe(False) or probe(True)
needs_bwrap = pytest.mark.skipif(bool(NO_BWRAP), reason=f"bubblewrap cannot sandbox commands here: {NO_BWRAP}")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A $HOME of the test's own (outside the working directory)."""
    for name in list(os.environ):
        if name.startswith("CO_CLI_"):
            monkeypatch.delenv(name)
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    return path


def run(deps: CoDeps, command: str, *, approved: bool = True, sandbox_on: bool = True) -> str:
    return asyncio.run(run_shell(ctx_for(deps, approved=approved), command, None, sandbox_on))


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP server on this machine's loopback that answers "pong" to each connection; its port."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            with connection:
                connection.sendall(b"pong")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


def connect_command(port: int) -> str:
    return (
        'python3 -c \'import socket; s = socket.create_connection(("127.0.0.1", '
        f"{port}), 2); print(s.recv(4).decode())'"
    )


@needs_bwrap
def test_a_write_to_home_fails_inside_and_works_outside_when_allowed(tmp_path: Path, home: Path) -> None:
    deps = make_deps(tmp_path)
    target = home / "written"
    inside = run(deps, f"echo inside > {target}")
    assert not target.exists()
    assert "Read-only file system" in inside
    assert "co's sandbox may have stopped this command" in inside and "sandbox=false" in inside
    assert "/sandbox off" in inside and '"shell_sandbox": "off"' in inside
    # Outside the sandbox only when asked for, and the user is asked every time ("a" cannot allow it for good).
    with pytest.raises(ApprovalRequired) as raised:
        run(deps, f"echo outside > {target}", approved=False, sandbox_on=False)
    metadata = raised.value.metadata or {}
    assert "OUTSIDE the sandbox" in metadata["reason"]
    assert build_request("run_shell", {"command": "x"}, metadata).command is None
    deps.state.approved_commands.add(f"echo outside > {target}")
    with pytest.raises(ApprovalRequired):
        run(deps, f"echo outside > {target}", approved=False, sandbox_on=False)
    outside = run(deps, f"echo outside > {target}", sandbox_on=False)
    assert "exit code: 0" in outside and target.read_text() == "outside\n"


@needs_bwrap
def test_the_working_directory_and_tmpdir_are_writable_co_files_are_not(tmp_path: Path, home: Path) -> None:
    deps = make_deps(tmp_path)
    (deps.cwd / ".co-cli").mkdir()
    result = run(deps, 'echo ok > made.txt && echo t > "$TMPDIR/t" && cat "$TMPDIR/t" && echo "$TMPDIR"')
    assert "exit code: 0" in result and (deps.cwd / "made.txt").read_text() == "ok\n"
    temp = Path(result.split("stdout:\n", 1)[1].splitlines()[1])
    assert (temp / "t").read_text() == "t\n" and not temp.is_relative_to(deps.cwd)
    protected = run(deps, 'echo \'{"shell_sandbox": "off"}\' > .co-cli/settings.json')
    assert "Read-only file system" in protected and not (deps.cwd / ".co-cli" / "settings.json").exists()


@needs_bwrap
def test_a_network_socket_fails_inside_and_works_when_the_network_is_allowed(
    tmp_path: Path, home: Path, listener: int
) -> None:
    deps = make_deps(tmp_path)
    inside = run(deps, connect_command(listener))
    assert "pong" not in inside and "Connection refused" in inside
    assert "with no network" in inside and "/sandbox network" in inside
    deps.state.shell_network = True  # /sandbox network
    assert "pong" in run(deps, connect_command(listener))
    (tmp_path / "other").mkdir()
    outside = make_deps(tmp_path / "other", shell_sandbox="off")
    assert "pong" in run(outside, connect_command(listener))


@needs_bwrap
def test_a_timeout_ends_everything_the_sandboxed_command_started_even_unmarked(tmp_path: Path, home: Path) -> None:
    deps = make_deps(tmp_path, shell_timeout=0.5)
    late = deps.cwd / "late"
    escape = f"env -i setsid bash -c 'sleep 1.5; echo late > {late}'"  # out of the group, without co's mark
    result = run(deps, f"trap '' TERM; ({escape}) & sleep 30")
    assert result.startswith("Timed out after 0.5 s")
    time.sleep(2)
    assert not late.exists()


@needs_bwrap
def test_the_approval_question_says_how_the_command_runs(tmp_path: Path, home: Path) -> None:
    deps = make_deps(tmp_path)
    with pytest.raises(ApprovalRequired) as raised:
        run(deps, "echo hi", approved=False)
    assert (raised.value.metadata or {})["reason"] == (
        "runs a shell command; sandboxed: writes only in the working directory and TMPDIR, no network"
    )


def test_without_bubblewrap_auto_runs_as_today_and_says_so_once(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox, "probe", lambda network: "bubblewrap is not installed; install it")
    deps = make_deps(tmp_path)
    target = home / "written"
    with pytest.raises(ApprovalRequired) as raised:
        run(deps, f"echo hi > {target}", approved=False)
    assert "not sandboxed: bubblewrap is not installed" in (raised.value.metadata or {})["reason"]
    first = run(deps, f"echo hi > {target}")
    assert target.read_text() == "hi\n" and "ran without a sandbox: bubblewrap is not installed" in first
    assert "without a sandbox" not in run(deps, "true")
    with pytest.raises(ApprovalRequired) as again:
        run(deps, "echo again", approved=False)
    assert (again.value.metadata or {})["reason"] == "runs a shell command; not sandboxed"


def test_shell_sandbox_on_without_bubblewrap_runs_nothing(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox, "probe", lambda network: "bubblewrap is not installed; install it")
    deps = make_deps(tmp_path, shell_sandbox="on")
    target = home / "written"
    result = run(deps, f"echo hi > {target}")
    assert result.startswith('Error: not run: shell_sandbox is "on" and bubblewrap is not installed')
    assert not target.exists()


@needs_bwrap
def test_shell_sandbox_on_refuses_a_run_outside_it(tmp_path: Path, home: Path) -> None:
    deps = make_deps(tmp_path, shell_sandbox="on")
    assert run(deps, "true", sandbox_on=False).startswith("Error: not run outside the sandbox")
    deps.state.shell_sandbox = "off"  # /sandbox off
    assert not shell_confinement(deps)[0].sandboxed


def test_bwrap_options_bind_the_writable_directories_and_cut_the_network(tmp_path: Path) -> None:
    protected = tmp_path / "work" / ".co-cli"
    protected.mkdir(parents=True)
    words = bwrap_arguments(tmp_path / "work", tmp_path / "tmp", False, (protected, tmp_path / "missing"))
    text = " ".join(words)
    assert words[0] == "bwrap" and "--unshare-net" in words and words[-1] == "--"
    assert "--ro-bind / /" in text and f"--bind {tmp_path}/work {tmp_path}/work" in text
    assert f"--ro-bind {protected} {protected}" in text and "missing" not in text
    assert "--unshare-net" not in bwrap_arguments(tmp_path, tmp_path, True)


def test_a_project_file_cannot_loosen_the_sandbox(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CO_CLI_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("CO_CLI_DATA_DIR", str(tmp_path / "data"))
    project = tmp_path / "repo"
    (project / ".co-cli").mkdir(parents=True)
    (project / ".co-cli" / "settings.json").write_text(json.dumps({"shell_sandbox": "off", "shell_network": True}))
    loaded = load_settings(cwd=project)
    assert loaded.settings.shell_sandbox == "auto" and loaded.settings.shell_network is False
    assert any("shell_sandbox" in w and "stricter" in w for w in loaded.warnings)
    assert any("shell_network" in w and "stricter" in w for w in loaded.warnings)
    (project / ".co-cli" / "settings.json").write_text(json.dumps({"shell_sandbox": "on"}))
    assert load_settings(cwd=project).settings.shell_sandbox == "on"


def test_a_killed_cos_temporary_directory_is_removed_by_the_next_and_a_live_ones_is_kept(tmp_path: Path) -> None:
    """co's TMPDIR for sandboxed commands is named by its process; one whose process is gone (a co killed with
    SIGKILL never ran its exit) is removed, with what commands left in it; a running co's and anything else stay."""
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = tmp_path / f"{sandbox.TEMP_PREFIX}{gone.stdout.strip()}-abc123"
    (dead / "build").mkdir(parents=True)
    (dead / "build" / "out.o").write_text("left by a command")
    live = tmp_path / f"{sandbox.TEMP_PREFIX}{os.getpid()}-def456"
    live.mkdir()
    other = tmp_path / f"{sandbox.TEMP_PREFIX}notapid-x"
    other.mkdir()
    sandbox.remove_orphans(tmp_path)
    assert not dead.exists() and live.is_dir() and other.is_dir()
    assert sandbox.temp_dir().name.startswith(f"{sandbox.TEMP_PREFIX}{os.getpid()}-")
