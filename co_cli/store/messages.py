"""The messages table: every session's transcript, append-only, one pydantic-ai message per row.

A turn is saved in two steps: ``begin`` commits the user's prompt before the model is called, and
``append_turn`` the turn's new messages and its status when it ends. Every row, whatever writes it (a turn,
a fork, an import, a merge, a recovery), enters the table through ``insert``.
"""

from __future__ import annotations

import builtins
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, NamedTuple

from co_cli.errors import StoreError
from co_cli.store import sessions
from co_cli.store import usage as usage_rows
from co_cli.store.codec import dump_messages, is_prompt_request, load_messages, message_kind_and_text, valid_utf8
from co_cli.store.db import Database, Reader, Transaction
from co_cli.store.schema import MESSAGE_STATUSES
from co_cli.store.usage import TurnUsage

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage


class SavedRow(NamedTuple):
    seq: int
    created_at: float
    kind: str
    status: str
    json: str
    """A one-message JSON list, as ``dump_messages`` wrote it."""


@dataclass
class StoredMessage:
    seq: int
    created_at: float
    kind: str
    text: str
    status: str
    message: ModelMessage


@dataclass(frozen=True)
class MessageOutline:
    seq: int
    created_at: float
    kind: str
    status: str


@dataclass(frozen=True)
class MessageRow:
    """A messages row as stored (the message as its one-message JSON list)."""

    seq: int
    created_at: float
    kind: str
    text: str
    json: str
    status: str


_ROW_FIELDS = tuple(field.name for field in fields(MessageRow))
_ROW_COLUMNS = ", ".join(_ROW_FIELDS)
_INSERT = f"INSERT INTO messages (session_id, {_ROW_COLUMNS})"
"""The one statement that adds messages (from values, or copied from another session)."""


def encode(seq: int, created_at: float, message: ModelMessage, status: str) -> MessageRow:
    """The row that stores ``message``: its kind and plain text (for listings and search) and its JSON."""
    kind, text = message_kind_and_text(message)
    return MessageRow(seq, created_at, kind, text, dump_messages([message]), status)


# --- statements, inside the caller's transaction ---------------------------------------------------------


def insert(tx: Transaction, session_id: str, rows: Iterable[MessageRow]) -> None:
    """Add rows to the session's transcript as given."""
    tx.executemany(
        f"{_INSERT} VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(session_id, *(getattr(row, name) for name in _ROW_FIELDS)) for row in rows],
    )


def begin(tx: Transaction, session_id: str, prompt: str, now: float | None = None, title: str | None = None) -> int:
    """Save the user's prompt as the session's next message (and, while it has none, its title: ``title``, else
    the prompt); its seq."""
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    prompt = valid_utf8(prompt)
    encoded = dump_messages([ModelRequest(parts=[UserPromptPart(prompt)])])
    now = time.time() if now is None else now
    seq = sessions.find(tx, session_id).message_count
    insert(tx, session_id, [MessageRow(seq, now, "user", prompt, encoded, "ok")])
    sessions.add_counts(tx, session_id, updated_at=now, messages=1)
    sessions.title_if_untitled(tx, session_id, sessions.normalize_title(title or prompt))
    return seq


def append_turn(
    tx: Transaction,
    session_id: str,
    prompt_seq: int,
    messages: Sequence[ModelMessage],
    status: str,
    *,
    input_tokens: int = 0,
    output_tokens: int = 0,
    cost_usd: float = 0.0,
    now: float | None = None,
) -> builtins.list[int]:
    """Save a turn's new messages and its status (and add its tokens and cost to the session); the seq of
    each message.

    A first message that is a request holding a user prompt replaces the prompt row (same seq); the rest
    are appended. The turn's status is set on the prompt row and every appended row."""
    if status not in MESSAGE_STATUSES:
        raise ValueError(f"unknown message status {status!r}")
    replace_prompt = bool(messages) and is_prompt_request(messages[0])
    encoded = [(*message_kind_and_text(m), dump_messages([m])) for m in messages]
    now = time.time() if now is None else now
    next_seq = sessions.find(tx, session_id).message_count
    exists = tx.read_one("SELECT 1 FROM messages WHERE session_id = ? AND seq = ?", (session_id, prompt_seq))
    if exists is None:
        raise StoreError(f"session {session_id} has no message {prompt_seq} to finish")
    seqs: builtins.list[int] = []
    appended = encoded
    if replace_prompt:
        kind, text, data = encoded[0]
        tx.execute(
            "UPDATE messages SET kind = ?, text = ?, json = ?, status = ? WHERE session_id = ? AND seq = ?",
            (kind, text, data, status, session_id, prompt_seq),
        )
        seqs.append(prompt_seq)
        appended = encoded[1:]
    elif status != "ok":
        tx.execute("UPDATE messages SET status = ? WHERE session_id = ? AND seq = ?", (status, session_id, prompt_seq))
    rows = [MessageRow(next_seq + i, now, kind, text, data, status) for i, (kind, text, data) in enumerate(appended)]
    insert(tx, session_id, rows)
    seqs.extend(row.seq for row in rows)
    sessions.add_counts(
        tx,
        session_id,
        updated_at=now,
        messages=len(rows),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost_usd=cost_usd,
    )
    return seqs


def copy(tx: Transaction, source_id: str, target_id: str, upto_seq: int) -> int:
    """Copy the source session's messages up to ``upto_seq`` into the target session; how many. The rows are
    copied inside SQLite (a fork of a long session never decodes its messages)."""
    cursor = tx.execute(
        f"{_INSERT} SELECT ?, {_ROW_COLUMNS} FROM messages WHERE session_id = ? AND seq <= ? ORDER BY seq",
        (target_id, source_id, upto_seq),
    )
    return int(cursor.rowcount)


def saved_at(reader: Reader, session_id: str, seq: int) -> float | None:
    """When message ``seq`` was saved (None: no such message)."""
    row = reader.read_one("SELECT created_at FROM messages WHERE session_id = ? AND seq = ?", (session_id, seq))
    return float(row["created_at"]) if row is not None else None


def saved_text(reader: Reader, session_id: str, seq: int) -> str | None:
    """The plain text of message ``seq`` (None: no such message)."""
    row = reader.read_one("SELECT text FROM messages WHERE session_id = ? AND seq = ?", (session_id, seq))
    return str(row["text"]) if row is not None else None


# --- the table -------------------------------------------------------------------------------------------


class Messages:
    """The transcripts: turns saved as they happen, read back whole, in part or in outline."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def begin_turn(self, session_id: str, prompt: str) -> int:
        """Commit the user's prompt before the model is called; return its seq."""
        with self.db.transaction() as tx:
            return begin(tx, session_id, prompt)

    def finish_turn(
        self,
        session_id: str,
        prompt_seq: int,
        messages: Sequence[ModelMessage],
        *,
        status: str = "ok",
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_usd: float = 0.0,
        usage: TurnUsage | None = None,
    ) -> builtins.list[int]:
        """Save a turn's new messages (and its ``usage`` row) in one transaction; return the seq of each message
        (see ``append_turn``)."""
        now = time.time()
        with self.db.transaction() as tx:
            seqs = append_turn(
                tx,
                session_id,
                prompt_seq,
                messages,
                status,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cost_usd=cost_usd,
                now=now,
            )
            if usage is not None:
                usage_rows.insert(tx, session_id, usage, now)
        return seqs

    def transcript(
        self, session_id: str, after_seq: int = -1, upto_seq: int | None = None
    ) -> builtins.list[StoredMessage]:
        """Every stored message after ``after_seq`` (up to ``upto_seq``), failed ones included, in order."""
        with self.db.lock:
            sessions.find(self.db, session_id)
            rows = self.db.read(
                "SELECT seq, created_at, kind, text, status, json FROM messages "
                "WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq",
                (session_id, after_seq, 2**62 if upto_seq is None else upto_seq),
            )
        decoded = load_messages((r["json"] for r in rows), f"session {session_id}")
        return [
            StoredMessage(
                seq=r["seq"], created_at=r["created_at"], kind=r["kind"], text=r["text"], status=r["status"], message=m
            )
            for r, m in zip(rows, decoded, strict=True)
        ]

    def saved_rows(self, session_id: str) -> builtins.list[SavedRow]:
        """Every stored message in order with pydantic-ai's JSON of it as saved, not validated into a message:
        what a lossless export writes (an import validates it), many times faster than ``transcript``."""
        with self.db.lock:
            sessions.find(self.db, session_id)
            rows = self.db.read(
                "SELECT seq, created_at, kind, status, json FROM messages WHERE session_id = ? ORDER BY seq",
                (session_id,),
            )
        return [SavedRow(r["seq"], r["created_at"], r["kind"], r["status"], r["json"]) for r in rows]

    def saved_rows_by_session(self) -> dict[str, builtins.list[SavedRow]]:
        """``saved_rows`` of every session outside the trash, in one query (for an export of them all)."""
        rows = self.db.read(
            "SELECT m.session_id, m.seq, m.created_at, m.kind, m.status, m.json FROM messages m "
            "JOIN sessions s ON s.id = m.session_id WHERE s.deleted_at IS NULL ORDER BY m.session_id, m.seq"
        )
        found: dict[str, builtins.list[SavedRow]] = {}
        for r in rows:
            found.setdefault(r["session_id"], []).append(
                SavedRow(r["seq"], r["created_at"], r["kind"], r["status"], r["json"])
            )
        return found

    def outline(self, session_id: str) -> builtins.list[MessageOutline]:
        """Each message's seq, time, kind and status, without reading the messages themselves."""
        with self.db.lock:
            sessions.find(self.db, session_id)
            rows = self.db.read(
                "SELECT seq, created_at, kind, status FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)
            )
        return [_outline(row) for row in rows]

    def messages(
        self, session_id: str, after_seq: int = -1, include_failed: bool = False
    ) -> builtins.list[ModelMessage]:
        """The transcript's messages after ``after_seq`` as pydantic-ai messages (failed turns left out)."""
        with self.db.lock:
            sessions.find(self.db, session_id)
            rows = self.db.read(
                "SELECT json FROM messages WHERE session_id = ? AND seq > ? AND (status != 'failed' OR ?) ORDER BY seq",
                (session_id, after_seq, int(include_failed)),
            )
        return load_messages((r["json"] for r in rows), f"session {session_id}")

    def saved_at(self, session_id: str, seq: int) -> float | None:
        """When message ``seq`` was saved (None: no such message), e.g. to tell which compactions a point had."""
        return saved_at(self.db, session_id, seq)

    def signatures(self, session_id: str) -> builtins.list[tuple[float, str, str, str]]:
        """(time saved, kind, status, text) of each message in order: what tells two copies of a session apart."""
        rows = self.db.read(
            "SELECT created_at, kind, status, text FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)
        )
        return [(row["created_at"], row["kind"], row["status"], row["text"]) for row in rows]


def _outline(row: sqlite3.Row) -> MessageOutline:
    return MessageOutline(seq=row["seq"], created_at=row["created_at"], kind=row["kind"], status=row["status"])
