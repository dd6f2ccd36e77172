"""The turn_memories table: the memories a turn's model requests were sent (the memory's id and its text as
sent), saved with the turn; the browser view shows them under the prompt that used them."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from co_cli.store.db import Database, Transaction


@dataclass(frozen=True)
class SentMemory:
    memory_id: int
    kind: str
    text: str
    """The memory's text as the request carried it (a later edit of the memory does not change it)."""


def insert(
    tx: Transaction, session_id: str, seq: int, memories: Sequence[SentMemory], now: float | None = None
) -> None:
    """Save the memories sent with the turn whose prompt is message ``seq``."""
    now = time.time() if now is None else now
    tx.executemany(
        "INSERT INTO turn_memories (session_id, seq, created_at, memory_id, kind, text) VALUES (?, ?, ?, ?, ?, ?)",
        [(session_id, seq, now, sent.memory_id, sent.kind, sent.text) for sent in memories],
    )


class TurnMemories:
    def __init__(self, db: Database) -> None:
        self.db = db

    def by_prompt(self, session_id: str) -> dict[int, list[SentMemory]]:
        """The memories each turn of the session was sent, by the seq of the turn's prompt, in the order sent."""
        rows = self.db.read(
            "SELECT seq, memory_id, kind, text FROM turn_memories WHERE session_id = ? ORDER BY id", (session_id,)
        )
        sent: dict[int, list[SentMemory]] = {}
        for row in rows:
            sent.setdefault(int(row["seq"]), []).append(
                SentMemory(int(row["memory_id"]), str(row["kind"]), str(row["text"]))
            )
        return sent
