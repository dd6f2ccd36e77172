"""Benchmark of the session's task list and tool statistics: what they add to every request, to the toolbar, to
a turn's commit, to a resume and to a fork, at growing numbers of saved list versions.

    python bench/bench_tasks.py           # 1k / 10k list versions (~10 s)

Everything happens in a temporary directory that is removed afterwards.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart  # noqa: E402

from co_cli.deps import SessionState, Task  # noqa: E402
from co_cli.session.recorder import Recorder, TurnRecord, stored_tasks  # noqa: E402
from co_cli.store import Store  # noqa: E402
from co_cli.store import tasks as task_table  # noqa: E402
from co_cli.store.tasks import MAX_TASK_CHARS, MAX_TASKS  # noqa: E402
from co_cli.store.tool_calls import ToolCallRow  # noqa: E402
from co_cli.tools.tasks import in_force, open_count, tasks_section  # noqa: E402


def median_ms(work: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def full_list(now: float) -> list[Task]:
    """The longest list a session can hold: MAX_TASKS tasks of a third of the longest text each."""
    text = "x" * (MAX_TASK_CHARS // 3)
    return [
        Task(f"{i} {text}", "done" if i % 3 == 0 else "pending", now - i * 3600, now - i * 3600)
        for i in range(MAX_TASKS)
    ]


def turn(recorder: Recorder, i: int, tasks: list[Task] | None, calls: list[ToolCallRow]) -> None:
    seq = recorder.begin(f"prompt {i}")
    answer = [ModelRequest(parts=[UserPromptPart(f"prompt {i}")]), ModelResponse(parts=[TextPart(f"answer {i}")])]
    recorder.finish(TurnRecord(seq, answer, "ok", tasks=tasks, tool_calls=calls))


def main() -> None:
    now = time.time()
    tasks = full_list(now)
    rows = [
        (
            "render the list for a request (30 tasks)",
            median_ms(lambda: tasks_section(in_force(tasks, now, 24), 10_000), 2000),
        )
    ]
    rows.append(("toolbar open count (30 tasks)", median_ms(lambda: open_count(in_force(tasks, now, 24)), 2000)))
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(Path(tmp) / "co.db")
        recorder = Recorder(store, SessionState(), Path(tmp), model_label=lambda: "bench")
        turn(recorder, 0, None, [])
        calls = [ToolCallRow("run_shell", "ok", 0.1), ToolCallRow("read_file", "ok", 0.01)]
        counter = iter(range(1, 10**9))
        rows.append(
            ("commit a turn, no list, no tools", median_ms(lambda: turn(recorder, next(counter), None, []), 200))
        )
        rows.append(("commit a turn with a 30-task list and 2 tool calls",
                     median_ms(lambda: turn(recorder, next(counter), tasks, calls), 200)))  # fmt: skip
        assert recorder.session is not None
        session_id = recorder.session.id
        saved = len(store.tasks.history(session_id))
        rows.append((f"fork: copy {saved:,} versions", median_ms(lambda: store.fork(session_id), 5)))
        for versions in (1_000, 10_000):
            while len(store.tasks.history(session_id)) < versions:
                with store.db.transaction() as tx:
                    for _ in range(500):
                        task_table.insert(tx, session_id, 0, stored_tasks(tasks), "user")
            rows.append((f"resume: the latest list of {versions:,} versions",
                         median_ms(lambda: store.tasks.latest(session_id), 50)))  # fmt: skip
            rows.append((f"fork: copy {versions:,} versions", median_ms(lambda: store.fork(session_id), 5)))
            rows.append((f"by_tool of the session ({len(store.tool_calls.by_tool(session_id))} tools)",
                         median_ms(lambda: store.tool_calls.by_tool(session_id), 50)))  # fmt: skip
        store.close()
    width = max(len(name) for name, _ in rows)
    for name, ms in rows:
        print(f"{name:<{width}}  {ms:8.3f} ms")


if __name__ == "__main__":
    main()
