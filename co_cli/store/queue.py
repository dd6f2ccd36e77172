"""The memory-extraction queue: turns whose facts are still to be extracted (by the memory extractor).

Kept in the database so that none is lost at exit or in a crash: an item is claimed while it is worked on
and removed when done; a claim older than ``stale_after`` seconds (its co died) is taken over by the next co.
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

    def __init__(self, db: Database) -> None:
        self.db = db

    def put(self, session_id: str, seq: int, text: str, project: str) -> None:
        with self.db.transaction() as tx:
            put(tx, session_id, seq, text, project)

    def claim(self, stale_after: float = 300.0) -> QueuedTurn | None:
        now = time.time()
        with self.db.transaction() as tx:
            row = tx.read_one(
                "SELECT id, session_id, seq, text, project, attempts FROM memory_queue "
                "WHERE claimed_at IS NULL OR claimed_at < ? ORDER BY id LIMIT 1",
                (now - stale_after,),
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
        """Try again later (next start), unless it has failed too often."""
        if item.attempts >= self.MAX_ATTEMPTS:
            self.done(item)
            return
        with self.db.transaction() as tx:
            tx.execute("UPDATE memory_queue SET claimed_at = NULL WHERE id = ?", (item.id,))

    def __len__(self) -> int:
        row = self.db.read_one("SELECT count(*) AS n FROM memory_queue")
        return int(row["n"]) if row else 0
