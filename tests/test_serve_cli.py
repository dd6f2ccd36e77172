"""`co serve` as a command: what it prints, its token file, a host that is not loopback, a port in use, Ctrl-C."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import httpx
import pytest

from co_cli.serve.auth import TOKEN_FILE, server_token
from co_cli.serve.server import is_loopback
from co_cli.store import Store
from tests.support.scripted_server import ScriptedServer, Text
from tests.support.serve_process import ServeProcess, serve_env

pytestmark = pytest.mark.e2e


def _env(tmp_path: Path, scripted_server: ScriptedServer) -> dict[str, str]:
    return serve_env(dict(os.environ), tmp_path / "data", tmp_path / "config", scripted_server.base_url)


def test_the_token_is_made_once_and_kept_private(tmp_path: Path, scripted_server: ScriptedServer) -> None:
    first = ServeProcess(_env(tmp_path, scripted_server), tmp_path, token="").start()
    try:
        printed = "".join(first.banner)
        path = tmp_path / "data" / TOKEN_FILE
        token = path.read_text().strip()
        assert len(token) >= 40 and stat.S_IMODE(path.stat().st_mode) == 0o600
        link = first.sign_in_link()
        assert link.startswith(f"{first.url}/#code=") and token not in link and str(path) in printed
        assert httpx.get(f"{first.url}/v1/models", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    finally:
        err = first.stop()
    assert err == "", err
    assert server_token(tmp_path / "data") == (token, str(path))  # the same token next time


def test_the_environment_token_wins_and_must_not_be_short(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CO_CLI_SERVE_TOKEN", "a-token-from-the-environment")
    assert server_token(tmp_path) == ("a-token-from-the-environment", "CO_CLI_SERVE_TOKEN")
    assert not (tmp_path / TOKEN_FILE).exists()
    monkeypatch.setenv("CO_CLI_SERVE_TOKEN", "short")
    with pytest.raises(Exception, match="too short"):
        server_token(tmp_path)


def test_a_host_other_than_loopback_is_warned_about(tmp_path: Path, scripted_server: ScriptedServer) -> None:
    with ServeProcess(_env(tmp_path, scripted_server), tmp_path) as served:
        assert served.url.startswith("http://127.0.0.1:")
    assert served.process is not None and served.process.returncode == 0
    process = ServeProcess(_env(tmp_path, scripted_server), tmp_path).start("--host", "0.0.0.0")
    try:
        assert process.process is not None and process.process.stderr is not None
    finally:
        err = process.stop()
    assert err.startswith("warning: listening on 0.0.0.0: anyone who can reach this address"), err
    assert is_loopback("::1") and is_loopback("localhost") and not is_loopback("192.168.1.2")


def test_a_port_in_use_is_one_line(tmp_path: Path, scripted_server: ScriptedServer) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        port = str(taken.getsockname()[1])
        served = ServeProcess(_env(tmp_path, scripted_server), tmp_path)
        result = served.co("serve", "--port", port)
    finally:
        taken.close()
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: cannot listen on 127.0.0.1:{port}:"), result.stderr
    assert result.stderr.count("\n") == 1


def test_a_model_co_cannot_use_is_said_at_start(tmp_path: Path, scripted_server: ScriptedServer) -> None:
    env = {**_env(tmp_path, scripted_server), "CO_CLI_MODEL": "anthropic:claude-sonnet-4-5"}
    env.pop("ANTHROPIC_API_KEY", None)
    result = ServeProcess(env, tmp_path).co("serve", "--port", "0")
    assert result.returncode == 2, result.stderr
    assert (
        result.stderr
        == "error: cannot use model 'anthropic:claude-sonnet-4-5': set ANTHROPIC_API_KEY in the environment\n"
    )


def test_a_server_chosen_by_a_project_file_needs_to_be_allowed(tmp_path: Path, scripted_server: ScriptedServer) -> None:
    env = _env(tmp_path, scripted_server)
    env.pop("CO_CLI_BASE_URL")
    project = tmp_path / "project"
    (project / ".co-cli").mkdir(parents=True)
    (project / ".co-cli" / "settings.json").write_text(f'{{"base_url": "{scripted_server.base_url}"}}')
    result = ServeProcess(env, project).co("serve", "--port", "0")
    assert result.returncode == 2, result.stderr
    assert "which you have not allowed for this project" in result.stderr
    assert scripted_server.chat_requests == []


def test_connections_are_not_delayed_by_nagle() -> None:
    """asyncio sets TCP_NODELAY only on sockets that name IPPROTO_TCP; without it each answer on a kept-alive
    connection waited 40 ms for the client's delayed ACK."""
    from co_cli.serve.server import bind

    sock = bind("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        sock.close()


def test_ctrl_c_lets_a_running_answer_finish_and_be_saved(tmp_path: Path, scripted_server: ScriptedServer) -> None:
    scripted_server.script(Text("a slow answer in many small pieces", chunk_size=3, delay=0.05))
    served = ServeProcess(_env(tmp_path, scripted_server), tmp_path).start()
    body = {"stream": True, "messages": [{"role": "user", "content": "answer slowly"}]}
    received: list[str] = []
    try:
        with httpx.stream(
            "POST",
            f"{served.url}/v1/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {served.token}"},
            timeout=30,
        ) as response:
            session_id = response.headers["x-co-session"]
            for line in response.iter_lines():
                received.append(line)
                if len(received) == 3 and served.process is not None:
                    served.process.send_signal(2)  # Ctrl-C while the answer streams
    finally:
        err = served.stop()
    assert "data: [DONE]" in received, received[-3:]
    assert served.process is not None and served.process.returncode == 0, err
    with Store.open(tmp_path / "data" / "co-cli.db", reads_only=True) as store:
        saved = store.messages.transcript(session_id)
    assert [(m.kind, m.status, m.text) for m in saved] == [
        ("user", "ok", "answer slowly"),
        ("assistant", "ok", "a slow answer in many small pieces"),
    ]
