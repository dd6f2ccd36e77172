"""A deleted session leaves no row of its own in any table: each table with a ``session_id`` column is either one
``sessions.delete`` empties or the extraction queue's."""

from __future__ import annotations

from pathlib import Path

from co_cli.store import Store
from co_cli.store.sessions import SESSION_TABLES


def _tables_with_a_session(store: Store) -> set[str]:
    names = [str(r["name"]) for r in store.db.read("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {n for n in names if any(c["name"] == "session_id" for c in store.db.read(f"PRAGMA table_info({n})"))}


def test_every_table_of_a_sessions_rows_is_emptied_by_its_deletion(tmp_path: Path) -> None:
    with Store.open(tmp_path / "co.db") as store:
        assert _tables_with_a_session(store) == {*SESSION_TABLES, "memory_queue"}
