"""The pins table: standing instructions kept verbatim in every request of a session (``/pin``).

Unpinning keeps the row (``removed_at``); a fork takes the pins in force with it.
"""

from __future__ import annotations

import builtins
import time
from typing import NamedTuple

from co_cli.store import sessions
from co_cli.store.codec import valid_utf8
from co_cli.store.db import Database, Transaction


class StoredPin(NamedTuple):
    """A pin in force, read by name or unpacked as ``(id, text, source)``."""

    id: int
    text: str
    source: str
    """Who pinned it: "user" (``/pin``) or "summary" (an instruction a compaction found)."""


# --- statements, inside the caller's transaction ---------------------------------------------------------


def _insert(tx: Transaction, session_id: str, text: str, source: str, created_at: float) -> int:
    cursor = tx.execute(
        "INSERT INTO pins (session_id, text, source, created_at) VALUES (?, ?, ?, ?)",
        (session_id, text, source, created_at),
    )
    return int(cursor.lastrowid or 0)


def insert(tx: Transaction, session_id: str, text: str, source: str) -> int:
    """Pin ``text`` in the session; the pin's id."""
    sessions.find(tx, session_id)
    return _insert(tx, session_id, valid_utf8(text), source, time.time())


def remove(tx: Transaction, session_id: str, pin_id: int) -> None:
    """Unpin (the row stays, marked removed)."""
    tx.execute(
        "UPDATE pins SET removed_at = ? WHERE session_id = ? AND id = ? AND removed_at IS NULL",
        (time.time(), session_id, pin_id),
    )


def copy(tx: Transaction, source_id: str, target_id: str) -> None:
    """Pin in the target session what is pinned in the source now (each pin keeps when it was made)."""
    rows = tx.read(
        "SELECT text, source, created_at FROM pins WHERE session_id = ? AND removed_at IS NULL ORDER BY id",
        (source_id,),
    )
    for row in rows:
        _insert(tx, target_id, row["text"], row["source"], row["created_at"])


# --- the table -------------------------------------------------------------------------------------------


class Pins:
    """A session's pins in force, added and removed one at a time."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def active(self, session_id: str) -> builtins.list[StoredPin]:
        """The session's pins in force, oldest first."""
        rows = self.db.read(
            "SELECT id, text, source FROM pins WHERE session_id = ? AND removed_at IS NULL ORDER BY id",
            (session_id,),
        )
        return [StoredPin(id=int(r["id"]), text=str(r["text"]), source=str(r["source"])) for r in rows]

    def add(self, session_id: str, text: str, source: str) -> int:
        with self.db.transaction() as tx:
            return insert(tx, session_id, text, source)

    def remove(self, session_id: str, pin_id: int) -> None:
        with self.db.transaction() as tx:
            remove(tx, session_id, pin_id)
