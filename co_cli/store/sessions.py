"""The sessions table: one row per conversation (title, model, directory, running totals, fork origin, trash).

Listings leave out sessions without messages: one is created just before its first prompt is saved, and
stays empty if that save fails. Deleting moves a session to the trash (``Trash``); only purging removes it.
"""

from __future__ import annotations

import builtins
import os
import re
import secrets
import shutil
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from co_cli.errors import SessionBusy, SessionNotFound
from co_cli.store.codec import valid_utf8
from co_cli.store.db import Database, Reader, Transaction
from co_cli.store.file_changes import prune_contents
from co_cli.store.locks import OpenSessions
from co_cli.terminal_text import printable
from co_cli.vocabulary import SessionOrigin

TITLE_MAX_CHARS = 100
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
    origin: SessionOrigin = "terminal"
    """Where the session was started (`co sessions list` shows it)."""


_FIELDS = tuple(field.name for field in fields(SessionInfo))
_COLUMNS = ", ".join(_FIELDS)


def _info(row: sqlite3.Row) -> SessionInfo:
    return SessionInfo(**{name: row[name] for name in _FIELDS})


SHORT_ID_CHARS = 8
"""The fewest characters of an id co shows; more where that many would name more than one session."""


def new_session_id(now: float | None = None) -> str:
    """8 random hex digits, then 12 hex digits of milliseconds since the epoch (when it was made).

    The random digits come first because co shows an id by its first characters: sessions started in the same
    minute, and forks, must not share them. (Ids made before had the time first; both forms are accepted.)"""
    millis = int((time.time() if now is None else now) * 1000)
    return f"{secrets.token_hex(4)}{millis:012x}"


def is_session_id(text: str) -> bool:
    """Whether ``text`` has the form of an id from ``new_session_id``."""
    return _ID_RE.fullmatch(text) is not None


def normalize_title(text: str) -> str:
    """One line, whitespace collapsed, at most TITLE_MAX_CHARS characters."""
    line = " ".join(printable(valid_utf8(text)).split())
    if len(line) > TITLE_MAX_CHARS:
        line = line[: TITLE_MAX_CHARS - 1].rstrip() + "…"
    return line


# --- statements, inside the caller's transaction ---------------------------------------------------------


def insert(tx: Transaction, info: SessionInfo) -> None:
    """Add the session row as given."""
    tx.execute(
        f"INSERT INTO sessions ({_COLUMNS}) VALUES ({', '.join('?' * len(_FIELDS))})",
        [getattr(info, name) for name in _FIELDS],
    )


def find(reader: Reader, session_id: str) -> SessionInfo:
    """The session with exactly this id (in the trash or not); SessionNotFound if there is none."""
    row = reader.read_one(f"SELECT {_COLUMNS} FROM sessions WHERE id = ?", (session_id,))
    if row is None:
        raise SessionNotFound.no_such(session_id)
    return _info(row)


def exists(reader: Reader, session_id: str) -> bool:
    """Whether a session (in the trash or not) has this id."""
    return reader.read_one("SELECT 1 FROM sessions WHERE id = ?", (session_id,)) is not None


def add_counts(
    tx: Transaction,
    session_id: str,
    *,
    updated_at: float,
    messages: int = 0,
    compactions: int = 0,
    input_tokens: int = 0,
    output_tokens: int = 0,
    cost_usd: float = 0.0,
    keep_later: bool = False,
) -> None:
    """Add to the session's running totals and set when it was updated (``keep_later``: unless it already
    says later, as for messages merged from another machine)."""
    updated = "max(updated_at, ?)" if keep_later else "?"
    tx.execute(
        "UPDATE sessions SET message_count = message_count + ?, compaction_count = compaction_count + ?, "
        "input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, cost_usd = cost_usd + ?, "
        f"updated_at = {updated} WHERE id = ?",
        (messages, compactions, input_tokens, output_tokens, cost_usd, updated_at, session_id),
    )


def title_if_untitled(tx: Transaction, session_id: str, title: str) -> None:
    """Give a session without a title this one (its first prompt)."""
    tx.execute("UPDATE sessions SET title = ? WHERE id = ? AND title = ''", (title, session_id))


def retitle(tx: Transaction, session_id: str, title: str, *, if_title: str) -> bool:
    """Set the title only while it is still ``if_title`` (a rename meanwhile wins); whether it was set."""
    cursor = tx.execute("UPDATE sessions SET title = ? WHERE id = ? AND title = ?", (title, session_id, if_title))
    return cursor.rowcount > 0


def mark_trashed(tx: Transaction, session_id: str, deleted_at: float) -> None:
    """Say the session was moved to the trash at ``deleted_at``."""
    tx.execute("UPDATE sessions SET deleted_at = ? WHERE id = ?", (deleted_at, session_id))


# --- the table -------------------------------------------------------------------------------------------

SESSION_TABLES = (
    "messages", "compactions", "pins", "turn_usage", "task_lists", "tool_calls", "turn_memories", "readings",
    "file_changes",
)  # fmt: skip
"""The tables whose rows belong to one session: a deleted session leaves none (the extraction queue's items are
the queue's, claimed and finished on their own)."""


class Sessions:
    """Create, find, list, rename and remove sessions."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._open = OpenSessions(db)

    def create(
        self,
        *,
        model: str,
        cwd: str,
        title: str,
        parent_id: str | None = None,
        fork_seq: int | None = None,
        origin: SessionOrigin = "terminal",
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
            origin=origin,
        )
        with self.db.transaction() as tx:
            insert(tx, info)
        return info

    def get(self, id_or_prefix: str, *, trashed: bool = False) -> SessionInfo:
        """The session with this id or unique id prefix; SessionNotFound lists candidates if ambiguous.

        Only sessions outside the trash, or with ``trashed`` only those in it."""
        key = id_or_prefix.strip().lower()
        if not key:
            raise SessionNotFound("no session id given")
        where = "deleted_at IS NOT NULL" if trashed else "deleted_at IS NULL"
        with self.db.lock:
            row = self.db.read_one(f"SELECT {_COLUMNS} FROM sessions WHERE id = ? AND {where}", (key,))
            if row is not None:
                return _info(row)
            rows = self.db.read(
                f"SELECT {_COLUMNS} FROM sessions WHERE id >= ? AND id < ? AND {where} "
                "ORDER BY updated_at DESC LIMIT ?",
                (key, key + "~", _AMBIGUOUS_SHOWN + 1),
            )
            if not rows:
                raise self._not_found(id_or_prefix, key, trashed)
            if len(rows) == 1:
                return _info(rows[0])
            total = self.db.read_one(
                f"SELECT count(*) AS n FROM sessions WHERE id >= ? AND id < ? AND {where}", (key, key + "~")
            )
        shown = ", ".join(
            f"{printable(r['id'])} ({printable(r['title']) or 'untitled'})" for r in rows[:_AMBIGUOUS_SHOWN]
        )
        count = total["n"] if total else 0
        more = f" and {count - _AMBIGUOUS_SHOWN} more" if count > _AMBIGUOUS_SHOWN else ""
        raise SessionNotFound(f"session prefix {id_or_prefix!r} is ambiguous: {shown}{more}; give more characters")

    def _not_found(self, given: str, key: str, trashed: bool) -> SessionNotFound:
        """No such session here: say so, and where it is when it is on the other side of the trash."""
        other = self.db.read_one(
            "SELECT id FROM sessions WHERE id >= ? AND id < ? AND (deleted_at IS NULL) = ? LIMIT 1",
            (key, key + "~", int(trashed)),
        )
        if other is not None and not trashed:
            restore = f"`co sessions restore {self.short_id(other['id'])}`"
            return SessionNotFound(f"session {other['id']} is in the trash; {restore} brings it back")
        if other is not None:
            return SessionNotFound(f"session {other['id']} is not in the trash")
        where = "`co sessions trash` shows them" if trashed else "`co sessions list` shows them"
        return SessionNotFound(f"no session matches {given!r}; {where}")

    def short_id(self, session_id: str) -> str:
        """The shortest prefix of ``session_id`` (at least SHORT_ID_CHARS) that names no other session, in the
        trash or not: what co prints, so that what the user copies resumes this session and no other."""
        return self.short_ids([session_id])[session_id]

    def short_ids(self, session_ids: Iterable[str]) -> dict[str, str]:
        shown: dict[str, str] = {}
        with self.db.lock:
            for session_id in session_ids:
                before = self.db.read_one(
                    "SELECT id FROM sessions WHERE id < ? ORDER BY id DESC LIMIT 1", (session_id,)
                )
                after = self.db.read_one("SELECT id FROM sessions WHERE id > ? ORDER BY id LIMIT 1", (session_id,))
                neighbours = [row["id"] for row in (before, after) if row is not None]
                shared = max((len(os.path.commonprefix([session_id, other])) for other in neighbours), default=0)
                shown[session_id] = session_id[: max(SHORT_ID_CHARS, shared + 1)]
        return shown

    def latest(self) -> SessionInfo | None:
        row = self.db.read_one(
            f"SELECT {_COLUMNS} FROM sessions WHERE message_count > 0 AND deleted_at IS NULL "
            "ORDER BY updated_at DESC, id DESC LIMIT 1"
        )
        return _info(row) if row is not None else None

    def list(self, limit: int = 50, offset: int = 0) -> builtins.list[SessionInfo]:
        rows = self.db.read(
            f"SELECT {_COLUMNS} FROM sessions WHERE message_count > 0 AND deleted_at IS NULL "
            "ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?",
            (limit, offset),
        )
        return [_info(row) for row in rows]

    def revision(self, session_id: str) -> tuple[object, ...]:
        """What changes whenever anything a live session rebuilds from changes (messages, compactions made or
        undone, pins added or removed, task lists saved): equal revisions mean a context built at the first is
        still the session's. SessionNotFound if there is no such session."""
        row = self.db.read_one(
            "SELECT s.updated_at, s.message_count, s.compaction_count, "
            "(SELECT count(*) || ':' || coalesce(max(id), 0) || ':' || count(undone_at) FROM compactions "
            "WHERE session_id = s.id) AS compactions, "
            "(SELECT count(*) || ':' || coalesce(max(id), 0) || ':' || count(removed_at) FROM pins "
            "WHERE session_id = s.id) AS pins, "
            "(SELECT coalesce(max(id), 0) FROM task_lists WHERE session_id = s.id) AS tasks "
            "FROM sessions s WHERE s.id = ?",
            (session_id,),
        )
        if row is None:
            raise SessionNotFound.no_such(session_id)
        return tuple(row)

    def count(self) -> int:
        row = self.db.read_one("SELECT count(*) AS n FROM sessions WHERE message_count > 0 AND deleted_at IS NULL")
        return int(row["n"]) if row else 0

    def rename(self, session_id: str, title: str) -> None:
        with self.db.transaction() as tx:
            find(tx, session_id)
            tx.execute("UPDATE sessions SET title = ? WHERE id = ?", (normalize_title(title), session_id))

    def retitle(self, session_id: str, title: str, *, if_title: str) -> bool:
        """Set the title only while it is still ``if_title`` (a rename meanwhile wins); whether it was set."""
        with self.db.transaction() as tx:
            return retitle(tx, session_id, title, if_title=if_title)

    def set_model(self, session_id: str, model: str) -> None:
        with self.db.transaction() as tx:
            find(tx, session_id)
            tx.execute("UPDATE sessions SET model = ? WHERE id = ?", (model, session_id))

    def family(self, session_id: str) -> builtins.list[str]:
        """The session (if here, in the trash or not) and every session forked from it, at any depth."""
        rows = self.db.read(
            "WITH RECURSIVE family(id) AS (SELECT id FROM sessions WHERE id = ? "
            "UNION SELECT s.id FROM sessions s JOIN family f ON s.parent_id = f.id) SELECT id FROM family",
            (session_id,),
        )
        return [str(row["id"]) for row in rows]

    def delete(self, session_id: str, files_root: Path | None = None) -> None:
        """Remove the session, its transcript, search entries, compactions and ``files_root/session_id``.

        SessionBusy if another process has it open."""
        with self._open.holding(session_id), self.db.transaction() as tx:
            find(tx, session_id)
            for table in SESSION_TABLES:
                tx.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
            tx.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
            prune_contents(tx)
        if files_root is not None:
            target = Path(files_root) / session_id
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()


class Trash:
    """The sessions' trash: a session moved there is hidden from listings, search and resume and kept whole;
    restoring brings it back unchanged, and purging removes it for good (``Sessions.delete``), by hand or once
    the retention has passed."""

    def __init__(self, db: Database, sessions: Sessions) -> None:
        self.db = db
        self.sessions = sessions
        self._open = OpenSessions(db)

    def put(self, session_id: str) -> float:
        """Move the session to the trash; return when.

        SessionBusy if another process has it open."""
        now = time.time()
        with self._open.holding(session_id), self.db.transaction() as tx:
            find(tx, session_id)
            mark_trashed(tx, session_id, now)
        return now

    def restore(self, session_id: str) -> None:
        """Bring a session back from the trash, unchanged."""
        with self.db.transaction() as tx:
            find(tx, session_id)
            tx.execute("UPDATE sessions SET deleted_at = NULL WHERE id = ?", (session_id,))

    def holds(self, session_id: str) -> bool:
        """Whether the session is in the trash; SessionNotFound if there is no such session."""
        row = self.db.read_one("SELECT deleted_at IS NOT NULL AS trashed FROM sessions WHERE id = ?", (session_id,))
        if row is None:
            raise SessionNotFound.no_such(session_id)
        return bool(row["trashed"])

    def list(self, limit: int = 1_000_000) -> builtins.list[tuple[SessionInfo, float]]:
        """Sessions in the trash with when each was deleted, most recently deleted first."""
        rows = self.db.read(
            f"SELECT {_COLUMNS}, deleted_at FROM sessions WHERE deleted_at IS NOT NULL "
            "ORDER BY deleted_at DESC, id DESC LIMIT ?",
            (limit,),
        )
        return [(_info(row), float(row["deleted_at"])) for row in rows]

    def ids_before(self, cutoff: float) -> builtins.list[str]:
        """Ids of the sessions moved to the trash before ``cutoff`` (seconds since the epoch)."""
        rows = self.db.read("SELECT id FROM sessions WHERE deleted_at IS NOT NULL AND deleted_at < ?", (cutoff,))
        return [row["id"] for row in rows]

    def purge(self, session_ids: Sequence[str], files_root: Path | None = None) -> int:
        """Remove trashed sessions for good (rows, search entries, usage, offloaded tool outputs), then
        reclaim the space. Sessions not in the trash are refused (CoError). Returns how many were removed."""
        with self.db.lock:
            for session_id in session_ids:
                self.sessions.get(session_id, trashed=True)
            for session_id in session_ids:
                self.sessions.delete(session_id, files_root=files_root)
            if session_ids:
                self.db.reclaim_space()
        return len(session_ids)

    def purge_expired(self, retention_days: float, files_root: Path | None = None) -> int:
        """Purge what has been in the trash longer than ``retention_days`` (0: nothing, ever). A session another
        process holds (it cannot be resumed from the trash, so only a racing restore) is left for next time."""
        if retention_days <= 0:
            return 0
        purged = 0
        for session_id in self.ids_before(time.time() - retention_days * 86400):
            try:
                self.sessions.delete(session_id, files_root=files_root)
            except SessionBusy:
                continue
            purged += 1
        if purged:
            self.db.reclaim_space()
        return purged
