"""Benchmark of the session store: per-turn save, load, fork, list and search at growing sizes, and the cost
of each commit of a turn with ``synchronous=FULL`` (every commit synced to disk) against ``NORMAL``.

    python bench/bench_store.py           # 1k / 10k / 100k message sessions, 1k / 10k sessions (~1-2 min)
    python bench/bench_store.py --quick   # 1k / 10k only (~20 s)
    python bench/bench_store.py --dir D   # on D's file system (fsync costs differ between disks)

Everything happens in a temporary directory that is removed afterwards.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from co_cli.store import SessionInfo, Store, StoredMessage  # noqa: E402
from co_cli.store.db import SYNCHRONOUS  # noqa: E402

TURNS_PER_SAVE_SAMPLE = 50
WORDS = [
    "sqlite",
    "journal",
    "window",
    "context",
    "summary",
    "token",
    "kestrel",
    "pelican",
    "budget",
    "cache",
    "index",
    "module",
    "function",
    "request",
    "response",
    "parser",
    "config",
    "schema",
    "session",
    "history",
    "compaction",
    "offload",
    "boundary",
]


def _prose(seed: int, words: int) -> str:
    return " ".join(WORDS[(seed * 7 + i * 3) % len(WORDS)] for i in range(words))


def turn(i: int) -> list[ModelMessage]:
    """One realistic turn: prompt, tool call, tool output (~1 KB), answer (~0.5 KB)."""
    prompt = f"question {i}: " + _prose(i, 15)
    return [
        ModelRequest(parts=[UserPromptPart(prompt)]),
        ModelResponse(parts=[ToolCallPart("read_file", {"path": f"src/module_{i % 97}.py"}, f"call-{i}")]),
        ModelRequest(parts=[ToolReturnPart("read_file", _prose(i + 1, 150), f"call-{i}")]),
        ModelResponse(parts=[TextPart(_prose(i + 2, 80))], model_name="bench-model"),
    ]


def populate(store: Store, messages: int) -> str:
    """A session of ``messages`` messages, inserted in one go through the import path."""
    now = time.time()
    stored: list[StoredMessage] = []
    i = 0
    while len(stored) < messages:
        for message in turn(i):
            stored.append(StoredMessage(len(stored), now, "", "", "ok", message))
        i += 1
    info = SessionInfo("", f"bench {messages}", now, now, "bench-model", "/bench", None, None, 0, 0, 0, 0.0, 0)
    return store.import_session(info, stored[:messages], []).id


@dataclass
class Row:
    operation: str
    size: str
    median_ms: float
    worst_ms: float
    cpu_ms: float
    target_ms: float | None

    def cells(self) -> list[str]:
        target = "" if self.target_ms is None else f"< {self.target_ms:g}"
        verdict = "" if self.target_ms is None else ("ok" if self.median_ms < self.target_ms else "SLOW")
        times = [f"{self.median_ms:.2f}", f"{self.worst_ms:.2f}", f"{self.cpu_ms:.2f}"]
        return [self.operation, self.size, *times, target, verdict]


def measure(fn: Callable[[], object], runs: int) -> tuple[float, float, float]:
    """Median and worst wall time, and median CPU time of this process (steady when the machine is busy)."""
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    return statistics.median(wall), max(wall), statistics.median(cpu)


def bench_sessions(store: Store, sizes: list[int], rows: list[Row]) -> None:
    for size in sizes:
        label = f"{size:,} msgs"
        sid = populate(store, size)
        counter = iter(range(10**9))

        def save_turn(sid: str = sid, counter: Iterator[int] = counter) -> None:
            i = next(counter)
            messages = turn(i)
            prompt = messages[0].parts[0].content
            assert isinstance(prompt, str)
            seq = store.messages.begin_turn(sid, prompt)
            store.messages.finish_turn(sid, seq, messages, input_tokens=100, output_tokens=50, cost_usd=0.001)

        rows.append(Row("save turn (begin+finish, 4 msgs)", label, *measure(save_turn, TURNS_PER_SAVE_SAMPLE), 10))
        runs = 3 if size <= 10_000 else 1
        target = 500 if size <= 10_000 else None  # the targets are set at 10k messages
        rows.append(Row("load messages()", label, *measure(lambda sid=sid: store.messages.messages(sid), runs), target))
        rows.append(Row("fork", label, *measure(lambda sid=sid: store.fork(sid), runs), target))
        print(f"  done {label}", file=sys.stderr)


def bench_durability(store: Store, rows: list[Row]) -> None:
    """Each of a turn's two commits (the prompt before the model is called, the finished turn after) with the
    WAL synced at every commit (FULL) and only at checkpoints (NORMAL)."""
    sid = populate(store, 1_000)
    counter = iter(range(10**9))
    pending: list[tuple[int, list[ModelMessage]]] = []

    def commit_prompt() -> None:
        messages = turn(next(counter))
        prompt = messages[0].parts[0].content
        assert isinstance(prompt, str)
        pending.append((store.messages.begin_turn(sid, prompt), messages))

    def commit_turn() -> None:
        seq, messages = pending.pop()
        store.messages.finish_turn(sid, seq, messages, input_tokens=100, output_tokens=50, cost_usd=0.001)

    for mode in ("NORMAL", "FULL"):
        store.db._conn.execute(f"PRAGMA synchronous = {mode}")  # a setting of the connection itself
        prompts: list[tuple[float, float, float]] = []
        turns: list[tuple[float, float, float]] = []
        for _ in range(TURNS_PER_SAVE_SAMPLE):  # alternating, as in a conversation
            prompts.append(measure(commit_prompt, 1))
            turns.append(measure(commit_turn, 1))
        for name, times in (("commit prompt (begin_turn)", prompts), ("commit turn (finish_turn)", turns)):
            wall = [t[0] for t in times]
            cpu = statistics.median(t[2] for t in times)
            rows.append(Row(f"{name}, synchronous={mode}", "1,000 msgs", statistics.median(wall), max(wall), cpu, None))
    store.db._conn.execute(f"PRAGMA synchronous = {SYNCHRONOUS}")
    print("  done durability", file=sys.stderr)


def bench_list(db: Path, counts: list[int], rows: list[Row]) -> None:
    with Store.open(db) as store:
        store.db._conn.execute("PRAGMA synchronous = OFF")  # setting up only: listing does not write
        for count in counts:
            for n in range(store.sessions.count(), count):
                sid = store.sessions.create(model="bench-model", cwd="/bench", title=f"session {n}").id
                store.messages.begin_turn(
                    sid, f"first prompt of session {n}"
                )  # listings skip sessions without messages
            label = f"{store.sessions.count():,} sessions"
            rows.append(Row("list(50)", label, *measure(lambda: store.sessions.list(50), 20), 100))
            rows.append(
                Row(
                    "get(prefix)",
                    label,
                    *measure(lambda: store.sessions.get(store.sessions.list(1)[0].id[:16]), 20),
                    None,
                )
            )
            print(f"  done {label}", file=sys.stderr)
        code = (
            f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r}); "
            "from typer.testing import CliRunner; from co_cli.terminal.sessions_cli import app; "
            "r = CliRunner().invoke(app, ['list']); assert r.exit_code == 0, r.output"
        )
        env = {**os.environ, "CO_CLI_DATA_DIR": str(db.parent), "CO_CLI_CONFIG_DIR": str(db.parent / "cfg")}

        def cli_list() -> None:
            subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=db.parent)

        rows.append(Row("`co sessions list` (new process)", label, *measure(cli_list, 3), None))


def bench_search(store: Store, rows: list[Row]) -> None:
    total = store.db.read_one("SELECT count(*) FROM messages")[0]
    label = f"{total:,} msgs in db"
    for query in (
        "kestrel pelican",
        "module_42.py",
        "question 12345",
        'NEAR("odd" *',
        "kestrel " * 200,
        "kestrel " * 2000,
    ):
        shown = query if len(query) < 30 else f"{query.split()[0]} x{len(query.split())}"
        rows.append(Row(f"search {shown!r}", label, *measure(lambda q=query: store.search.messages(q), 5), None))


def print_table(rows: list[Row]) -> None:
    header = ["operation", "size", "median ms", "worst ms", "cpu ms", "target ms", ""]
    table = [header] + [row.cells() for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for n, line in enumerate(table):
        print(
            "  ".join(
                cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths, strict=True))
            )
        )
        if n == 0:
            print("  ".join("-" * w for w in widths))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the 100k-message session")
    parser.add_argument("--dir", type=Path, default=None, help="run in a temporary directory under this one")
    args = parser.parse_args()
    sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="co-bench-", dir=args.dir) as tmp:
        with Store.open(Path(tmp) / "durability" / "co-cli.db") as store:
            bench_durability(store, rows)
        messages_db = Path(tmp) / "messages" / "co-cli.db"
        with Store.open(messages_db) as store:
            bench_sessions(store, sizes, rows)
            bench_search(store, rows)
        bench_list(Path(tmp) / "list" / "co-cli.db", [1_000, 10_000], rows)
        size_mb = messages_db.stat().st_size / 1e6
    print_table(rows)
    load = os.getloadavg()[0]
    print(f"\nmessage database: {size_mb:.0f} MB (WAL, synchronous={SYNCHRONOUS} unless the row says otherwise)")
    print(f"load average {load:.1f} on {os.cpu_count()} cpus; cpu ms counts this process only")


if __name__ == "__main__":
    main()
