"""Benchmark of finding and moving sessions: the picker with 10,000 sessions (first draw, each filter
keystroke), fork at a message of a 10,000-message session, merge-import of 1,000 sessions, and `co usage`,
`co sessions list --limit 10000` and `co sessions export --all` over 10,000 sessions.

    python bench/bench_sessions.py           # ~1-2 min
    python bench/bench_sessions.py --quick   # smaller picker store, fewer runs

Everything happens in a temporary directory that is removed afterwards.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prompt_toolkit.application import create_app_session  # noqa: E402
from prompt_toolkit.input import create_pipe_input  # noqa: E402
from prompt_toolkit.output import DummyOutput  # noqa: E402

from bench.bench_store import Row, _prose, measure, print_table, turn  # noqa: E402
from co_cli.context.repair import repair_orphans  # noqa: E402
from co_cli.session.rebuild import check_fork_point, rebuild_context  # noqa: E402
from co_cli.store import CompactionRecord, SessionInfo, Store, StoredMessage  # noqa: E402
from co_cli.store import messages as message_rows  # noqa: E402
from co_cli.store import sessions as session_rows  # noqa: E402
from co_cli.store import usage as usage_rows  # noqa: E402
from co_cli.store.export import export_json_line  # noqa: E402
from co_cli.store.merge import merge_import  # noqa: E402
from co_cli.store.messages import MessageRow  # noqa: E402
from co_cli.store.usage import TurnUsage  # noqa: E402

MODELS = ["anthropic:claude-sonnet-4-5", "openai:gpt-5", "local", "ollama:qwen2.5"]
DIRS = ["/home/me/proj", "/home/me/site", "/srv/api", "/tmp/scratch"]


def bulk_sessions(store: Store, count: int, turns_each: int) -> None:
    """``count`` sessions of ``turns_each`` realistic turns, written in one transaction (setting up only)."""
    templates = [turn(i) for i in range(64)]
    encoded = [[message_rows.encode(0, 0.0, m, "ok") for m in t] for t in templates]
    now = time.time()
    rng = random.Random(7)
    with store.db.transaction() as tx:
        for n in range(count):
            updated = now - (count - n) * 60
            sid = f"{int(updated * 1000):012x}{n:08x}"
            title = f"session {n}: " + _prose(n, 6)
            rows: list[MessageRow] = []
            for t in range(turns_each):
                for row in encoded[(n + t) % len(encoded)]:
                    rows.append(MessageRow(len(rows), updated, row.kind, f"{row.text} s{n}", row.json, "ok"))
            model, cwd = rng.choice(MODELS), rng.choice(DIRS)
            info = SessionInfo(sid, title, updated, updated, model, cwd, None, None, len(rows), 0, 0, 0.0, 0)
            session_rows.insert(tx, info)
            message_rows.insert(tx, sid, rows)
            for t in range(turns_each):
                cost = None if n % 5 == 0 else 0.002
                usage = TurnUsage("chat", rng.choice(MODELS), 2, 1500, 300, 800, 0, cost)
                usage_rows.insert(tx, sid, usage, updated - t)


def bench_picker(db: Path, count: int, runs: int, rows: list[Row]) -> None:
    from co_cli.terminal.picker import Picker

    with Store.open(db) as store:
        store.db._conn.execute("PRAGMA synchronous = OFF")  # setting up only
        bulk_sessions(store, count, turns_each=2)
        label = f"{count:,} sessions, {count * 8:,} msgs"

        def open_picker() -> Picker:
            with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
                picker = Picker(store, DIRS[0])
                picker._list()  # the first frame's rows
                return picker

        rows.append(Row("picker: load + first draw", label, *measure(open_picker, runs), 200))
        picker = open_picker()
        with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
            for typed, what in (
                ("k", "1st letter (prefix of a common word)"),
                ("kes", "3 letters"),
                ("kestrel", "a word in many messages"),
                ("module_42", "a rare identifier"),
                ("session 9999", "title words"),
                ("zzzz", "no match"),
            ):

                def keystroke(typed: str = typed) -> None:
                    """What a keystroke does before the screen is drawn again (see Picker.refilter)."""
                    picker.model._snippets.clear()
                    picker.filter_text = typed
                    picker.matches = picker.model.filter(typed)
                    picker.selected = picker.top = 0
                    picker._list()

                rows.append(Row(f"picker: keystroke, {what}", label, *measure(keystroke, runs), 50))
                if not picker.model.complete:
                    complete = measure(lambda typed=typed: picker.model.complete_filter(typed), runs)
                    rows.append(Row("  then every match (in the background)", label, *complete, None))
            picker.model.this_directory_only = True
            rows.append(Row("picker: this directory only", label, *measure(lambda: picker.model.filter(""), runs), 50))
    print("  done picker", file=sys.stderr)


def bench_fork_at(db: Path, runs: int, rows: list[Row]) -> None:
    with Store.open(db) as store:
        store.db._conn.execute("PRAGMA synchronous = OFF")  # setting up only
        now = time.time()
        stored: list[StoredMessage] = []
        i = 0
        while len(stored) < 10_000:
            for message in turn(i):
                stored.append(StoredMessage(len(stored), now + len(stored) * 0.001, "", "", "ok", message))
            i += 1
        info = SessionInfo("", "fork bench", now, now, "m", "/", None, None, 0, 0, 0, 0.0, 0)
        sid = store.import_session(info, stored, []).id
        summary = [turn(0)[0]]
        for upto in (1_999, 5_999, 8_999):
            created = now + (upto + 0.5) * 0.001
            store.compactions.add(sid, CompactionRecord(0, upto, "s", None, "auto", 1, 1, "m", summary, created))
        point = 7_999  # after the second compaction, before the third

        def fork_at() -> None:
            check_fork_point(store.messages.outline(sid), point)
            fork = store.fork(sid, point)
            rebuild_context(store, fork.id)

        rows.append(Row("fork at #7,999 (check + copy + rebuild)", "10,000 msgs", *measure(fork_at, runs), 1000))
        rows.append(
            Row(
                "rebuild as of #7,999 (no copy)",
                "10,000 msgs",
                *measure(lambda: rebuild_context(store, sid, point), runs),
                500,
            )
        )
    print("  done fork-at", file=sys.stderr)


def bench_import(tmp: Path, count: int, runs: int, rows: list[Row]) -> None:
    source = tmp / "source.db"
    with Store.open(source) as store:
        store.db._conn.execute("PRAGMA synchronous = OFF")  # setting up only
        bulk_sessions(store, count, turns_each=2)
        text = "".join(export_json_line(store, s.id) + "\n" for s in store.sessions.list(limit=count))
    label = f"{count:,} sessions, {len(text) / 2**20:.1f} MiB"
    targets = iter(range(100))

    def fresh_import() -> None:
        with Store.open(tmp / f"target-{next(targets)}.db") as target:
            merge_import(target, text, repair_orphans)

    rows.append(Row("import into an empty store", label, *measure(fresh_import, runs), 60_000))
    with Store.open(tmp / "again.db") as target:
        merge_import(target, text, repair_orphans)
        rows.append(
            Row(
                "import again (all unchanged)",
                label,
                *measure(lambda: merge_import(target, text, repair_orphans), runs),
                None,
            )
        )
    print("  done import", file=sys.stderr)


def bench_usage(db: Path, runs: int, rows: list[Row]) -> None:
    with Store.open(db, reads_only=True) as store:
        count = store.sessions.count()
        label = f"{count:,} sessions, {count * 2:,} usage rows"
        for by in ("model", "day", "session"):
            rows.append(
                Row(
                    f"usage report by {by}",
                    label,
                    *measure(lambda by=by: store.usage.report(since=None, by=by), runs),
                    200,
                )
            )  # type: ignore[misc]
    env = {
        **os.environ,
        "CO_CLI_DATA_DIR": str(db.parent),
        "CO_CLI_CONFIG_DIR": str(db.parent / "cfg"),
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    }

    def cli() -> None:
        subprocess.run(
            [sys.executable, "-m", "co_cli", "usage", "--since", "30d"],
            check=True,
            env=env,
            cwd=db.parent,
            capture_output=True,
        )

    rows.append(Row("`co usage --since 30d` (new process)", label, *measure(cli, 3), None))
    print("  done usage", file=sys.stderr)


def bench_list_export(db: Path, runs: int, rows: list[Row]) -> None:
    """`co sessions list --limit 10000` and `co sessions export --all` over the picker's store, each as a new
    process (startup included), output to a file."""
    with Store.open(db, reads_only=True) as store:
        count = store.sessions.count()
        messages = store.db.read_one("SELECT count(*) FROM messages")[0]
    label = f"{count:,} sessions, {messages:,} msgs"
    env = {
        **os.environ,
        "CO_CLI_DATA_DIR": str(db.parent),
        "CO_CLI_CONFIG_DIR": str(db.parent / "cfg"),
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    }
    for args in (["sessions", "list", "--limit", str(count)], ["sessions", "export", "--all"]):

        def cli(args: list[str] = args) -> None:
            with open(db.parent / "out.txt", "w") as out:
                subprocess.run([sys.executable, "-m", "co_cli", *args], check=True, env=env, cwd=db.parent, stdout=out)

        rows.append(Row(f"`co {' '.join(args)}` (new process)", label, *measure(cli, 3), 3000))
    print("  done list/export", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs = 3 if args.quick else 7
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="co-bench-sessions-") as name:
        tmp = Path(name)
        picker_db = tmp / "picker" / "co-cli.db"
        bench_picker(picker_db, 2_000 if args.quick else 10_000, runs, rows)
        bench_usage(picker_db, runs, rows)
        bench_list_export(picker_db, runs, rows)
        bench_fork_at(tmp / "fork" / "co-cli.db", runs, rows)
        bench_import(tmp, 200 if args.quick else 1_000, 3 if args.quick else 3, rows)
    print_table(rows)


if __name__ == "__main__":
    main()
