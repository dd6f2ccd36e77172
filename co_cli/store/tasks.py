"""The task_lists table: the session's task list, one snapshot per change, and what a list may hold.

A snapshot holds the whole list as it stood after message ``seq`` of the transcript (-1: before any), so a
fork at any message takes the list of that point; snapshots are never changed or removed (done tasks pruned
from the list stay in the history ``co sessions show`` prints).

``checked_items`` is the one check of a list's items, for every writer: the model's set_tasks tool and /tasks
(``tools.tasks``, which also hold a list to its token budget) and an imported session document.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, NamedTuple, cast

from co_cli.errors import CoError
from co_cli.store.db import Database, Transaction
from co_cli.terminal_text import without_control_sequences
from co_cli.vocabulary import TASK_STATUSES, TaskStatus

MAX_TASKS = 30
"""A task list is a plan, not a backlog: longer lists belong in a file."""
MAX_TASK_CHARS = 300


def clean_task_text(text: str) -> str:
    """Task text as it is kept and shown: one line of plain text (control characters removed, whitespace
    collapsed)."""
    return " ".join(without_control_sequences(text).split())


def checked_items(items: Sequence[tuple[str, str]]) -> list[tuple[str, TaskStatus]]:
    """The items with their text cleaned, or CoError saying what is wrong with the list (one line, numbered as
    the list is): more than ``MAX_TASKS`` items, an empty or repeated one, one over ``MAX_TASK_CHARS``, or a
    status other than pending, in_progress and done."""
    if len(items) > MAX_TASKS:
        raise CoError(f"a task list holds at most {MAX_TASKS} tasks (this one has {len(items):,}); merge or drop some")
    cleaned: list[tuple[str, TaskStatus]] = []
    seen: dict[str, int] = {}
    for n, (raw, status) in enumerate(items, 1):
        if status not in TASK_STATUSES:
            raise CoError(f"task {n} has unknown status {status!r} (use {', '.join(TASK_STATUSES)})")
        text = clean_task_text(raw)
        if not text:
            raise CoError(f"task {n} is empty")
        if len(text) > MAX_TASK_CHARS:
            raise CoError(f"task {n} has {len(text):,} characters, more than {MAX_TASK_CHARS}; say it shorter")
        if text.casefold() in seen:
            raise CoError(f"task {n} repeats task {seen[text.casefold()]}: {text}")
        seen[text.casefold()] = n
        cleaned.append((text, cast(TaskStatus, status)))
    return cleaned


class StoredTask(NamedTuple):
    text: str
    status: str
    created_at: float
    updated_at: float


class TaskSnapshot(NamedTuple):
    seq: int
    """The last message of the transcript when the list was set (-1: none yet)."""
    created_at: float
    source: str
    """Who set it: "model" (its set_tasks tool, saved with the turn) or "user" (/tasks)."""
    items: list[StoredTask]


def _encode(items: Sequence[StoredTask]) -> str:
    return json.dumps([item._asdict() for item in items], ensure_ascii=False)


def _decode(text: str) -> list[StoredTask]:
    """The items of a snapshot; an item that is not well-formed is skipped (a hand-edited or damaged row)."""
    try:
        data: Any = json.loads(text)
    except ValueError:
        return []
    items: list[StoredTask] = []
    for item in data if isinstance(data, list) else []:
        try:
            items.append(
                StoredTask(str(item["text"]), str(item["status"]), float(item["created_at"]), float(item["updated_at"]))
            )
        except (KeyError, TypeError, ValueError):
            continue
    return items


def _snapshot(row: Any) -> TaskSnapshot:
    return TaskSnapshot(int(row["seq"]), float(row["created_at"]), str(row["source"]), _decode(row["items"]))


# --- statements, inside the caller's transaction ---------------------------------------------------------


def insert(
    tx: Transaction, session_id: str, seq: int, items: Sequence[StoredTask], source: str, now: float | None = None
) -> None:
    """Save the whole list as it stands after message ``seq``."""
    tx.execute(
        "INSERT INTO task_lists (session_id, seq, created_at, source, items) VALUES (?, ?, ?, ?, ?)",
        (session_id, seq, time.time() if now is None else now, source, _encode(items)),
    )


def insert_snapshots(tx: Transaction, session_id: str, snapshots: Sequence[TaskSnapshot]) -> None:
    """Save versions of a list as given (an imported session's), in order."""
    for snapshot in snapshots:
        insert(tx, session_id, snapshot.seq, snapshot.items, snapshot.source, snapshot.created_at)


def spans(tx: Transaction, session_id: str) -> set[tuple[float, int]]:
    """(created_at, seq) of each version the session has (what an import must not add again)."""
    rows = tx.read("SELECT created_at, seq FROM task_lists WHERE session_id = ?", (session_id,))
    return {(round(float(row["created_at"]), 6), int(row["seq"])) for row in rows}


def copy(tx: Transaction, source_id: str, target_id: str, upto_seq: int) -> None:
    """Give the target session the source's snapshots up to message ``upto_seq`` (a fork at that point)."""
    tx.execute(
        "INSERT INTO task_lists (session_id, seq, created_at, source, items) "
        "SELECT ?, seq, created_at, source, items FROM task_lists WHERE session_id = ? AND seq <= ? ORDER BY id",
        (target_id, source_id, upto_seq),
    )


# --- the table -------------------------------------------------------------------------------------------


class TaskLists:
    """A session's task list: the latest snapshot, and every one before it."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def latest(self, session_id: str) -> TaskSnapshot | None:
        row = self.db.read_one(
            "SELECT seq, created_at, source, items FROM task_lists WHERE session_id = ? ORDER BY id DESC LIMIT 1",
            (session_id,),
        )
        return _snapshot(row) if row is not None else None

    def history(self, session_id: str) -> list[TaskSnapshot]:
        """Every snapshot of the session, oldest first."""
        rows = self.db.read(
            "SELECT seq, created_at, source, items FROM task_lists WHERE session_id = ? ORDER BY id", (session_id,)
        )
        return [_snapshot(row) for row in rows]

    def save(self, session_id: str, seq: int, items: Sequence[StoredTask], source: str) -> None:
        with self.db.transaction() as tx:
            insert(tx, session_id, seq, items, source)


def earlier_tasks(history: Sequence[TaskSnapshot], current: Sequence[StoredTask]) -> list[StoredTask]:
    """Each task that was on the list once but is not in ``current``, as it last stood (in the order it first
    appeared): what ``co sessions show`` and the Markdown export list below the list in force."""
    latest: dict[tuple[str, float], StoredTask] = {}
    for snapshot in history:
        for item in snapshot.items:
            latest[(item.text, item.created_at)] = item
    kept = {(item.text, item.created_at) for item in current}
    return [item for key, item in latest.items() if key not in kept]
