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
from co_cli.store import compactions as compaction_rows
from co_cli.store import messages as message_rows
from co_cli.store import sessions
from co_cli.store import tasks as task_rows
from co_cli.store.compactions import CompactionRecord
from co_cli.store.export import Repair, resumable
from co_cli.store.import_document import ParsedExport, parse_export
from co_cli.store.messages import MessageRow
from co_cli.store.sessions import SessionInfo, new_session_id
from co_cli.store.tasks import TaskSnapshot

if TYPE_CHECKING:
    from co_cli.store.tables import Store

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


def documents(text: str) -> Iterator[ParsedExport]:
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


def _local_keys(store: Store, session_id: str) -> list[MessageKey]:
    return [_key(*signature) for signature in store.messages.signatures(session_id)]


def _common_prefix(a: Sequence[MessageKey], b: Sequence[MessageKey]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def merge_import(store: Store, text: str, repair: Repair) -> MergeReport:
    """Merge every session of an export into the store; each transcript is first closed so it can be
    continued (``resumable`` with ``repair``)."""
    report = MergeReport()
    for info, messages, compactions, task_lists in documents(text):
        messages, compactions = resumable(messages, compactions, repair)
        _merge_one(store, ParsedExport(info, messages, compactions, task_lists), report)
    return report


def _merge_one(store: Store, parsed: ParsedExport, report: MergeReport) -> None:
    info, messages, compactions, task_lists = parsed
    encoded = [message_rows.encode(m.seq, m.created_at, m.message, m.status) for m in messages]
    keys = [_key(row.created_at, row.kind, row.status, row.text) for row in encoded]
    best: tuple[int, str, int] | None = None  # (shared messages, local id, local length)
    for local_id in store.sessions.family(info.id):
        local = _local_keys(store, local_id)
        shared = _common_prefix(local, keys)
        if shared == len(keys):
            report.skipped.append(local_id)
            return
        if best is None or shared > best[0] or (shared == best[0] and shared == len(local)):
            best = (shared, local_id, len(local))
    if best is None:
        report.imported.append(store.import_session(info, messages, compactions, task_lists))
        return
    shared, local_id, local_length = best
    if shared == local_length:
        try:
            added = _append(store, local_id, shared, encoded[shared:], compactions, task_lists)
        except SessionBusy:
            report.busy.append(local_id)
            return
        report.appended.append((store.sessions.get(local_id, trashed=store.trash.holds(local_id)), added))
        return
    info.parent_id = local_id
    info.fork_seq = shared - 1
    info.id = new_session_id()
    report.forked.append((store.import_session(info, messages, compactions, task_lists), local_id))


def _append(
    store: Store,
    session_id: str,
    expected_length: int,
    rows: Sequence[MessageRow],
    compactions: Sequence[CompactionRecord],
    task_lists: Sequence[TaskSnapshot],
) -> int:
    """Append the messages (seqs continuing the local ones) and the compactions and task-list versions the local
    copy lacks, in one transaction; SessionBusy if another co has the session open, CoError if it changed meanwhile."""
    with store.locks.holding(session_id), store.db.transaction() as tx:
        if sessions.find(tx, session_id).message_count != expected_length:
            raise CoError(f"session {session_id} changed during the import; import again")
        message_rows.insert(tx, session_id, rows)
        have = {
            (round(created_at, 6), start, upto) for created_at, start, upto in compaction_rows.spans(tx, session_id)
        }
        new = [
            compaction_rows.encode(c)
            for c in compactions
            if (round(c.created_at, 6), c.from_seq, c.upto_seq) not in have
        ]
        compaction_rows.insert_rows(tx, session_id, new)
        versions = task_rows.spans(tx, session_id)
        task_rows.insert_snapshots(
            tx, session_id, [s for s in task_lists if (round(s.created_at, 6), s.seq) not in versions]
        )
        last = max((row.created_at for row in rows), default=time.time())
        sessions.add_counts(
            tx,
            session_id,
            updated_at=last,
            messages=len(rows),
            compactions=compaction_rows.in_force(new),
            keep_later=True,
        )
    return len(rows)
