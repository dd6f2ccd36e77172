"""The readings table: what the model read in each of the user's messages (memory extraction's typed reading,
verified against the message), filed under the seq of the message: the user's standing rules, the changes they
stated and their next steps, each as the user's own sentence. A message read and found to hold none of them has
a row too (an empty list), so compaction knows it was read. Compaction acts on these for the messages it
replaces, where the summariser's reading of a long stretch is far weaker."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from co_cli.store.db import Database, Transaction

PartKind = Literal["rule", "change", "next_step"]
PART_KINDS: tuple[PartKind, ...] = get_args(PartKind)


@dataclass(frozen=True)
class ReadPart:
    """One thing a message says that compaction acts on: a rule, a change or a next step, and the user's words."""

    kind: PartKind
    quote: str


@dataclass(frozen=True)
class MessageReading:
    """A message of the user's as it was read: its text (the user's own words, as read), the parts found in it, and
    the message's text as the transcript holds it (with the files and command output a prompt carried; None when
    the message is not in the transcript)."""

    seq: int
    text: str
    parts: tuple[ReadPart, ...]
    stored: str | None = None


def _parts(raw: str) -> tuple[ReadPart, ...]:
    try:
        items = json.loads(raw)
    except ValueError:
        return ()
    if not isinstance(items, list):
        return ()
    return tuple(
        ReadPart(item["kind"], item["quote"])
        for item in items
        if isinstance(item, dict) and item.get("kind") in PART_KINDS and isinstance(item.get("quote"), str)
    )


def copy(tx: Transaction, source_id: str, target_id: str, upto_seq: int) -> None:
    """A fork's copy of the readings of the messages up to ``upto_seq``."""
    tx.execute(
        "INSERT INTO readings (session_id, seq, created_at, text, parts) "
        "SELECT ?, seq, created_at, text, parts FROM readings WHERE session_id = ? AND seq <= ? ORDER BY seq",
        (target_id, source_id, upto_seq),
    )


class Readings:
    def __init__(self, db: Database) -> None:
        self.db = db

    def save(self, session_id: str, seq: int, text: str, parts: Sequence[ReadPart], now: float | None = None) -> None:
        """Keep the reading of message ``seq`` (the latest reading of a message replaces an earlier one). A session
        that is not (or no longer) in the store keeps none."""
        raw = json.dumps([{"kind": p.kind, "quote": p.quote} for p in parts], ensure_ascii=False)
        with self.db.transaction() as tx:
            tx.execute(
                "INSERT INTO readings (session_id, seq, created_at, text, parts) "
                "SELECT id, ?, ?, ?, ? FROM sessions WHERE id = ? "
                "ON CONFLICT (session_id, seq) DO UPDATE SET created_at = excluded.created_at, text = excluded.text, "
                "parts = excluded.parts",
                (seq, time.time() if now is None else now, text, raw, session_id),
            )

    def of_session(self, session_id: str) -> list[MessageReading]:
        """The readings of the session's messages, in the order of the messages, each with its message's text."""
        rows = self.db.read(
            "SELECT r.seq, r.text, r.parts, m.text AS stored FROM readings r LEFT JOIN messages m "
            "ON m.session_id = r.session_id AND m.seq = r.seq WHERE r.session_id = ? ORDER BY r.seq",
            (session_id,),
        )
        return [
            MessageReading(
                int(row["seq"]),
                str(row["text"]),
                _parts(str(row["parts"])),
                None if row["stored"] is None else str(row["stored"]),
            )
            for row in rows
        ]
