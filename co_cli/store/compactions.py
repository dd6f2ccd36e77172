"""The compactions table: each time a session's working context was compacted, what replaced which messages.

The transcript is never changed by a compaction; a compaction row says how the working context was built
from it (a rebuild of the working context). An undone compaction (``/uncompact``) stays on record with ``undone_at``.
"""

from __future__ import annotations

import builtins
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from co_cli.store import sessions
from co_cli.store.codec import dump_messages, load_messages
from co_cli.store.db import Database, Reader, Transaction

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage


@dataclass
class CompactionRecord:
    from_seq: int
    upto_seq: int
    summary: str
    focus: str | None
    trigger: str
    tokens_before: int
    tokens_after: int
    model: str
    replacement: list[ModelMessage]
    created_at: float = 0.0
    id: int | None = None
    method: str = "summary"
    """summary, digest (the extractive fallback), marker (the static last resort) or tools-dropped."""
    detail: str = ""
    """What triggered it, in words ("auto at 83% of the window", "overflow", "manual")."""
    ledger: str = ""
    """The identifier check ("summary kept 31/40 identifiers; 9 appended")."""
    tiers: str = ""
    """The cheap passes that ran before it, comma-separated."""
    undone_at: float | None = None

    def describe(self) -> str:
        """One line for the transcript views: what was replaced, how, why, and the identifier check."""
        how = f"{self.method}, {self.detail or self.trigger}"
        if self.focus:
            how += f", focus: {self.focus}"
        line = (
            f"Compaction ({how}): messages #{max(self.from_seq, 0)}–#{self.upto_seq} replaced, "
            f"~{self.tokens_before:,} -> ~{self.tokens_after:,} tokens"
        )
        extras = [text for text in (self.ledger, f"after: {self.tiers}" if self.tiers else "") if text]
        if extras:
            line += f" ({'; '.join(extras)})"
        return line + (" — undone" if self.undone_at is not None else "")


def compactions_by_position(records: Iterable[CompactionRecord]) -> dict[int, list[CompactionRecord]]:
    """Compaction records keyed by the last transcript seq they cover (where the views show them)."""
    placed: dict[int, list[CompactionRecord]] = {}
    for record in records:
        placed.setdefault(record.upto_seq, []).append(record)
    return placed


@dataclass(frozen=True)
class StoredCompaction:
    """A compactions row as stored (the replacement as JSON): what copies, imports and recovery write."""

    created_at: float
    from_seq: int
    upto_seq: int
    summary: str
    focus: str | None
    trigger: str
    tokens_before: int
    tokens_after: int
    model: str
    replacement_json: str
    method: str
    detail: str
    ledger: str
    tiers: str
    undone_at: float | None


_STORED_FIELDS = tuple(field.name for field in fields(StoredCompaction))
_STORED_COLUMNS = ", ".join(_STORED_FIELDS)
_INSERT = (
    f"INSERT INTO compactions (session_id, {_STORED_COLUMNS}) VALUES ({', '.join('?' * (len(_STORED_FIELDS) + 1))})"
)


def encode(record: CompactionRecord, created_at: float | None = None) -> StoredCompaction:
    """The row that stores ``record`` (made at ``created_at``, by default when the record says)."""
    return StoredCompaction(
        created_at=record.created_at if created_at is None else created_at,
        from_seq=record.from_seq,
        upto_seq=record.upto_seq,
        summary=record.summary,
        focus=record.focus,
        trigger=record.trigger,
        tokens_before=record.tokens_before,
        tokens_after=record.tokens_after,
        model=record.model,
        replacement_json=dump_messages(record.replacement),
        method=record.method,
        detail=record.detail,
        ledger=record.ledger,
        tiers=record.tiers,
        undone_at=record.undone_at,
    )


def _values(session_id: str, row: StoredCompaction) -> tuple[object, ...]:
    return (session_id, *(getattr(row, name) for name in _STORED_FIELDS))


def _record(row: sqlite3.Row, session_id: str) -> CompactionRecord:
    replacement = load_messages([row["replacement_json"]], f"compaction {row['id']} of session {session_id}")
    return CompactionRecord(
        from_seq=row["from_seq"],
        upto_seq=row["upto_seq"],
        summary=row["summary"],
        focus=row["focus"],
        trigger=row["trigger"],
        tokens_before=row["tokens_before"],
        tokens_after=row["tokens_after"],
        model=row["model"],
        replacement=replacement,
        created_at=row["created_at"],
        id=row["id"],
        method=row["method"],
        detail=row["detail"],
        ledger=row["ledger"],
        tiers=row["tiers"],
        undone_at=row["undone_at"],
    )


# --- statements, inside the caller's transaction ---------------------------------------------------------


def insert(tx: Transaction, session_id: str, record: CompactionRecord) -> int:
    """Record a compaction just made (counted on the session); its id. The record gets its id and time."""
    if record.trigger not in ("auto", "manual"):
        raise ValueError(f"unknown compaction trigger {record.trigger!r}")
    created_at = record.created_at or time.time()
    row = encode(record, created_at)
    sessions.find(tx, session_id)
    cursor = tx.execute(_INSERT, _values(session_id, row))
    sessions.add_counts(tx, session_id, updated_at=time.time(), compactions=1)
    record.id = int(cursor.lastrowid or 0)
    record.created_at = created_at
    return record.id


def insert_rows(tx: Transaction, session_id: str, rows: Iterable[StoredCompaction]) -> int:
    """Add rows as given, without counting them on the session (its row says the count already); how many."""
    values = [_values(session_id, row) for row in rows]
    tx.executemany(_INSERT, values)
    return len(values)


def undo(tx: Transaction, session_id: str, now: float | None = None) -> CompactionRecord | None:
    """Mark the latest compaction in force as undone (it stays on record); return it, or None."""
    latest = _latest(tx, session_id)
    if latest is None:
        return None
    now = time.time() if now is None else now
    tx.execute("UPDATE compactions SET undone_at = ? WHERE id = ?", (now, latest.id))
    sessions.add_counts(tx, session_id, updated_at=now)
    latest.undone_at = now
    return latest


def copy(tx: Transaction, source_id: str, target_id: str, upto_seq: int, before: float | None) -> int:
    """Copy the source session's compactions that had happened by message ``upto_seq`` (covering only messages
    up to it, and made ``before`` the message after it was saved; None: any time) to the target; how many."""
    rows = tx.read(
        f"SELECT {_STORED_COLUMNS} FROM compactions WHERE session_id = ? AND upto_seq <= ? "
        "AND (? IS NULL OR created_at < ?) ORDER BY id",
        (source_id, upto_seq, before, before),
    )
    return insert_rows(tx, target_id, (StoredCompaction(**{name: r[name] for name in _STORED_FIELDS}) for r in rows))


def spans(reader: Reader, session_id: str) -> builtins.list[tuple[float, int, int]]:
    """(time made, first seq, last seq) of each of the session's compactions."""
    rows = reader.read("SELECT created_at, from_seq, upto_seq FROM compactions WHERE session_id = ?", (session_id,))
    return [(row["created_at"], row["from_seq"], row["upto_seq"]) for row in rows]


def _rows(reader: Reader, session_id: str, latest_only: bool) -> builtins.list[sqlite3.Row]:
    where = "AND undone_at IS NULL ORDER BY id DESC LIMIT 1" if latest_only else "ORDER BY id"
    sessions.find(reader, session_id)
    return reader.read(f"SELECT id, {_STORED_COLUMNS} FROM compactions WHERE session_id = ? {where}", (session_id,))


def _latest(reader: Reader, session_id: str) -> CompactionRecord | None:
    rows = _rows(reader, session_id, latest_only=True)
    return _record(rows[0], session_id) if rows else None


# --- the table -------------------------------------------------------------------------------------------


class Compactions:
    """A session's compactions: recorded, read back (the latest in force, or all), undone."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, session_id: str, record: CompactionRecord) -> int:
        with self.db.transaction() as tx:
            return insert(tx, session_id, record)

    def latest(self, session_id: str) -> CompactionRecord | None:
        """The compaction the working context starts from (the latest one not undone), or None."""
        with self.db.lock:
            rows = _rows(self.db, session_id, latest_only=True)
        return _record(rows[0], session_id) if rows else None

    def undo(self, session_id: str) -> CompactionRecord | None:
        """Mark the latest compaction in force as undone (it stays on record); return it, or None."""
        with self.db.transaction() as tx:
            return undo(tx, session_id)

    def session_ids(self) -> set[str]:
        """The sessions with at least one compaction on record (undone ones included)."""
        return {row["session_id"] for row in self.db.read("SELECT DISTINCT session_id FROM compactions")}

    def list(self, session_id: str) -> builtins.list[CompactionRecord]:
        with self.db.lock:
            rows = _rows(self.db, session_id, latest_only=False)
        return [_record(row, session_id) for row in rows]
