"""`co serve` bounds the time a client can hold it: a request still arriving after serve_request_timeout is closed,
a search ends when its client goes or its deadline passes, and SIGTERM ends the server while a search runs.

The searches here run a query that counts forever (``tests/support/serve_endless_search.py``): one ends only
because something stopped it. While it runs it holds the store, so another read (the session list) waits for it:
that read answering is how a test sees the search has stopped."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.serve_process import TOKEN, ServeProcess, serve_env

REQUEST_TIMEOUT = 3.0
"""serve_request_timeout of the servers here: short, so a half-sent request is closed within the test."""
GENEROUS = 30.0
"""How long a test waits for what should take a fraction of a second (a loaded machine is slow, never this slow)."""
ENDLESS_SEARCH = [sys.executable, str(Path(__file__).resolve().parent / "support" / "serve_endless_search.py")]


def _server(root: Path, **settings: str) -> ServeProcess:
    work = root / "work"
    work.mkdir(parents=True)
    env = serve_env(dict(os.environ), root / "data", root / "config", "http://127.0.0.1:9/v1")
    env.update({f"CO_CLI_{name.upper()}": value for name, value in settings.items()})
    return ServeProcess(env, work, program=ENDLESS_SEARCH)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    server = _server(tmp_path_factory.mktemp("limits"), serve_request_timeout=str(REQUEST_TIMEOUT))
    with server as process:
        yield process


def _address(served: ServeProcess) -> tuple[str, int]:
    host, port = served.url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _connect(served: ServeProcess, sent: bytes) -> socket.socket:
    """A connection to the server that has sent ``sent``, its ``Host: co`` naming the server's own address."""
    host, port = _address(served)
    sock = socket.create_connection((host, port), timeout=GENEROUS)
    if sent:
        sock.sendall(sent.replace(b"Host: co\r\n", f"Host: {host}:{port}\r\n".encode()))
    return sock


def _until_closed(sock: socket.socket, deadline: float) -> bytes:
    """Everything the server sends until it closes the connection; AssertionError if it is still open at
    ``deadline``."""
    received = b""
    while True:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            raise AssertionError("the server kept a half-sent request's connection open") from None
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk


def _headers(path: str, token: str | None, extra: str = "") -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return f"GET {path} HTTP/1.1\r\nHost: co\r\n{auth}{extra}".encode()


HALF_SENT = {
    "nothing": b"",
    "half a request line": b"GET /v1/mod",
    "headers without their end, no token": _headers("/v1/models", None),
    "headers without their end, with the token": _headers("/api/sessions", TOKEN),
    "half a body, with the token": (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: co\r\nAuthorization: Bearer {TOKEN}\r\n"
        'Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n{"model": "scr'
    ).encode(),
    "half a body, no token": (
        b'POST /v1/chat/completions HTTP/1.1\r\nHost: co\r\nContent-Length: 900\r\n\r\n{"messages": ['
    ),
}


def _client(served: ServeProcess, timeout: float = GENEROUS) -> httpx.Client:
    return httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=timeout)


def test_half_sent_requests_are_closed_after_the_request_timeout(served: ServeProcess) -> None:
    shapes = list(HALF_SENT.items())
    socks = [(name, _connect(served, sent)) for n in range(50) for name, sent in shapes]  # 300 connections
    trickling = [_connect(served, b"GET /v1/models HTTP/1.1\r\n") for _ in range(5)]
    stop_trickling = threading.Event()

    def trickle() -> None:  # a header byte every 0.2 s: data arriving does not push the deadline back
        while not stop_trickling.wait(0.2):
            for sock in trickling:
                with contextlib.suppress(OSError):
                    sock.send(b"X")

    threading.Thread(target=trickle, daemon=True).start()
    try:
        with _client(served) as client:  # the server answers others meanwhile
            assert client.get("/v1/models").status_code == 200
            body = b'{"model": "scripted", "messages": [{"role": "user", "content": '
            halves = iter([body[:20], body[20:]])
            # a body that arrives in pieces, whole before the deadline, is read: the model named is refused
            length = {"Content-Length": str(len(body))}
            answer = client.post("/v1/chat/completions", content=_paced(halves), headers=length)
            assert answer.status_code == 400 and answer.json()["error"]["code"] != "request_timeout"
        deadline = time.monotonic() + GENEROUS
        for name, sock in [*socks, *(("trickling", s) for s in trickling)]:
            received = _until_closed(sock, deadline)
            if received.startswith(b"HTTP/1.1 401 "):  # its headers came whole: refused at once, closed later
                assert name == "half a body, no token"
            elif received:
                assert received.startswith(b"HTTP/1.1 408 "), name
                assert b'"code": "request_timeout"' in received and b"serve_request_timeout" in received, name
    finally:
        stop_trickling.set()
        for sock in [s for _, s in socks] + trickling:
            sock.close()
    with _client(served) as client:
        assert client.get("/v1/models").status_code == 200


def _paced(pieces: Iterator[bytes]) -> Iterator[bytes]:
    for n, piece in enumerate(pieces):
        if n:
            time.sleep(REQUEST_TIMEOUT / 6)
        yield piece


def _search_running(served: ServeProcess) -> None:
    """Returns once a search holds the store: a read of the session list then waits (a probe that answers came
    before the search began)."""
    for _ in range(100):
        try:
            with _client(served, timeout=1.0) as probe:
                probe.get("/api/sessions")
        except httpx.TimeoutException:
            return
    raise AssertionError("the search never began")


def _start_search(served: ServeProcess) -> socket.socket:
    sock = _connect(served, _headers("/api/search?q=kestrel", TOKEN, "\r\n"))
    _search_running(served)
    return sock


def test_a_search_ends_when_its_client_goes(served: ServeProcess) -> None:
    for _ in range(3):  # each search stops: the store is free for the next
        _start_search(served).close()
        with _client(served) as client:
            assert client.get("/api/sessions").status_code == 200


def test_a_search_past_its_deadline_is_a_503_in_one_line(tmp_path: Path) -> None:
    with _server(tmp_path, serve_search_timeout="0.5") as server, _client(server) as client:
        for query in ("kestrel", "two words"):
            answer = client.get("/api/search", params={"q": query})
            assert answer.status_code == 503
            error = answer.json()["error"]
            assert error["code"] == "search_timeout" and "\n" not in error["message"]
            assert "serve_search_timeout" in error["message"]
        assert client.get("/api/sessions").status_code == 200


@pytest.mark.parametrize("signal_number", [15, 2])
def test_the_server_stops_promptly_while_a_search_runs(tmp_path: Path, signal_number: int) -> None:
    server = _server(tmp_path).start()  # the default serve_request_timeout (30 s) and serve_search_timeout
    assert server.process is not None
    searching = _start_search(server)
    half_body = _connect(server, HALF_SENT["half a body, with the token"])
    server.process.send_signal(signal_number)
    try:
        server.process.wait(timeout=10)  # uvicorn alone waits 20 s for running requests, then leaves the search
    finally:
        if server.process.poll() is None:
            server.process.kill()
        server.process.communicate()
    deadline = time.monotonic() + GENEROUS
    answer = _until_closed(searching, deadline)
    assert answer == b"" or b"server_stopping" in answer
    _until_closed(half_body, deadline)
