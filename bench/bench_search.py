"""Benchmark of full-text search on messages with very many matches, and of what holds `co serve`.

    python bench/bench_search.py              # every row (~1 min when search is bounded)
    python bench/bench_search.py --cap 120    # give up on a measurement after 120 s (to measure an old version)
    python bench/bench_search.py --no-slow-connections

Rows: one message repeating a word 20,000 times and one of 200,000 matching lines, searched in this process,
with `co sessions search` (a new process) and through `co serve`'s `/api/search`; how long `co serve` takes to
end after SIGTERM while a search runs; and how long 1,000 half-sent requests (half without the token) stay open.
Everything happens in a temporary directory that is removed afterwards; the subprocesses run this checkout's co.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pydantic_ai.messages import ModelRequest, UserPromptPart  # noqa: E402

from co_cli.store import SessionInfo, Store, StoredMessage  # noqa: E402

TOKEN = "bench-search-token-0123456789"
MESSAGES = {
    "kestrel": ("one word 20,000 times", "kestrel " * 20_000),
    "pelican": ("200,000 matching lines", "".join(f"line {i} pelican\n" for i in range(200_000))),
}


def populate(db: Path) -> None:
    with Store.open(db) as store:
        now = time.time()
        for label, text in MESSAGES.values():
            info = SessionInfo("", label, now, now, "bench", "/bench", None, None, 0, 0, 0, 0.0, 0)
            message = StoredMessage(0, now, "", "", "ok", ModelRequest(parts=[UserPromptPart(text)]))
            store.import_session(info, [message], [])


def environment(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CO_CLI_") and not k.endswith("_API_KEY")}
    env.update(
        CO_CLI_DATA_DIR=str(data),
        CO_CLI_CONFIG_DIR=str(data / "config"),
        CO_CLI_MODEL="test",
        CO_CLI_SERVE_TOKEN=TOKEN,
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",
    )
    return env


def timed(argv: list[str], env: dict[str, str], cap: float) -> str:
    """Wall time of a command, or '> cap s' when it had not ended by then (it is killed)."""
    start = time.perf_counter()
    try:
        subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, check=True, timeout=cap)
    except subprocess.TimeoutExpired:
        return f"> {cap:g} s"
    return f"{time.perf_counter() - start:.3f} s"


def in_process(word: str, env: dict[str, str], cap: float) -> str:
    """``store.search.messages(word)`` alone (in a child process, so an endless one can be given up)."""
    code = (
        "import os, time; from pathlib import Path; from co_cli.store import Store\n"
        "store = Store.open(Path(os.environ['CO_CLI_DATA_DIR']) / 'co-cli.db')\n"
        f"start = time.perf_counter(); assert store.search.messages({word!r})\n"
        "print(f'{time.perf_counter() - start:.3f} s')\n"
    )
    try:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=cap)
    except subprocess.TimeoutExpired:
        return f"> {cap:g} s"
    return done.stdout.strip()


class Server:
    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "co_cli", "serve", "--port", "0"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.process.stdout is not None
        self.url = ""
        for line in self.process.stdout:
            if line.startswith("co serve: "):
                self.url = line.split()[2]
            if line.startswith("Ctrl-C"):
                break
        host, port = self.url.removeprefix("http://").rsplit(":", 1)
        self.address = (host, int(port))

    def get(self, path: str, timeout: float) -> int:
        request = urllib.request.Request(self.url + path, headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
            return int(response.status)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def api_search(env: dict[str, str], word: str, cap: float) -> str:
    server = Server(env)
    try:
        start = time.perf_counter()
        try:
            server.get(f"/api/search?q={word}", timeout=cap)
        except TimeoutError:
            return f"> {cap:g} s"
        return f"{time.perf_counter() - start:.3f} s"
    finally:
        server.stop()


def sigterm_during_search(env: dict[str, str], cap: float) -> str:
    """From SIGTERM to the end of `co serve` while it searches the 200,000 lines (begun 1 s before)."""
    server = Server(env)
    try:
        threading.Thread(target=lambda: _quietly(server, "/api/search?q=pelican", cap), daemon=True).start()
        time.sleep(1.0)
        start = time.perf_counter()
        server.process.send_signal(signal.SIGTERM)
        try:
            server.process.wait(timeout=cap)
        except subprocess.TimeoutExpired:
            return f"> {cap:g} s"
        return f"{time.perf_counter() - start:.3f} s"
    finally:
        server.stop()


def _quietly(server: Server, path: str, timeout: float) -> None:
    with contextlib.suppress(OSError):
        server.get(path, timeout)


def half_sent_requests(env: dict[str, str], count: int, cap: float) -> str:
    """How long ``count`` half-sent requests (half without the token) stay open, and whether a whole request
    is answered meanwhile."""
    server = Server(env)
    socks: list[socket.socket] = []
    try:
        for n in range(count):
            sock = socket.create_connection(server.address)
            if n % 2:
                sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: co\r\nX-Half: ")
            else:
                sock.sendall(
                    f"POST /v1/chat/completions HTTP/1.1\r\nHost: co\r\nAuthorization: Bearer {TOKEN}\r\n"
                    'Content-Length: 1000\r\n\r\n{"messages": ['.encode()
                )
            socks.append(sock)
        start = time.perf_counter()
        answered = server.get("/v1/models", timeout=cap) == 200
        open_socks = list(socks)
        while open_socks and time.perf_counter() - start < cap:
            still = []
            for sock in open_socks:
                sock.settimeout(0.001)
                try:
                    if sock.recv(65536) and not _drained(sock):
                        still.append(sock)
                except TimeoutError:
                    still.append(sock)
                except OSError:
                    pass
            open_socks = still
            time.sleep(0.25)
        took = time.perf_counter() - start
        meanwhile = "a whole request answered meanwhile" if answered else "no answer meanwhile"
        if open_socks:
            return f"{len(open_socks):,} of {count:,} still open after {cap:g} s ({meanwhile})"
        return f"all closed after {took:.1f} s ({meanwhile})"
    finally:
        for sock in socks:
            sock.close()
        server.stop()


def _drained(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` after what it sent."""
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except OSError:
        return True
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=float, default=600.0, help="seconds after which a measurement is given up")
    parser.add_argument("--no-slow-connections", action="store_true", help="skip the half-sent requests row")
    args = parser.parse_args()
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="co-bench-search-") as tmp:
        data = Path(tmp) / "data"
        populate(data / "co-cli.db")
        env = environment(data)
        for word, (label, _) in MESSAGES.items():
            rows.append(("search in process", label, in_process(word, env, args.cap)))
            cli = [sys.executable, "-m", "co_cli", "sessions", "search", word]
            rows.append(("`co sessions search` (new process)", label, timed(cli, env, args.cap)))
            rows.append(("`/api/search` of `co serve`", label, api_search(env, word, args.cap)))
            print(f"  done {label}", file=sys.stderr, flush=True)
        sigterm = sigterm_during_search(env, args.cap)
        rows.append(("`co serve`: SIGTERM to exit during a search", "200,000 matching lines", sigterm))
        if not args.no_slow_connections:
            env["CO_CLI_SERVE_REQUEST_TIMEOUT"] = "30"
            cap = min(args.cap, 60.0)
            rows.append(("`co serve`: half-sent requests", "1,000 connections", half_sent_requests(env, 1_000, cap)))
    width = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, width, strict=True)))
    print(f"\nload average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus")


if __name__ == "__main__":
    main()
