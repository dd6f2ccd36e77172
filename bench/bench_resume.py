"""Resume benchmark: rebuilding the working context of a saved session, and `co chat --resume` end to end.

Usage: python bench/bench_resume.py [--sizes 1000 10000]
In process: Conversation.load (transcript read, compaction applied, repair, agent built).
End to end: `co chat --resume ID -p hi` with model=test, wall time of the whole process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import populate  # noqa: E402

from co_cli.config import load_settings  # noqa: E402
from co_cli.deps import CoDeps  # noqa: E402
from co_cli.models import resolve_model  # noqa: E402
from co_cli.session import Conversation  # noqa: E402
from co_cli.store import Store  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"{'messages':>10} | {'load in process ms (median)':>28} | {'co chat --resume -p, wall s':>28}")
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            env = {k: v for k, v in os.environ.items() if not k.startswith("CO_CLI_")}
            env.update(CO_CLI_DATA_DIR=f"{tmp}/data", CO_CLI_CONFIG_DIR=f"{tmp}/config", CO_CLI_MODEL="test")
            os.environ.update(env)
            loaded = load_settings()
            loaded.paths.ensure_data_dir()
            store = Store.open(loaded.paths.db)
            session_id = populate(store, size)
            store.sessions.set_model(session_id, "test")
            resolved = resolve_model(loaded.settings)
            times = []
            for _ in range(args.runs):
                deps = CoDeps(settings=loaded.settings, paths=loaded.paths, cwd=Path(tmp), store=store)
                conv = Conversation(resolved=resolved, deps=deps)
                start = time.perf_counter()
                conv.load(store.sessions.get(session_id))
                times.append(time.perf_counter() - start)
                conv.release()
            store.close()
            walls = []
            for _ in range(3):
                start = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-m", "co_cli", "chat", "--resume", session_id, "-p", "hi"],
                    env=env,
                    capture_output=True,
                    check=True,
                    cwd=tmp,
                )
                walls.append(time.perf_counter() - start)
        print(f"{size:>10,} | {statistics.median(times) * 1e3:>28.1f} | {statistics.median(walls):>28.2f}")


if __name__ == "__main__":
    main()
