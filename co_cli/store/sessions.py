"""SessionStore: every conversation saved in SQLite (create, save per turn, load, fork, list, search, delete).

pydantic-ai is imported lazily, only by the methods that (de)serialise messages, so listing,
renaming, deleting and searching sessions stay fast.
"""

from __future__ import annotations

import builtins
import json
import os
import re
import secrets
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from co_cli.errors import CoError, SessionBusy, SessionNotFound, StoreError
from co_cli.store.db import MESSAGE_STATUSES, connect, translated_errors, write_transaction
from co_cli.store.locks import SessionLocks
from co_cli.store.redact import without_credentials
from co_cli.store.usage import TurnUsage, insert_usage
from co_cli.terminal_text import printable

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

    from co_cli.memory.store import MemoryStore

TITLE_MAX_CHARS = 100
SNIPPET_OPEN = "«"
SNIPPET_CLOSE = "»"
_AMBIGUOUS_SHOWN = 5
_ID_RE = re.compile(r"[0-9a-f]{20}")


@dataclass
class SessionInfo:
    id: str
    title: str
    created_at: float
    updated_at: float
    model: str
    cwd: str
    parent_id: str | None
    fork_seq: int | None
    message_count: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    compaction_count: int


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


@dataclass
class SearchHit:
    session_id: str
    title: str
    seq: int
    kind: str
    created_at: float
    snippet: str
    rank: float


_SESSION_COLUMNS = (
    "id, title, created_at, updated_at, model, cwd, parent_id, fork_seq, message_count, "
    "input_tokens, output_tokens, cost_usd, compaction_count"
)
_COMPACTION_DATA = (
    "created_at, from_seq, upto_seq, summary, focus, trigger, tokens_before, tokens_after, model, replacement_json, "
    "method, detail, ledger, tiers, undone_at"
)
_COMPACTION_COLUMNS = f"id, {_COMPACTION_DATA}"
INSERT_COMPACTION = (
    f"INSERT INTO compactions (session_id, {_COMPACTION_DATA}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def new_session_id(now: float | None = None) -> str:
    """Time-ordered id: 12 hex digits of milliseconds since the epoch, then 8 random hex digits."""
    millis = int((time.time() if now is None else now) * 1000)
    return f"{millis:012x}{secrets.token_hex(4)}"


def is_session_id(text: str) -> bool:
    """Whether ``text`` has the form of an id from ``new_session_id``."""
    return _ID_RE.fullmatch(text) is not None


def valid_utf8(text: str) -> str:
    """The text with lone surrogates (undecodable bytes from a terminal or a pipe) replaced by '?'."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def normalize_title(text: str) -> str:
    """One line, whitespace collapsed, at most TITLE_MAX_CHARS characters."""
    line = " ".join(printable(valid_utf8(text)).split())
    if len(line) > TITLE_MAX_CHARS:
        line = line[: TITLE_MAX_CHARS - 1].rstrip() + "…"
    return line


def fts_query(text: str) -> str:
    """Quote every whitespace-separated term so FTS5 syntax in user text is matched literally."""
    terms = [term.replace('"', '""') for term in valid_utf8(text).replace("\x00", " ").split()]
    return " ".join(f'"{term}"' for term in terms if term.strip('"'))


# --- message (de)serialisation -------------------------------------------------------------------


def message_kind_and_text(message: ModelMessage) -> tuple[str, str]:
    """Classify a message (user/assistant/tool-call/tool-return/summary/system) and extract its plain text
    (what the search index and the listings read)."""
    from co_cli.message_view import message_kind, views

    kind = message_kind(message)
    texts: list[str] = []
    for view in views(message):
        if view.kind == "system":
            if kind == "system":
                texts.append(view.text)
        elif view.kind in ("user", "text", "retry", "compaction"):
            texts.append(view.text)
        elif view.kind == "tool-return":
            texts.append(f"{view.tool_name}: {view.text}")
        elif view.kind == "tool-call":
            texts.append(f"{view.tool_name}({view.text or '{}'})")
    return kind, valid_utf8("\n".join(t for t in texts if t))


def dump_messages(messages: Sequence[ModelMessage]) -> str:
    """Messages as pydantic-ai's JSON; undecodable bytes in a tool output are saved as '?', credentials in a
    response's provider URL are left out."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter
    from pydantic_core import PydanticSerializationError

    messages = without_credentials(messages)
    try:
        return ModelMessagesTypeAdapter.dump_json(list(messages)).decode()
    except PydanticSerializationError:
        data = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
        return valid_utf8(json.dumps(data, ensure_ascii=False, separators=(",", ":")))


def load_messages(json_lists: Iterable[str], where: str) -> list[ModelMessage]:
    """Validate many stored one-message JSON lists in a single call (much faster than one call each)."""
    from pydantic import ValidationError
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    joined = "[" + ",".join(j[1:-1] for j in json_lists) + "]"
    try:
        return ModelMessagesTypeAdapter.validate_json(joined)
    except ValidationError as exc:
        raise StoreError(f"{where} holds a message this co cannot read ({exc.error_count()} errors)") from None


def _is_prompt_request(message: ModelMessage) -> bool:
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    return isinstance(message, ModelRequest) and any(isinstance(p, UserPromptPart) for p in message.parts)


def compaction_row(
    session_id: str, record: CompactionRecord, replacement_json: str, created_at: float | None = None
) -> tuple[Any, ...]:
    """The values of ``INSERT_COMPACTION`` for a record."""
    return (
        session_id,
        record.created_at if created_at is None else created_at,
        record.from_seq,
        record.upto_seq,
        record.summary,
        record.focus,
        record.trigger,
        record.tokens_before,
        record.tokens_after,
        record.model,
        replacement_json,
        record.method,
        record.detail,
        record.ledger,
        record.tiers,
        record.undone_at,
    )


# --- the store -----------------------------------------------------------------------------------


class SessionStore:
    """All sessions in one SQLite file. Safe to share between threads; many processes may use one file."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path
        self._lock = threading.RLock()
        self._locks = SessionLocks(path.parent / f"{path.name}.locks")

    @classmethod
    def open(cls, db_path: Path, *, reads_only: bool = False) -> SessionStore:
        """Open the store; ``reads_only`` opens a database that cannot be written read-only (see ``connect``)."""
        path = Path(db_path).expanduser()
        return cls(connect(path, reads_only=reads_only), path)

    def close(self) -> None:
        with self._lock:
            self._locks.release_all()
            self._conn.close()

    def memories(self) -> MemoryStore:
        """The long-term memories kept in the same database (same connection and lock)."""
        from co_cli.memory.store import MemoryStore

        return MemoryStore(self._conn, self.path, self._lock)

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers --

    def _read(self, sql: str, params: Sequence[Any] = ()) -> builtins.list[tuple[Any, ...]]:
        with self._lock, translated_errors(self.path):
            return self._conn.execute(sql, params).fetchall()

    def _write(self) -> AbstractContextManager[sqlite3.Connection]:
        return write_transaction(self._conn, self.path)

    def _session_row(self, session_id: str) -> tuple[Any, ...]:
        row = self._conn.execute(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise SessionNotFound(f"no session {session_id!r}; `co sessions list` shows them")
        return row

    # -- sessions --

    def create_session(
        self,
        *,
        model: str,
        cwd: str,
        title: str,
        parent_id: str | None = None,
        fork_seq: int | None = None,
    ) -> SessionInfo:
        now = time.time()
        info = SessionInfo(
            id=new_session_id(now),
            title=normalize_title(title),
            created_at=now,
            updated_at=now,
            model=model,
            cwd=cwd,
            parent_id=parent_id,
            fork_seq=fork_seq,
            message_count=0,
            input_tokens=0,
            output_tokens=0,
            cost_usd=0.0,
            compaction_count=0,
        )
        with self._lock, self._write() as conn:
            self._insert_session(conn, info)
        return info

    @staticmethod
    def _insert_session(conn: sqlite3.Connection, info: SessionInfo) -> None:
        conn.execute(
            f"INSERT INTO sessions ({_SESSION_COLUMNS}) VALUES ({', '.join('?' * 13)})",
            (
                info.id,
                info.title,
                info.created_at,
                info.updated_at,
                info.model,
                info.cwd,
                info.parent_id,
                info.fork_seq,
                info.message_count,
                info.input_tokens,
                info.output_tokens,
                info.cost_usd,
                info.compaction_count,
            ),
        )

    def get(self, id_or_prefix: str, *, trashed: bool = False) -> SessionInfo:
        """The session with this id or unique id prefix; SessionNotFound lists candidates if ambiguous.

        Only sessions outside the trash, or with ``trashed`` only those in it."""
        key = id_or_prefix.strip().lower()
        if not key:
            raise SessionNotFound("no session id given")
        where = "deleted_at IS NOT NULL" if trashed else "deleted_at IS NULL"
        with self._lock, translated_errors(self.path):
            row = self._conn.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ? AND {where}", (key,)
            ).fetchone()
            if row is not None:
                return SessionInfo(*row)
            rows = self._conn.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id >= ? AND id < ? AND {where} "
                "ORDER BY updated_at DESC LIMIT ?",
                (key, key + "~", _AMBIGUOUS_SHOWN + 1),
            ).fetchall()
            if not rows:
                raise self._not_found(id_or_prefix, key, trashed)
            if len(rows) == 1:
                return SessionInfo(*rows[0])
            total = self._conn.execute(
                f"SELECT count(*) FROM sessions WHERE id >= ? AND id < ? AND {where}", (key, key + "~")
            ).fetchone()[0]
        shown = ", ".join(f"{printable(r[0])} ({printable(r[1]) or 'untitled'})" for r in rows[:_AMBIGUOUS_SHOWN])
        more = f" and {total - _AMBIGUOUS_SHOWN} more" if total > _AMBIGUOUS_SHOWN else ""
        raise SessionNotFound(f"session prefix {id_or_prefix!r} is ambiguous: {shown}{more}; give more characters")

    def _not_found(self, given: str, key: str, trashed: bool) -> SessionNotFound:
        """No such session here: say so, and where it is when it is on the other side of the trash."""
        other = self._conn.execute(
            "SELECT id FROM sessions WHERE id >= ? AND id < ? AND (deleted_at IS NULL) = ? LIMIT 1",
            (key, key + "~", int(trashed)),
        ).fetchone()
        if other is not None and not trashed:
            return SessionNotFound(
                f"session {other[0]} is in the trash; `co sessions restore {other[0][:12]}` brings it back"
            )
        if other is not None:
            return SessionNotFound(f"session {other[0]} is not in the trash")
        where = "`co sessions trash` shows them" if trashed else "`co sessions list` shows them"
        return SessionNotFound(f"no session matches {given!r}; {where}")

    # Listings leave out sessions without messages: one is created just before its first prompt is saved,
    # and stays empty if that save fails.

    def latest(self) -> SessionInfo | None:
        rows = self._read(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE message_count > 0 AND deleted_at IS NULL "
            "ORDER BY updated_at DESC, id DESC LIMIT 1"
        )
        return SessionInfo(*rows[0]) if rows else None

    def list(self, limit: int = 50, offset: int = 0) -> builtins.list[SessionInfo]:
        rows = self._read(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE message_count > 0 AND deleted_at IS NULL "
            "ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?",
            (limit, offset),
        )
        return [SessionInfo(*row) for row in rows]

    def count(self) -> int:
        return int(self._read("SELECT count(*) FROM sessions WHERE message_count > 0 AND deleted_at IS NULL")[0][0])

    def rename(self, session_id: str, title: str) -> None:
        with self._lock, self._write() as conn:
            self._session_row(session_id)
            conn.execute("UPDATE sessions SET title = ? WHERE id = ?", (normalize_title(title), session_id))

    def set_model(self, session_id: str, model: str) -> None:
        with self._lock, self._write() as conn:
            self._session_row(session_id)
            conn.execute("UPDATE sessions SET model = ? WHERE id = ?", (model, session_id))

    @contextmanager
    def _holding(self, session_id: str) -> Iterator[None]:
        """The session's lock for the duration (SessionBusy if another process has it open); released after
        unless this process already held it."""
        with self._lock:
            ours = self._locks.holds(session_id)
            self._lock_session(session_id)
            try:
                yield
            finally:
                if not ours:
                    self._locks.release(session_id)

    def delete(self, session_id: str, files_root: Path | None = None) -> None:
        """Remove the session, its transcript, search entries, compactions and ``files_root/session_id``.

        SessionBusy if another process has it open."""
        with self._holding(session_id), self._write() as conn:
            self._session_row(session_id)
            for table in ("messages", "compactions", "pins", "turn_usage"):
                conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        if files_root is not None:
            target = Path(files_root) / session_id
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()

    # -- the trash: deleting hides a session; only purging removes it --

    def trash(self, session_id: str) -> float:
        """Move the session to the trash: hidden from listings, search and resume, kept whole; return when.

        SessionBusy if another process has it open."""
        now = time.time()
        with self._holding(session_id), self._write() as conn:
            self._session_row(session_id)
            conn.execute("UPDATE sessions SET deleted_at = ? WHERE id = ?", (now, session_id))
        return now

    def restore(self, session_id: str) -> None:
        """Bring a session back from the trash, unchanged."""
        with self._lock, self._write() as conn:
            self._session_row(session_id)
            conn.execute("UPDATE sessions SET deleted_at = NULL WHERE id = ?", (session_id,))

    def trashed(self, limit: int = 1_000_000) -> builtins.list[tuple[SessionInfo, float]]:
        """Sessions in the trash with when each was deleted, most recently deleted first."""
        rows = self._read(
            f"SELECT {_SESSION_COLUMNS}, deleted_at FROM sessions WHERE deleted_at IS NOT NULL "
            "ORDER BY deleted_at DESC, id DESC LIMIT ?",
            (limit,),
        )
        return [(SessionInfo(*row[:-1]), float(row[-1])) for row in rows]

    def trashed_before(self, cutoff: float) -> builtins.list[str]:
        """Ids of the sessions moved to the trash before ``cutoff`` (seconds since the epoch)."""
        rows = self._read("SELECT id FROM sessions WHERE deleted_at IS NOT NULL AND deleted_at < ?", (cutoff,))
        return [row[0] for row in rows]

    def purge(self, session_ids: Sequence[str], files_root: Path | None = None) -> int:
        """Remove trashed sessions for good (rows, search entries, usage, offloaded tool outputs), then
        reclaim the space. Sessions not in the trash are refused (CoError). Returns how many were removed."""
        with self._lock:
            for session_id in session_ids:
                self.get(session_id, trashed=True)
            for session_id in session_ids:
                self.delete(session_id, files_root=files_root)
            if session_ids:
                self.reclaim_space()
        return len(session_ids)

    def purge_expired(self, retention_days: float, files_root: Path | None = None) -> int:
        """Purge what has been in the trash longer than ``retention_days`` (0: nothing, ever). A session another
        process holds (it cannot be resumed from the trash, so only a racing restore) is left for next time."""
        if retention_days <= 0:
            return 0
        purged = 0
        for session_id in self.trashed_before(time.time() - retention_days * 86400):
            try:
                self.delete(session_id, files_root=files_root)
            except SessionBusy:
                continue
            purged += 1
        if purged:
            self.reclaim_space()
        return purged

    def reclaim_space(self) -> bool:
        """Merge the search index (dropping deleted entries for good) and VACUUM the file; False if another
        process kept the database busy (the space is then reused by later writes instead)."""
        with self._lock:
            try:
                with translated_errors(self.path):
                    self._conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('optimize')")
                    self._conn.execute("VACUUM")
                    # In WAL mode the vacuumed pages sit in the log: copy them back so the file itself shrinks.
                    self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            except StoreError:
                return False
        return True

    # -- turns --

    def begin_turn(self, session_id: str, prompt: str) -> int:
        """Commit the user's prompt before the model is called; return its seq."""
        from pydantic_ai.messages import ModelRequest, UserPromptPart

        prompt = valid_utf8(prompt)
        request = ModelRequest(parts=[UserPromptPart(prompt)])
        encoded = dump_messages([request])
        now = time.time()
        with self._lock, self._write() as conn:
            row = self._session_row(session_id)
            seq = int(row[8])
            conn.execute(
                "INSERT INTO messages (session_id, seq, created_at, kind, text, json, status) "
                "VALUES (?, ?, ?, 'user', ?, ?, 'ok')",
                (session_id, seq, now, prompt, encoded),
            )
            conn.execute(
                "UPDATE sessions SET message_count = message_count + 1, updated_at = ?, "
                "title = CASE WHEN title = '' THEN ? ELSE title END WHERE id = ?",
                (now, normalize_title(prompt), session_id),
            )
        return seq

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
        """Save a turn's new messages (and its ``usage`` row) in one transaction; return the seq of each message.

        A first message that is a request holding a user prompt replaces the prompt row (same seq);
        the rest are appended. The turn's status is set on the prompt row and every appended row.
        """
        if status not in MESSAGE_STATUSES:
            raise ValueError(f"unknown message status {status!r}")
        replace_prompt = bool(messages) and _is_prompt_request(messages[0])
        encoded = [(*message_kind_and_text(m), dump_messages([m])) for m in messages]
        now = time.time()
        with self._lock, self._write() as conn:
            next_seq = int(self._session_row(session_id)[8])
            exists = conn.execute(
                "SELECT 1 FROM messages WHERE session_id = ? AND seq = ?", (session_id, prompt_seq)
            ).fetchone()
            if exists is None:
                raise StoreError(f"session {session_id} has no message {prompt_seq} to finish")
            seqs: builtins.list[int] = []
            appended = encoded
            if replace_prompt:
                kind, text, data = encoded[0]
                conn.execute(
                    "UPDATE messages SET kind = ?, text = ?, json = ?, status = ? WHERE session_id = ? AND seq = ?",
                    (kind, text, data, status, session_id, prompt_seq),
                )
                seqs.append(prompt_seq)
                appended = encoded[1:]
            elif status != "ok":
                conn.execute(
                    "UPDATE messages SET status = ? WHERE session_id = ? AND seq = ?",
                    (status, session_id, prompt_seq),
                )
            rows = [
                (session_id, next_seq + i, now, kind, text, data, status)
                for i, (kind, text, data) in enumerate(appended)
            ]
            conn.executemany(
                "INSERT INTO messages (session_id, seq, created_at, kind, text, json, status) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            seqs.extend(r[1] for r in rows)
            conn.execute(
                "UPDATE sessions SET message_count = message_count + ?, updated_at = ?, "
                "input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, cost_usd = cost_usd + ? "
                "WHERE id = ?",
                (len(rows), now, input_tokens, output_tokens, cost_usd, session_id),
            )
            if usage is not None:
                insert_usage(conn, session_id, usage, now)
        return seqs

    # -- loading --

    def transcript(
        self, session_id: str, after_seq: int = -1, upto_seq: int | None = None
    ) -> builtins.list[StoredMessage]:
        """Every stored message after ``after_seq`` (up to ``upto_seq``), failed ones included, in order."""
        with self._lock, translated_errors(self.path):
            self._session_row(session_id)
            rows = self._conn.execute(
                "SELECT seq, created_at, kind, text, status, json FROM messages "
                "WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq",
                (session_id, after_seq, 2**62 if upto_seq is None else upto_seq),
            ).fetchall()
        decoded = load_messages((r[5] for r in rows), f"session {session_id}")
        return [StoredMessage(r[0], r[1], r[2], r[3], r[4], m) for r, m in zip(rows, decoded, strict=True)]

    def outline(self, session_id: str) -> builtins.list[MessageOutline]:
        """Each message's seq, time, kind and status, without reading the messages themselves."""
        with self._lock, translated_errors(self.path):
            self._session_row(session_id)
            rows = self._conn.execute(
                "SELECT seq, created_at, kind, status FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)
            ).fetchall()
        return [MessageOutline(*row) for row in rows]

    def messages(
        self, session_id: str, after_seq: int = -1, include_failed: bool = False
    ) -> builtins.list[ModelMessage]:
        """The transcript's messages after ``after_seq`` as pydantic-ai messages (failed turns left out)."""
        with self._lock, translated_errors(self.path):
            self._session_row(session_id)
            rows = self._conn.execute(
                "SELECT json FROM messages WHERE session_id = ? AND seq > ? AND (status != 'failed' OR ?) ORDER BY seq",
                (session_id, after_seq, int(include_failed)),
            ).fetchall()
        return load_messages((r[0] for r in rows), f"session {session_id}")

    # -- compactions --

    def add_compaction(self, session_id: str, record: CompactionRecord) -> int:
        if record.trigger not in ("auto", "manual"):
            raise ValueError(f"unknown compaction trigger {record.trigger!r}")
        replacement = dump_messages(record.replacement)
        created_at = record.created_at or time.time()
        with self._lock, self._write() as conn:
            self._session_row(session_id)
            cursor = conn.execute(INSERT_COMPACTION, compaction_row(session_id, record, replacement, created_at))
            conn.execute(
                "UPDATE sessions SET compaction_count = compaction_count + 1, updated_at = ? WHERE id = ?",
                (time.time(), session_id),
            )
            new_id = int(cursor.lastrowid or 0)
        record.id = new_id
        record.created_at = created_at
        return new_id

    def _compaction_rows(self, session_id: str, latest_only: bool) -> builtins.list[tuple[Any, ...]]:
        where = "AND undone_at IS NULL ORDER BY id DESC LIMIT 1" if latest_only else "ORDER BY id"
        with self._lock, translated_errors(self.path):
            self._session_row(session_id)
            return self._conn.execute(
                f"SELECT {_COMPACTION_COLUMNS} FROM compactions WHERE session_id = ? {where}", (session_id,)
            ).fetchall()

    @staticmethod
    def _compaction(row: tuple[Any, ...], session_id: str) -> CompactionRecord:
        (cid, created_at, from_seq, upto_seq, summary, focus, trigger, before, after, model, data, *details) = row
        replacement = load_messages([data], f"compaction {cid} of session {session_id}")
        method, detail, ledger, tiers, undone_at = details
        return CompactionRecord(
            from_seq, upto_seq, summary, focus, trigger, before, after, model, replacement, created_at, cid,
            method, detail, ledger, tiers, undone_at,
        )  # fmt: skip

    def latest_compaction(self, session_id: str) -> CompactionRecord | None:
        """The compaction the working context starts from (the latest one not undone), or None."""
        rows = self._compaction_rows(session_id, latest_only=True)
        return self._compaction(rows[0], session_id) if rows else None

    def undo_compaction(self, session_id: str) -> CompactionRecord | None:
        """Mark the latest compaction in force as undone (it stays on record); return it, or None."""
        latest = self.latest_compaction(session_id)
        if latest is None:
            return None
        now = time.time()
        with self._lock, self._write() as conn:
            conn.execute("UPDATE compactions SET undone_at = ? WHERE id = ?", (now, latest.id))
            conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))
        latest.undone_at = now
        return latest

    # -- pins: standing instructions kept verbatim in every request of the session --

    def pins(self, session_id: str) -> builtins.list[tuple[int, str, str]]:
        """The session's pins in force: (id, text, source), oldest first."""
        with self._lock, translated_errors(self.path):
            rows = self._conn.execute(
                "SELECT id, text, source FROM pins WHERE session_id = ? AND removed_at IS NULL ORDER BY id",
                (session_id,),
            ).fetchall()
        return [(int(r[0]), str(r[1]), str(r[2])) for r in rows]

    def add_pin(self, session_id: str, text: str, source: str) -> int:
        with self._lock, self._write() as conn:
            self._session_row(session_id)
            cursor = conn.execute(
                "INSERT INTO pins (session_id, text, source, created_at) VALUES (?, ?, ?, ?)",
                (session_id, valid_utf8(text), source, time.time()),
            )
            return int(cursor.lastrowid or 0)

    def remove_pin(self, session_id: str, pin_id: int) -> None:
        with self._lock, self._write() as conn:
            conn.execute(
                "UPDATE pins SET removed_at = ? WHERE session_id = ? AND id = ? AND removed_at IS NULL",
                (time.time(), session_id, pin_id),
            )

    def compactions(self, session_id: str) -> builtins.list[CompactionRecord]:
        return [self._compaction(row, session_id) for row in self._compaction_rows(session_id, latest_only=False)]

    # -- fork --

    def fork(self, session_id: str, upto_seq: int | None = None) -> SessionInfo:
        """Copy the session (up to ``upto_seq``) under a new id; the original is untouched.

        The fork keeps the compactions that had happened by that point: those covering only messages up to
        ``upto_seq`` and made before the message after it was saved (``co_cli.session.rebuild``)."""
        now = time.time()
        with self._lock, self._write() as conn:
            source = SessionInfo(*self._session_row(session_id))
            last = source.message_count - 1
            upto = last if upto_seq is None else upto_seq
            if upto < -1 or upto > last:
                raise CoError(f"cannot fork session {session_id} at message {upto_seq}: it has messages 0..{last}")
            info = SessionInfo(
                id=new_session_id(now),
                title=f"{source.title} (fork)",
                created_at=now,
                updated_at=now,
                model=source.model,
                cwd=source.cwd,
                parent_id=source.id,
                fork_seq=upto,
                message_count=upto + 1,
                input_tokens=0,
                output_tokens=0,
                cost_usd=0.0,
                compaction_count=0,
            )
            self._insert_session(conn, info)
            conn.execute(
                "INSERT INTO messages (session_id, seq, created_at, kind, text, json, status) "
                "SELECT ?, seq, created_at, kind, text, json, status FROM messages "
                "WHERE session_id = ? AND seq <= ? ORDER BY seq",
                (info.id, session_id, upto),
            )
            following = conn.execute(
                "SELECT created_at FROM messages WHERE session_id = ? AND seq = ?", (session_id, upto + 1)
            ).fetchone()
            copied = conn.execute(
                f"INSERT INTO compactions (session_id, {_COMPACTION_DATA}) SELECT ?, {_COMPACTION_DATA} "
                "FROM compactions WHERE session_id = ? AND upto_seq <= ? AND (? IS NULL OR created_at < ?) "
                "ORDER BY id",
                (info.id, session_id, upto, *(2 * [following[0] if following else None])),
            ).rowcount
            info.compaction_count = copied
            conn.execute("UPDATE sessions SET compaction_count = ? WHERE id = ?", (copied, info.id))
            conn.execute(
                "INSERT INTO pins (session_id, text, source, created_at) SELECT ?, text, source, created_at "
                "FROM pins WHERE session_id = ? AND removed_at IS NULL ORDER BY id",
                (info.id, session_id),
            )
        return info

    # -- search --

    def search(self, query: str, session_id: str | None = None, limit: int = 20) -> builtins.list[SearchHit]:
        """Full-text search of every transcript (or one), best matches first."""
        match = fts_query(query)
        if not match:
            return []
        where = "messages_fts MATCH ? AND s.deleted_at IS NULL" + (" AND m.session_id = ?" if session_id else "")
        params: builtins.list[Any] = [match] + ([session_id] if session_id else []) + [limit]
        snippet = f"snippet(messages_fts, 0, '{SNIPPET_OPEN}', '{SNIPPET_CLOSE}', '…', 16)"
        rows = self._read(
            f"SELECT m.session_id, s.title, m.seq, m.kind, m.created_at, {snippet}, "
            "bm25(messages_fts) AS rank "
            "FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid "
            "JOIN sessions s ON s.id = m.session_id "
            f"WHERE {where} ORDER BY rank LIMIT ?",
            params,
        )
        return [SearchHit(*row) for row in rows]

    # -- the open-session lock --

    # The lock itself is a lock file (co_cli.store.locks) the kernel releases when its process ends;
    # owner_pid only says who holds it, for messages and for other tools.

    def _lock_session(self, session_id: str, force: bool = False) -> None:
        """Take the session's lock file; SessionBusy if another live process holds it (and not ``force``)."""
        with translated_errors(self.path):
            self._session_row(session_id)
        if self._locks.acquire(session_id, force=force):
            return
        owner = self._read("SELECT owner_pid FROM sessions WHERE id = ?", (session_id,))
        pid = owner[0][0] if owner else None
        by = f" (pid {pid})" if pid is not None else ""
        raise SessionBusy(
            f"session {session_id} is open in another co process{by}; close it there, "
            "continue a copy with --fork, or take it over with --force"
        )

    def open_elsewhere(self) -> set[str]:
        """Ids of the sessions another live co process has open now (from the lock files, no database read)."""
        with self._lock:
            return set(self._locks.held_elsewhere())

    def acquire(self, session_id: str, *, force: bool = False) -> None:
        """Hold the session open for this process; SessionBusy if another live process has it open.

        A lock left by a process that has ended is free. ``force`` takes the session from a live holder."""
        with self._lock:
            self._lock_session(session_id, force=force)
            try:
                with self._write() as conn:
                    conn.execute(
                        "UPDATE sessions SET owner_pid = ?, owner_since = ? WHERE id = ?",
                        (os.getpid(), time.time(), session_id),
                    )
            except BaseException:
                self._locks.release(session_id)
                raise

    def release(self, session_id: str) -> None:
        with self._lock:
            if not self._locks.holds(session_id):
                return
            try:
                with self._write() as conn:
                    conn.execute(
                        "UPDATE sessions SET owner_pid = NULL, owner_since = NULL WHERE id = ? AND owner_pid = ?",
                        (session_id, os.getpid()),
                    )
            finally:
                self._locks.release(session_id)

    # -- import (used by co_cli.store.export) --

    def import_session(
        self,
        info: SessionInfo,
        messages: Sequence[StoredMessage],
        compactions: Sequence[CompactionRecord],
    ) -> SessionInfo:
        """Insert a whole session as given; a taken or malformed id is replaced by a new one."""
        rows = [
            (m.seq, m.created_at, *message_kind_and_text(m.message), dump_messages([m.message]), m.status)
            for m in messages
        ]
        encoded = [(c, dump_messages(c.replacement)) for c in compactions]
        with self._lock, self._write() as conn:
            taken = conn.execute("SELECT 1 FROM sessions WHERE id = ?", (info.id,)).fetchone()
            if taken is not None or not is_session_id(info.id):
                info.id = new_session_id()
            info.message_count = len(rows)
            info.compaction_count = len(encoded)
            info.title = normalize_title(info.title)
            self._insert_session(conn, info)
            conn.executemany(
                "INSERT INTO messages (session_id, seq, created_at, kind, text, json, status) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(info.id, *row) for row in rows],
            )
            conn.executemany(
                INSERT_COMPACTION,
                [compaction_row(info.id, c, data) for c, data in encoded],
            )
        return info

    # -- health --

    def integrity_ok(self) -> bool:
        """SQLite's integrity check and the full-text index's own check both pass."""
        with self._lock:
            try:
                result = self._conn.execute("PRAGMA integrity_check").fetchall()
                if result != [("ok",)]:
                    return False
                self._conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")
            except sqlite3.DatabaseError:
                return False
        return True
