"""`co serve` under load: concurrent streaming clients against a real `co serve` and the scripted model server.

Each client holds a conversation of three turns: a new session, the same conversation resent with its history
(continued by matching the transcript), then a turn pinned with X-Co-Session. Every answer must be the echo of
that client's own prompt, every client must keep one session of its own, and every session's transcript must
be exactly its client's conversation: anything lost or mixed fails the run (exit 1).

co's added latency is the client's time for a turn (request sent to the last event) minus the model's own
time for that turn (the scripted server's time from reading the request to its last byte). The serve process's
CPU time per turn (user + system, from /proc) is printed too: on a shared machine it compares two versions
better than the wall-clock figures do.

Usage: python bench/bench_serve.py [--clients 50] [--turns 3] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from co_cli.serve.history import ChatMessage, same_conversation, visible  # noqa: E402
from co_cli.store import Store  # noqa: E402
from tests.support import scripted_server  # noqa: E402
from tests.support.scripted_server import ScriptedServer, Text, last_user_text  # noqa: E402
from tests.support.serve_process import ServeProcess, serve_env  # noqa: E402

ANSWER_WORDS = 40
"""Each answer: the echo of the prompt, streamed in pieces, then this many more words."""


class ModelClock:
    """The scripted server's own time per request, by the prompt it answered."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.lock = threading.Lock()

    def install(self) -> None:
        handler = scripted_server._Handler
        original = handler._handle_post
        clock = self

        def timed(self: Any, path: str) -> None:
            start = time.perf_counter()
            original(self, path)
            elapsed = time.perf_counter() - start
            with clock.lock:
                for request in reversed(self.scripted.requests[-200:]):
                    if request.body is not None and request.path == path:
                        clock.seconds.setdefault(last_user_text(request.body), elapsed)
                        break

        handler._handle_post = timed  # type: ignore[method-assign]


def reply_for(request: dict[str, Any]) -> Text:
    prompt = last_user_text(request)
    return Text(f"echo: {prompt}" + " more" * ANSWER_WORDS, chunk_size=12)


def expected(prompt: str) -> str:
    return f"echo: {prompt}" + " more" * ANSWER_WORDS


@dataclass
class Client:
    number: int
    turns: int
    session_ids: list[str] = field(default_factory=list)
    history: list[ChatMessage] = field(default_factory=list)
    seconds: list[tuple[str, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def prompt(self, turn: int) -> str:
        return f"client {self.number} turn {turn}: tell me about bird {self.number * 100 + turn}"

    async def run(self, http: httpx.AsyncClient) -> None:
        for turn in range(self.turns):
            prompt = self.prompt(turn)
            headers: dict[str, str] = {}
            messages = [{"role": m.role, "content": m.text} for m in self.history]
            if turn == 2 and self.session_ids:  # the third turn pins the session instead of resending history
                headers["X-Co-Session"] = self.session_ids[0]
                messages = []
            messages.append({"role": "user", "content": prompt})
            body = {"model": "scripted", "stream": True, "messages": messages}
            start = time.perf_counter()
            text: list[str] = []
            try:
                async with http.stream("POST", "/v1/chat/completions", json=body, headers=headers) as response:
                    if response.status_code != 200:
                        self.errors.append(f"turn {turn}: HTTP {response.status_code}: {await response.aread()!r}")
                        return
                    self.session_ids.append(response.headers["x-co-session"])
                    done = False
                    async for line in response.aiter_lines():
                        if line == "data: [DONE]":
                            done = True
                        elif line.startswith("data: "):
                            event = json.loads(line[6:])
                            if "error" in event:
                                self.errors.append(f"turn {turn}: {event['error']}")
                            for choice in event.get("choices", []):
                                text.append(choice["delta"].get("content") or "")
            except httpx.HTTPError as exc:
                self.errors.append(f"turn {turn}: {type(exc).__name__}: {exc}")
                return
            self.seconds.append((prompt, time.perf_counter() - start))
            answer = "".join(text)
            if not done or answer != expected(prompt):
                self.errors.append(f"turn {turn}: answer {answer[:80]!r} is not the echo of {prompt!r}")
            self.history += [ChatMessage("user", prompt), ChatMessage("assistant", answer)]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def drive(url: str, token: str, clients: list[Client]) -> float:
    limits = httpx.Limits(max_connections=len(clients) + 5, max_keepalive_connections=len(clients) + 5)
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120, limits=limits
    ) as http:
        start = time.perf_counter()
        await asyncio.gather(*(client.run(http) for client in clients))
        return time.perf_counter() - start


def check_store(db: Path, clients: list[Client]) -> list[str]:
    problems: list[str] = []
    with Store.open(db, reads_only=True) as store:
        for client in clients:
            ids = set(client.session_ids)
            if len(ids) != 1:
                problems.append(f"client {client.number}: sessions {sorted(ids)}")
                continue
            saved = visible(store.messages.transcript(ids.pop()))
            if not same_conversation(saved, client.history):
                problems.append(f"client {client.number}: the saved transcript is not its conversation")
    every = [client.session_ids[0] for client in clients if client.session_ids]
    if len(set(every)) != len(every):
        problems.append("two clients share a session")
    return problems


def cpu_seconds(pid: int) -> float | None:
    """The CPU time (user + system) process ``pid`` has used so far, or None where /proc is not there."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def model_server() -> int:
    """The scripted model server in a process of its own (so it never waits for the clients' share of a GIL):
    prints its URL, serves until stdin closes, then prints its own time per prompt as JSON."""
    clock = ModelClock()
    clock.install()
    with ScriptedServer() as model:
        model.responder = reply_for
        print(model.base_url, flush=True)
        sys.stdin.read()
    print(json.dumps(clock.seconds), flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="5 clients, 3 turns: a check that runs in seconds")
    parser.add_argument("--model-server", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.model_server:
        return model_server()
    if args.quick:
        args.clients = 5
    model = subprocess.Popen(
        [sys.executable, __file__, "--model-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert model.stdin is not None and model.stdout is not None
    base_url = model.stdout.readline().strip()
    with tempfile.TemporaryDirectory(prefix="co-bench-serve-") as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        env = serve_env(dict(os.environ), Path(tmp) / "data", Path(tmp) / "config", base_url)
        with ServeProcess(env, work) as served:
            warm = [Client(-1, 1)]
            asyncio.run(drive(served.url, served.token, warm))  # first request: imports and the agent built
            clients = [Client(n, args.turns) for n in range(args.clients)]
            assert served.process is not None
            cpu_before = cpu_seconds(served.process.pid)
            wall = asyncio.run(drive(served.url, served.token, clients))
            cpu_after = cpu_seconds(served.process.pid)
            db = Path(env["CO_CLI_DATA_DIR"]) / "co-cli.db"
        problems = [f"client {c.number}: {e}" for c in clients for e in c.errors] + check_store(db, clients)
    model_seconds: dict[str, float] = json.loads(model.communicate("", timeout=30)[0])
    turns = [(prompt, seconds) for client in clients for prompt, seconds in client.seconds]
    overhead = [(seconds - model_seconds.get(prompt, 0.0)) * 1000 for prompt, seconds in turns]
    model_ms = [model_seconds.get(prompt, 0.0) * 1000 for prompt, _ in turns]
    total_ms = [seconds * 1000 for _, seconds in turns]
    print(f"{args.clients} concurrent streaming clients x {args.turns} turns: {len(turns)} turns in {wall:.2f} s")
    print(f"throughput: {len(turns) / wall:.1f} turns/s")
    if turns:
        print(f"{'per turn (ms)':<28}{'p50':>10}{'p99':>10}")
        for label, values in (("client total", total_ms), ("model's own", model_ms), ("co's added", overhead)):
            print(f"{label:<28}{statistics.median(values):>10.1f}{percentile(values, 0.99):>10.1f}")
        if cpu_before is not None and cpu_after is not None:
            print(f"{'co serve CPU (mean)':<28}{(cpu_after - cpu_before) * 1000 / len(turns):>10.1f}")
    expected_turns = args.clients * args.turns
    if len(turns) != expected_turns:
        problems.append(f"{expected_turns - len(turns)} turns lost")
    for problem in problems[:20]:
        print(f"PROBLEM {problem}")
    print("nothing lost, nothing mixed" if not problems else f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
