"""Salvage a damaged session database: copy whatever SQLite can still read into a new database.

The damaged file is only read (from a private copy, so even its write-ahead log is applied without
touching it). Rows are read in rowid order; when a read fails, the reader steps past the damaged part
(a binary search finds where readable rows start again), so one bad page costs the rows on it, not the
table. Each session is then rebuilt from its readable messages: messages pydantic-ai cannot read are
dropped, the rest renumbered 0, 1, 2, …, compactions moved to the renumbered messages, and a session
whose metadata row was lost is given a new one.
"""

from __future__ import annotations

import contextlib
import functools
import math
import shutil
import sqlite3
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from co_cli.errors import StoreError
from co_cli.store import compactions as compaction_rows
from co_cli.store import messages as message_rows
from co_cli.store import sessions
from co_cli.store.codec import dump_messages, message_kind_and_text
from co_cli.store.compactions import StoredCompaction
from co_cli.store.db import TEXT_FACTORY, Database, newer_co_error
from co_cli.store.messages import MessageRow
from co_cli.store.schema import MESSAGE_STATUSES, SCHEMA_VERSION
from co_cli.store.sessions import SessionInfo, is_session_id, new_session_id, normalize_title

_BATCH = 256
_SESSION_READ = (
    "id, title, created_at, updated_at, model, cwd, parent_id, fork_seq, input_tokens, output_tokens, cost_usd, "
    "message_count"
)
_MESSAGE_READ = "session_id, seq, created_at, json, status"
_COMPACTION_READ = (
    "session_id, created_at, from_seq, upto_seq, summary, focus, trigger, tokens_before, tokens_after, model, "
    "replacement_json"
)
_COMPACTION_DETAILS = "method, detail, ledger, tiers, undone_at"
_NO_COMPACTION_DETAILS = "'summary', '', '', '', NULL"
"""What a database from before compaction details reads as."""
_SESSION_ROWS = {
    "pins": "session_id, text, source, created_at, removed_at",
    "turn_usage": (
        "session_id, created_at, role, model, requests, input_tokens, output_tokens, cache_read_tokens, "
        "cache_write_tokens, cost_usd"
    ),
    "task_lists": "session_id, seq, created_at, source, items",
    "tool_calls": "session_id, seq, created_at, tool, outcome, seconds",
    "turn_memories": "session_id, seq, created_at, memory_id, kind, text",
    "readings": "session_id, seq, created_at, text, parts",
}
"""Further per-session tables copied as they are (pinned instructions, usage, task lists, tool calls, the
memories turns were sent, what each message was read to say), when the database has them."""
_MEMORY_ROWS = {
    "memories": (
        "text, scope, project, kind, status, source_session, source_seq, created_at, updated_at, replaced_by, "
        "proposal, target_id"
    ),
    "memory_events": (
        "change_id, undoes, memory_id, at, action, actor, old_text, new_text, old_status, new_status, "
        "old_replaced_by, new_replaced_by, old_meta, new_meta"
    ),
}
"""The memory tables, copied as they are (ids kept: events and replacements refer to them)."""
_MEMORY_SUBJECT = "topic, about, person, cue"
_NO_MEMORY_SUBJECT = "NULL, NULL, NULL, NULL"
"""What a memory from before topics and subjects reads as."""


@dataclass
class Recovery:
    """What ``recover`` saved and what it could not."""

    target: Path
    sessions: int = 0
    messages: int = 0
    compactions: int = 0
    messages_lost: int = 0  # unreadable, or read but not a message co can load
    compactions_lost: int = 0
    sessions_rebuilt: int = 0  # sessions whose metadata row was lost, rebuilt from their messages
    damaged_tables: list[str] = field(default_factory=list)


@dataclass
class _Session:
    info: SessionInfo | None = None
    expected_messages: int = 0
    messages: list[tuple[int, float, str, str]] = field(default_factory=list)  # seq, created_at, json, status
    compactions: list[tuple[Any, ...]] = field(default_factory=list)
    deleted_at: float | None = None
    """When the session was moved to the trash (it stays there after recovery)."""
    extra: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)
    """Rows of ``_SESSION_ROWS`` tables, without their session id."""


def _finite(value: Any, default: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if math.isfinite(number) and 0 <= number < 2.0**32 else default


def _count(value: Any) -> int:
    return value if isinstance(value, int) and 0 <= value < 2**53 else 0


def _rows(conn: sqlite3.Connection, table: str, columns: str) -> tuple[list[tuple[Any, ...]], bool]:
    """Every readable row of ``table`` (rowid first); True as well if some part could not be read."""
    rows: list[tuple[Any, ...]] = []
    damaged = False
    try:
        high = conn.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0]
    except sqlite3.DatabaseError:
        high, damaged = None, True
    after = -(2**63)
    while True:
        try:
            batch = conn.execute(
                f"SELECT rowid, {columns} FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT {_BATCH}", (after,)
            ).fetchall()
        except sqlite3.DatabaseError:
            damaged = True
            batch = _rows_one_by_one(conn, table, columns, after, high)
        if not batch:
            return rows, damaged
        rows.extend(batch)
        after = batch[-1][0]


def _first_row_from(
    conn: sqlite3.Connection, table: str, columns: str, start: int
) -> tuple[Any, ...] | None | Exception:
    try:
        found: tuple[Any, ...] | None = conn.execute(
            f"SELECT rowid, {columns} FROM {table} WHERE rowid >= ? ORDER BY rowid LIMIT 1", (start,)
        ).fetchone()
    except sqlite3.DatabaseError as exc:
        return exc
    return found


def _rows_one_by_one(
    conn: sqlite3.Connection, table: str, columns: str, after: int, high: int | None
) -> list[tuple[Any, ...]]:
    """Rows after ``after`` up to the first unreadable one, or, if the very next one cannot be read, the
    first readable row past the damage."""
    rows: list[tuple[Any, ...]] = []
    while len(rows) < _BATCH:
        found = _first_row_from(conn, table, columns, after + 1)
        if found is None:
            return rows
        if isinstance(found, Exception):
            if rows:
                return rows  # the caller comes back here for the damaged part
            past = _past_damage(conn, table, columns, after + 1, high)
            return [] if past is None else [past]
        rows.append(found)
        after = found[0]
    return rows


def _past_damage(
    conn: sqlite3.Connection, table: str, columns: str, failing: int, high: int | None
) -> tuple[Any, ...] | None:
    """The first row that can be read at a rowid above ``failing`` (where reading fails), or None.

    Probes at doubling distances until a read succeeds (or passes the table's highest rowid), then
    narrows down by bisection to the lowest start that reads, so readable rows just past the damage are
    not skipped."""
    limit = high if high is not None else 2**62
    step = 1
    while True:
        start = min(failing + step, limit)
        if start <= failing:
            return None
        result = _first_row_from(conn, table, columns, start)
        if not isinstance(result, Exception):
            break
        if start >= limit:
            return None
        failing, step = start, step * 2
    lo, hi = failing + 1, start  # reads from ``failing`` fail; from ``hi`` they give ``result``
    while lo < hi:
        mid = (lo + hi) // 2
        attempt = _first_row_from(conn, table, columns, mid)
        if isinstance(attempt, Exception):
            lo = mid + 1
        else:
            hi, result = mid, attempt
    return result


@contextlib.contextmanager
def _readable_copy(source: Path) -> Iterator[sqlite3.Connection]:
    """A read connection to a private copy of ``source`` (with its write-ahead log, when there is one)."""
    with tempfile.TemporaryDirectory(prefix="co-recover-") as tmp:
        copy = Path(tmp) / "damaged.db"
        try:
            shutil.copyfile(source, copy)
            wal = source.with_name(source.name + "-wal")
            if wal.is_file():
                shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
        except OSError as exc:
            raise StoreError(f"cannot read {source}: {exc.strerror}") from None
        conn = sqlite3.connect(copy, isolation_level=None)
        conn.text_factory = TEXT_FACTORY
        try:
            yield conn
        finally:
            conn.close()


class _Reader:
    """Collects the readable rows of the three tables, grouped by session."""

    def __init__(self, report: Recovery) -> None:
        self.report = report
        self.sessions: dict[str, _Session] = defaultdict(_Session)

    def session(self, row: tuple[Any, ...]) -> None:
        (_, sid, title, created, updated, model, cwd, parent, fork_seq, tokens_in, tokens_out, cost, count) = row
        if not isinstance(sid, str):
            return
        now = time.time()
        found = self.sessions[sid]
        found.expected_messages = _count(count)
        found.info = SessionInfo(
            id=sid,
            title=title if isinstance(title, str) else "",
            created_at=_finite(created, now),
            updated_at=_finite(updated, now),
            model=model if isinstance(model, str) else "",
            cwd=cwd if isinstance(cwd, str) else "",
            parent_id=parent if isinstance(parent, str) and is_session_id(parent) else None,
            fork_seq=fork_seq if isinstance(fork_seq, int) and fork_seq >= -1 else None,
            message_count=0,
            input_tokens=_count(tokens_in),
            output_tokens=_count(tokens_out),
            cost_usd=_finite(cost, 0.0),
            compaction_count=0,
        )

    def message(self, row: tuple[Any, ...]) -> None:
        _, sid, seq, created, data, status = row
        if not isinstance(sid, str) or not isinstance(seq, int) or not isinstance(data, str):
            self.report.messages_lost += 1
            return
        self.sessions[sid].messages.append((seq, _finite(created, 0.0), data, status))

    def compaction(self, row: tuple[Any, ...]) -> None:
        if isinstance(row[1], str):
            self.sessions[row[1]].compactions.append(row[2:])
        else:
            self.report.compactions_lost += 1

    def trashed(self, row: tuple[Any, ...]) -> None:
        _, sid, deleted_at = row
        if isinstance(sid, str) and deleted_at is not None:
            self.sessions[sid].deleted_at = _finite(deleted_at, time.time())

    def read(self, conn: sqlite3.Connection) -> dict[str, _Session]:
        details = _COMPACTION_DETAILS if _has_column(conn, "compactions", "undone_at") else _NO_COMPACTION_DETAILS
        tables: list[tuple[str, str, Callable[[tuple[Any, ...]], None]]] = [
            ("sessions", _SESSION_READ, self.session),
            ("messages", _MESSAGE_READ, self.message),
            ("compactions", f"{_COMPACTION_READ}, {details}", self.compaction),
        ]
        if _has_column(conn, "sessions", "deleted_at"):
            tables.append(("sessions", "id, deleted_at", self.trashed))
        for table, columns in _SESSION_ROWS.items():
            if _has_column(conn, table, "session_id"):
                tables.append((table, columns, functools.partial(self.extra_row, table)))
        for table, columns, add in tables:
            try:
                rows, damaged = _rows(conn, table, columns)
            except sqlite3.DatabaseError:
                rows, damaged = [], True
            if damaged:
                self.report.damaged_tables.append(table)
            for row in rows:
                add(row)
        return self.sessions

    def extra_row(self, table: str, row: tuple[Any, ...]) -> None:
        if isinstance(row[1], str):
            self.sessions[row[1]].extra.setdefault(table, []).append(row[2:])


def _has_column(conn: sqlite3.Connection, table: str, column: str) -> bool:
    try:
        return any(info[1] == column for info in conn.execute(f"PRAGMA table_info({table})"))
    except sqlite3.DatabaseError:
        return False


def _decode(data: Any, *, single: bool) -> list[Any] | None:
    """The messages in a stored JSON list, or None if pydantic-ai cannot read them (or ``single`` and not one)."""
    from pydantic import ValidationError
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    if not isinstance(data, str):
        return None
    try:
        messages = ModelMessagesTypeAdapter.validate_json(data)
    except (ValidationError, ValueError):
        return None
    return None if single and len(messages) != 1 else messages


Rebuilt = tuple[SessionInfo, list[MessageRow], list[StoredCompaction]]


def _rebuild(session_id: str, found: _Session, report: Recovery) -> Rebuilt | None:
    """The session with its readable messages renumbered and its compactions moved along; None if empty."""
    decoded = [(m, _decode(m[2], single=True)) for m in sorted(found.messages, key=lambda m: m[0])]
    kept = [(m, messages[0]) for m, messages in decoded if messages is not None]
    report.messages_lost += len(decoded) - len(kept)
    report.messages_lost += max(0, found.expected_messages - len({m[0] for m in found.messages}))
    if not kept:
        report.compactions_lost += len(found.compactions)
        return None
    seqs = _Renumbered([m[0] for m, _ in kept])
    compactions = _moved_compactions(found.compactions, seqs, kept[0][0][1], report)
    info = found.info if found.info is not None else _found_session(session_id, kept, report)
    info.message_count = len(kept)
    info.compaction_count = compaction_rows.in_force(compactions)
    if info.fork_seq is not None:
        info.fork_seq = seqs.last_kept_upto(info.fork_seq)
    rows = _renumbered_rows(kept, info.created_at)
    if not info.title:
        info.title = next((r.text for r in rows if r.kind == "user"), "") or "recovered session"
    info.title = normalize_title(info.title)
    return info, rows, compactions


Kept = list[tuple[tuple[int, float, str, str], Any]]
"""The readable messages of a session: each stored row (seq, created, data, status) with its message."""


class _Renumbered:
    """The old seqs of the messages kept, which become 0, 1, 2, ... in the rebuilt session."""

    def __init__(self, old_seqs: list[int]) -> None:
        self.old_seqs = old_seqs

    def last_kept_upto(self, old: int) -> int:
        return sum(1 for s in self.old_seqs if s <= old) - 1

    def first_kept_from(self, old: int) -> int:
        return sum(1 for s in self.old_seqs if s < old)


def _moved_compactions(
    found: list[tuple[Any, ...]], seqs: _Renumbered, first_created: Any, report: Recovery
) -> list[StoredCompaction]:
    """The readable compactions, their spans moved to the renumbered messages (the others counted lost)."""
    compactions: list[StoredCompaction] = []
    for row in found:
        created, from_seq, upto_seq, summary, focus, trigger, before, after, model, replacement, *details = row
        usable = (
            isinstance(from_seq, int)
            and isinstance(upto_seq, int)
            and isinstance(summary, str)
            and trigger in ("auto", "manual")
            and _decode(replacement, single=False) is not None
        )
        if not usable:
            report.compactions_lost += 1
            continue
        upto = seqs.last_kept_upto(upto_seq)
        method, detail, ledger, tiers, undone_at = _compaction_details(details)
        compactions.append(
            StoredCompaction(
                created_at=_finite(created, first_created),
                from_seq=min(seqs.first_kept_from(from_seq), upto),
                upto_seq=upto,
                summary=summary,
                focus=focus if isinstance(focus, str) else None,
                trigger=trigger,
                tokens_before=_count(before),
                tokens_after=_count(after),
                model=model if isinstance(model, str) else "",
                replacement_json=replacement,
                method=method,
                detail=detail,
                ledger=ledger,
                tiers=tiers,
                undone_at=undone_at,
            )
        )
    return compactions


def _found_session(session_id: str, kept: Kept, report: Recovery) -> SessionInfo:
    """The record of a session whose row was lost, made from its messages (the id kept when it is one)."""
    report.sessions_rebuilt += 1
    first, last = kept[0][0][1] or time.time(), kept[-1][0][1] or time.time()
    sid = session_id if is_session_id(session_id) else new_session_id()
    return SessionInfo(
        id=sid,
        title="",
        created_at=first,
        updated_at=last,
        model="",
        cwd="",
        parent_id=None,
        fork_seq=None,
        message_count=0,
        input_tokens=0,
        output_tokens=0,
        cost_usd=0.0,
        compaction_count=0,
    )


def _renumbered_rows(kept: Kept, created_default: float) -> list[MessageRow]:
    rows = []
    for seq, ((_, created, _, status), message) in enumerate(kept):
        kind, text = message_kind_and_text(message)
        status = status if status in MESSAGE_STATUSES else "ok"
        rows.append(MessageRow(seq, created or created_default, kind, text, dump_messages([message]), status))
    return rows


def _compaction_details(details: list[Any]) -> tuple[str, str, str, str, float | None]:
    """method, detail, ledger, tiers, undone_at of a compaction row, each checked (an undo is kept: a
    compaction the user took back must not come back in force)."""
    method, detail, ledger, tiers, undone_at = (details + [None] * 5)[:5]

    def text(value: Any, default: str) -> str:
        return value if isinstance(value, str) else default

    undone = _finite(undone_at, time.time()) if undone_at is not None else None
    return text(method, "summary"), text(detail, ""), text(ledger, ""), text(tiers, ""), undone


def _write(db: Database, rebuilt: list[Rebuilt], found: dict[str, _Session]) -> None:
    for info, rows, compactions in rebuilt:
        session = found.get(info.id)
        with db.transaction() as tx:
            sessions.insert(tx, info)
            message_rows.insert(tx, info.id, rows)
            compaction_rows.insert_rows(tx, info.id, compactions)
            if session is not None and session.deleted_at is not None:
                sessions.mark_trashed(tx, info.id, session.deleted_at)
        for table, columns in _SESSION_ROWS.items():
            marks = ", ".join("?" * len(columns.split(",")))
            for row in session.extra.get(table, []) if session is not None else []:
                try:  # a damaged row that breaks a constraint is left out, the rest kept
                    with db.transaction() as tx:
                        tx.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", (info.id, *row))
                except Exception:
                    continue


def _read_memories(conn: sqlite3.Connection) -> dict[str, list[tuple[Any, ...]]]:
    """Every readable row of the memory tables (rowid first); nothing for a database without them."""
    found: dict[str, list[tuple[Any, ...]]] = {}
    for table, columns in _MEMORY_ROWS.items():
        try:
            conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchall()
        except sqlite3.DatabaseError:
            continue
        if table == "memories":
            subject = _MEMORY_SUBJECT if _has_column(conn, "memories", "topic") else _NO_MEMORY_SUBJECT
            columns = f"{columns}, {subject}"
        found[table] = _rows(conn, table, columns)[0]
    return found


def _write_memories(db: Database, found: dict[str, list[tuple[Any, ...]]]) -> int:
    """Insert the rows read (ids kept); a row that breaks a constraint (damage) is skipped. Returns how many
    memories were kept."""
    kept = 0
    for table, columns in _MEMORY_ROWS.items():
        if table == "memories":
            columns = f"{columns}, {_MEMORY_SUBJECT}"
        marks = ", ".join("?" * (len(columns.split(",")) + 1))
        for row in found.get(table, []):
            try:
                with db.transaction() as tx:
                    tx.execute(f"INSERT INTO {table} (id, {columns}) VALUES ({marks})", row)
            except Exception:
                continue
            kept += table == "memories"
    return kept


def recover(source: Path, target: Path) -> Recovery:
    """Copy what can be read from the database at ``source`` into a new database at ``target``.

    ``source`` is never written. StoreError if ``target`` exists or nothing at all can be read."""
    if target.exists():
        raise StoreError(f"{target} already exists; choose another file for the recovered sessions")
    if not source.is_file():
        raise StoreError(f"there is no session database at {source}")
    report = Recovery(target=target)
    _remove_partial_files(target.parent)
    with _readable_copy(source) as conn:
        try:
            conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()
        except sqlite3.DatabaseError:
            raise StoreError(f"{source} is not an SQLite database co can read anything from") from None
        _refuse_newer_schema(conn, source)
        found = _Reader(report).read(conn)
        memories = _read_memories(conn)
    rebuilt = []
    for session_id, session in found.items():
        result = _rebuild(session_id, session, report)
        if result is not None:
            rebuilt.append(result)
    rebuilt.sort(key=lambda r: r[0].created_at)
    # Written under a name of its own and renamed when whole: a failed or killed run leaves no half database
    # where the recovered one was to be (a killed run's file is removed by the next recover).
    partial = target.with_name(f"{target.name}{PARTIAL}")
    try:
        with Database.open(partial) as db:
            _write(db, rebuilt, found)
            _write_memories(db, memories)
        partial.replace(target)
    finally:
        _remove_database_files(partial)
    report.sessions = len(rebuilt)
    report.messages = sum(len(rows) for _, rows, _ in rebuilt)
    report.compactions = sum(len(c) for _, _, c in rebuilt)
    return report


PARTIAL = ".partial"


def _refuse_newer_schema(conn: sqlite3.Connection, source: Path) -> None:
    """A database from a newer co is not damaged: recovering it would downgrade it and lose what this co does
    not know. Refused, as every other command refuses it."""
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    except (sqlite3.DatabaseError, TypeError, ValueError):
        return
    if version > SCHEMA_VERSION:
        raise newer_co_error(source, version)


def _remove_database_files(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            path.with_name(path.name + suffix).unlink()


def _remove_partial_files(directory: Path) -> None:
    """Remove what killed recover runs left (``*.partial`` databases)."""
    with contextlib.suppress(OSError):
        for path in directory.glob(f"*{PARTIAL}"):
            _remove_database_files(path)


def install(recovered: Path, db: Path, stamp: str) -> Path:
    """Put ``recovered`` in the place of ``db``; ``db`` (with its -wal and -shm files) is kept under a new name,
    which is returned."""
    kept = db.with_name(f"{db.stem}.damaged-{stamp}{db.suffix}")
    for suffix in ("", "-wal", "-shm"):
        old = db.with_name(db.name + suffix)
        if old.exists():
            old.replace(kept.with_name(kept.name + suffix))
    recovered.replace(db)
    return kept
