"""``co sessions recover`` keeps the memories too: their rows and their history are copied as they can be read."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from co_cli.store.db import connect, write_transaction

MEMORY_COLUMNS = (
    "text, scope, project, kind, status, source_session, source_seq, created_at, updated_at, replaced_by, "
    "proposal, target_id"
)
EVENT_COLUMNS = (
    "change_id, undoes, memory_id, at, action, actor, old_text, new_text, old_status, new_status, "
    "old_replaced_by, new_replaced_by, old_meta, new_meta"
)
TABLES = (("memories", MEMORY_COLUMNS), ("memory_events", EVENT_COLUMNS))

RowReader = Callable[[sqlite3.Connection, str, str], tuple[list[tuple[Any, ...]], bool]]


def read_memories(conn: sqlite3.Connection, rows: RowReader) -> dict[str, list[tuple[Any, ...]]]:
    """Every readable row of the memory tables (rowid first); nothing for a database without them."""
    found: dict[str, list[tuple[Any, ...]]] = {}
    for table, columns in TABLES:
        try:
            conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchall()
        except sqlite3.DatabaseError:
            continue
        found[table] = rows(conn, table, columns)[0]
    return found


def write_memories(target: Path, found: dict[str, list[tuple[Any, ...]]]) -> int:
    """Insert the rows read (ids kept); a row that breaks a constraint (damage) is skipped. Returns how many
    memories were kept."""
    kept = 0
    conn = connect(target)
    try:
        for table, columns in TABLES:
            marks = ", ".join("?" * (len(columns.split(",")) + 1))
            for row in found.get(table, []):
                try:
                    with write_transaction(conn, target):
                        conn.execute(f"INSERT INTO {table} (id, {columns}) VALUES ({marks})", row)
                except Exception:
                    continue
                kept += table == "memories"
    finally:
        conn.close()
    return kept
