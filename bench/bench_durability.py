"""Durability under abuse: many co processes writing one database at once (lock errors, lost turns), and
kill -9 during compaction writes, merge-import, purge and recover (is the database intact and resumable?).

    python bench/bench_durability.py            # 40 writers x 20 turns; 8 kills per operation (~1 min)
    python bench/bench_durability.py --quick    # 10 writers; 3 kills per operation

Everything happens in a temporary directory that is removed afterwards. The figures are in
docs/performance.md.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from queue import Queue
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart  # noqa: E402

from co_cli.context.repair import repair_orphans  # noqa: E402
from co_cli.store import CompactionRecord, Store  # noqa: E402
from co_cli.store.export import export_json_line  # noqa: E402
from co_cli.store.merge import merge_import  # noqa: E402
from co_cli.store.recover import PARTIAL, recover  # noqa: E402


def text_turn(prompt: str, answer: str) -> list[Any]:
    return [ModelRequest(parts=[UserPromptPart(prompt)]), ModelResponse(parts=[TextPart(answer)], model_name="m")]


def save_turn(store: Store, session_id: str, prompt: str, answer: str) -> None:
    seq = store.messages.begin_turn(session_id, prompt)
    store.messages.finish_turn(session_id, seq, text_turn(prompt, answer), input_tokens=1)


# ----- many writers ---------------------------------------------------------------------------------------


def _writer(db: str, own: str, shared: str, turns: int, start: float, errors: Queue[str]) -> None:
    try:
        store = Store.open(Path(db))
        while time.time() < start:
            time.sleep(0.001)
        for i in range(turns):
            save_turn(store, shared if i % 2 else own, f"turn {i} of {os.getpid()}", f"answer {i}")
        store.close()
    except Exception as exc:  # counted, not raised: the figure is how many
        errors.put(f"{type(exc).__name__}: {exc}")


def many_writers(tmp: Path, writers: int, turns: int) -> str:
    db = tmp / "writers" / "co-cli.db"
    with Store.open(db) as store:
        shared = store.sessions.create(model="m", cwd="/", title="shared").id
        own = [store.sessions.create(model="m", cwd="/", title=f"own {i}").id for i in range(writers)]
    ctx = multiprocessing.get_context("fork")
    errors: Queue[str] = ctx.Queue()  # type: ignore[assignment]
    start = time.time() + 1.0
    procs = [ctx.Process(target=_writer, args=(str(db), o, shared, turns, start, errors)) for o in own]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(600)
    elapsed = time.time() - start
    failed = []
    while not errors.empty():
        failed.append(errors.get())
    with Store.open(db) as store:
        saved = store.db.read_one("SELECT count(*) FROM messages")[0]
        sound = store.db.integrity_ok()
        seqs = [m.seq for m in store.messages.transcript(shared)]
    lost = (writers * turns * 2 - saved) // 2
    return (
        f"{writers} writers x {turns} turns in {elapsed:.1f} s: {len(failed)} errors"
        f"{' (' + failed[0] + ')' if failed else ''}, {lost} lost turns, shared session contiguous "
        f"{seqs == list(range(len(seqs)))}, integrity {'ok' if sound else 'FAILED'}"
    )


# ----- kill -9 during an operation ---------------------------------------------------------------------------


def seed(db: Path, sessions: int, turns: int) -> None:
    with Store.open(db) as store:
        for s in range(sessions):
            sid = store.sessions.create(model="m", cwd="/", title=f"t{s}").id
            for t in range(turns):
                save_turn(store, sid, f"prompt {s}-{t} " + "x" * 200, f"answer {s}-{t}")


def _compactions(db: Path) -> None:
    with Store.open(db) as store:
        ids = [s.id for s in store.sessions.list(limit=1000)]
        while True:
            for sid in ids:
                record = CompactionRecord(
                    from_seq=0, upto_seq=5, summary="s" * 2000, focus=None, trigger="manual", tokens_before=100,
                    tokens_after=10, model="m", replacement=[], created_at=time.time(),
                )  # fmt: skip
                store.compactions.add(sid, record)


def _merge(db: Path, text: str) -> None:
    with Store.open(db) as store:
        merge_import(store, text, repair_orphans)


def _purge(db: Path) -> None:
    with Store.open(db) as store:
        ids = [info.id for info in store.sessions.list(limit=1000)]
        for sid in ids:
            store.trash.put(sid)
        store.trash.purge(ids, db.parent / "tool-outputs")


def _sound(db: Path) -> None:
    """Raises unless the database passes its checks, every session loads, and a new turn can be saved."""
    with Store.open(db) as store:
        assert store.db.integrity_ok(), "integrity check failed"
        infos = store.sessions.list(limit=10_000)
        for info in infos:
            store.messages.transcript(info.id)
            store.compactions.list(info.id)
        if infos:
            save_turn(store, infos[0].id, "after the kill", "fine")


def kills(tmp: Path, trials: int) -> dict[str, str]:
    source = tmp / "seed" / "co-cli.db"
    seed(source, sessions=60, turns=10)
    with Store.open(source) as store:
        export = "".join(export_json_line(store, s.id) + "\n" for s in store.sessions.list(limit=1000))
    ctx = multiprocessing.get_context("fork")
    results: dict[str, str] = {}
    for op in ("compaction", "merge-import", "purge", "recover"):
        intact = 0
        for trial in range(trials):
            work = tmp / f"{op}-{trial}"
            work.mkdir()
            db = work / "co-cli.db"
            if op == "merge-import":
                seed(db, sessions=5, turns=3)
            else:
                for name in ("co-cli.db", "co-cli.db-wal"):
                    if (source.parent / name).exists():
                        shutil.copy(source.parent / name, work / name)
            target = work / "recovered.db"
            work_fn, args = {
                "compaction": (_compactions, (db,)),
                "merge-import": (_merge, (db, export)),
                "purge": (_purge, (db,)),
                "recover": (recover, (db, target)),
            }[op]
            proc = ctx.Process(target=work_fn, args=args)
            proc.start()
            time.sleep(random.uniform(0.05, 0.6))
            assert proc.pid is not None
            os.kill(proc.pid, signal.SIGKILL)
            proc.join()
            try:
                _sound(db)
                if op == "recover":
                    if target.exists():
                        _sound(target)
                    recover(db, work / "again.db")  # the next run removes what the killed one left
                    assert not list(work.glob(f"*{PARTIAL}*")), "a partial database was left"
                intact += 1
            except Exception as exc:
                print(f"{op} #{trial}: {type(exc).__name__}: {exc}", file=sys.stderr)
        results[op] = f"{intact}/{trials} intact and resumable"
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="co-bench-durability-") as name:
        tmp = Path(name)
        print(many_writers(tmp, 10 if args.quick else 40, 20))
        for op, result in kills(tmp, 3 if args.quick else 8).items():
            print(f"kill -9 during {op}: {result}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus")


if __name__ == "__main__":
    main()
