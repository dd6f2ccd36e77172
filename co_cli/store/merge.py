"""Merge sessions exported on another machine (``co sessions export --all``) into this store.

Each exported session is compared with the local session of the same id and its descendants (forks,
including those an earlier import made), message by message (time saved, kind, status, text):

- a local copy holds every exported message already: skipped;
- a local copy is a prefix of the export (the session grew elsewhere): the new messages are appended;
- otherwise the two diverged: the export is imported as a fork of the closest local copy, at the last
  message they share (``parent_id``/``fork_seq``); importing it again finds that fork and skips it;
- no local copy: imported as it is, under its own id.

So importing the same file twice changes nothing, and two machines stay in step through any file-sync tool
without ever copying a live SQLite file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from co_cli.errors import CoError, SessionBusy
from co_cli.store.export import resumable
from co_cli.store.import_document import parse_export
from co_cli.store.sessions import (
    INSERT_COMPACTION,
    CompactionRecord,
    SessionInfo,
    StoredMessage,
    compaction_row,
    dump_messages,
    message_kind_and_text,
    new_session_id,
)

if TYPE_CHECKING:
    from co_cli.store.sessions import SessionStore

MessageKey = tuple[float, str, str, str]  # created_at, kind, status, text


@dataclass
class MergeReport:
    imported: list[SessionInfo] = field(default_factory=list)
    appended: list[tuple[SessionInfo, int]] = field(default_factory=list)  # session, messages added
    forked: list[tuple[SessionInfo, str]] = field(default_factory=list)  # new fork, the local session it forks
    skipped: list[str] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)  # open in another co: left for the next import

    def summary(self) -> str:
        parts = [
            f"{len(self.imported)} new",
            f"{len(self.appended)} grown ({sum(n for _, n in self.appended)} messages appended)",
            f"{len(self.forked)} diverged (imported as forks)",
            f"{len(self.skipped)} unchanged",
        ]
        if self.busy:
            parts.append(f"{len(self.busy)} open in another co (not merged; import again later)")
        return ", ".join(parts)


Parsed = tuple[SessionInfo, list[StoredMessage], list[CompactionRecord]]


def documents(text: str) -> Iterator[Parsed]:
    """The sessions in ``text``: one export document (``export -f json``) or JSON lines (``export --all``).

    Every document is checked (``parse_export``); CoError names the line of the first bad one."""
    stripped = text.strip()
    if not stripped:
        raise CoError("not a co session export: the file is empty")
    try:
        json.loads(stripped)
        single = True
    except (json.JSONDecodeError, RecursionError):
        single = False
    if single:
        yield parse_export(stripped)
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield parse_export(line)
        except CoError as exc:
            raise CoError(f"line {number}: {exc.message}", exit_code=exc.exit_code) from None


def _key(created_at: float, kind: str, status: str, text: str) -> MessageKey:
    return (round(created_at, 6), kind, status, text)


def _local_keys(store: SessionStore, session_id: str) -> list[MessageKey]:
    rows = store._read(
        "SELECT created_at, kind, status, text FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)
    )
    return [_key(*row) for row in rows]


def _common_prefix(a: Sequence[MessageKey], b: Sequence[MessageKey]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _candidates(store: SessionStore, session_id: str) -> list[str]:
    """The session (if here, in the trash or not) and every session forked from it, at any depth."""
    rows = store._read(
        "WITH RECURSIVE family(id) AS (SELECT id FROM sessions WHERE id = ? "
        "UNION SELECT s.id FROM sessions s JOIN family f ON s.parent_id = f.id) SELECT id FROM family",
        (session_id,),
    )
    return [str(row[0]) for row in rows]


def merge_import(store: SessionStore, text: str) -> MergeReport:
    report = MergeReport()
    for info, messages, compactions in documents(text):
        messages, compactions = resumable(messages, compactions)
        _merge_one(store, info, messages, compactions, report)
    return report


def _merge_one(
    store: SessionStore,
    info: SessionInfo,
    messages: list[StoredMessage],
    compactions: list[CompactionRecord],
    report: MergeReport,
) -> None:
    encoded = [(*message_kind_and_text(m.message), dump_messages([m.message])) for m in messages]
    keys = [_key(m.created_at, kind, m.status, text) for m, (kind, text, _) in zip(messages, encoded, strict=True)]
    best: tuple[int, str, int] | None = None  # (shared messages, local id, local length)
    for local_id in _candidates(store, info.id):
        local = _local_keys(store, local_id)
        shared = _common_prefix(local, keys)
        if shared == len(keys):
            report.skipped.append(local_id)
            return
        if best is None or shared > best[0] or (shared == best[0] and shared == len(local)):
            best = (shared, local_id, len(local))
    if best is None:
        report.imported.append(store.import_session(info, messages, compactions))
        return
    shared, local_id, local_length = best
    if shared == local_length:
        try:
            added = _append(store, local_id, shared, messages[shared:], encoded[shared:], compactions)
        except SessionBusy:
            report.busy.append(local_id)
            return
        report.appended.append((store.get(local_id, trashed=_in_trash(store, local_id)), added))
        return
    info.parent_id = local_id
    info.fork_seq = shared - 1
    info.id = new_session_id()
    report.forked.append((store.import_session(info, messages, compactions), local_id))


def _in_trash(store: SessionStore, session_id: str) -> bool:
    return store._read("SELECT deleted_at IS NOT NULL FROM sessions WHERE id = ?", (session_id,))[0][0] == 1


def _append(
    store: SessionStore,
    session_id: str,
    expected_length: int,
    messages: Sequence[StoredMessage],
    encoded: Sequence[tuple[str, str, str]],
    compactions: Sequence[CompactionRecord],
) -> int:
    """Append the messages (seqs continuing the local ones) and the compactions the local copy lacks, in one
    transaction; SessionBusy if another co has the session open, CoError if it changed meanwhile."""
    with store._lock:
        ours = store._locks.holds(session_id)
        store._lock_session(session_id)
        try:
            with store._write() as conn:
                count = conn.execute("SELECT message_count FROM sessions WHERE id = ?", (session_id,)).fetchone()[0]
                if count != expected_length:
                    raise CoError(f"session {session_id} changed during the import; import again")
                conn.executemany(
                    "INSERT INTO messages (session_id, seq, created_at, kind, text, json, status) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [
                        (session_id, m.seq, m.created_at, kind, text, data, m.status)
                        for m, (kind, text, data) in zip(messages, encoded, strict=True)
                    ],
                )
                have = {
                    (round(r[0], 6), r[1], r[2])
                    for r in conn.execute(
                        "SELECT created_at, from_seq, upto_seq FROM compactions WHERE session_id = ?", (session_id,)
                    )
                }
                new = [c for c in compactions if (round(c.created_at, 6), c.from_seq, c.upto_seq) not in have]
                conn.executemany(
                    INSERT_COMPACTION,
                    [compaction_row(session_id, c, dump_messages(c.replacement)) for c in new],
                )
                last = max((m.created_at for m in messages), default=time.time())
                conn.execute(
                    "UPDATE sessions SET message_count = message_count + ?, compaction_count = compaction_count + ?, "
                    "updated_at = max(updated_at, ?) WHERE id = ?",
                    (len(messages), len(new), last, session_id),
                )
        finally:
            if not ours:
                store._locks.release(session_id)
    return len(messages)
