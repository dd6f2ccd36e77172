"""The memory-extraction queue: turns whose facts are still to be extracted (by the memory extractor).

Kept in the database so that none is lost at exit or in a crash: an item is claimed while it is worked on
and removed when done; a claim older than ``STALE_AFTER`` seconds (its co died) is taken over by the next co.
A failed item is tried once more, ``RETRY_AFTER`` seconds later at the earliest (by this co's next turn or the
next co), never at once; failing again, it is dropped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from co_cli.store.db import Database, Transaction


@dataclass(frozen=True)
class QueuedTurn:
    id: int
    session_id: str
    seq: int
    text: str
    project: str
    attempts: int


def put(tx: Transaction, session_id: str, seq: int, text: str, project: str) -> None:
    """Queue a finished turn's prompt (message ``seq``) for extraction."""
    tx.execute(
        "INSERT INTO memory_queue (session_id, seq, text, project, created_at) VALUES (?, ?, ?, ?, ?)",
        (session_id, seq, text, project, time.time()),
    )


class ExtractionQueue:
    """The queue, worked through one item at a time."""

    MAX_ATTEMPTS = 2
    STALE_AFTER = 300.0
    RETRY_AFTER = 60.0

    def __init__(self, db: Database) -> None:
        self.db = db

    def put(self, session_id: str, seq: int, text: str, project: str) -> None:
        with self.db.transaction() as tx:
            put(tx, session_id, seq, text, project)

    def claim(self, stale_after: float | None = None) -> QueuedTurn | None:
        now = time.time()
        with self.db.transaction() as tx:
            row = tx.read_one(
                "SELECT id, session_id, seq, text, project, attempts FROM memory_queue "
                "WHERE claimed_at IS NULL OR claimed_at < ? ORDER BY id LIMIT 1",
                (now - (self.STALE_AFTER if stale_after is None else stale_after),),
            )
            if row is None:
                return None
            tx.execute("UPDATE memory_queue SET claimed_at = ?, attempts = attempts + 1 WHERE id = ?", (now, row["id"]))
            return QueuedTurn(
                id=int(row["id"]),
                session_id=str(row["session_id"]),
                seq=int(row["seq"]),
                text=str(row["text"]),
                project=str(row["project"]),
                attempts=int(row["attempts"]) + 1,
            )

    def done(self, item: QueuedTurn) -> None:
        with self.db.transaction() as tx:
            tx.execute("DELETE FROM memory_queue WHERE id = ?", (item.id,))

    def failed(self, item: QueuedTurn) -> None:
        """Try again RETRY_AFTER seconds later at the earliest, unless it has failed too often. (The item stays
        claimed, its claim dated so that it turns stale RETRY_AFTER seconds from now.)"""
        if item.attempts >= self.MAX_ATTEMPTS:
            self.done(item)
            return
        claimed = time.time() - self.STALE_AFTER + self.RETRY_AFTER
        with self.db.transaction() as tx:
            tx.execute("UPDATE memory_queue SET claimed_at = ? WHERE id = ?", (claimed, item.id))

    def release(self, item: QueuedTurn) -> None:
        """Hand the item back untried (the work on it was interrupted): the next co takes it at once."""
        with self.db.transaction() as tx:
            tx.execute("UPDATE memory_queue SET claimed_at = NULL, attempts = attempts - 1 WHERE id = ?", (item.id,))

    def __len__(self) -> int:
        row = self.db.read_one("SELECT count(*) AS n FROM memory_queue")
        return int(row["n"]) if row else 0
