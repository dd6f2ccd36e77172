"""The file_changes table: each change co's edit tools made to a file, tied to its turn (the seq of the turn's
prompt): the path, the content the file had before (NULL: it did not exist) and the content the tool wrote.

Contents are kept once each, by their SHA-256, in ``file_contents``: a file edited ten times keeps eleven
contents, not twenty. A change is committed before its file is written, so a crash leaves the old file with a
change whose ``after`` never reached the disk, or the new file with its change; never a new file without one.
Deleting a session keeps its changes until the trash is emptied (``purge``), which drops the contents no
change names any longer (``prune_contents``)."""

from __future__ import annotations

import difflib
import hashlib
import time
from dataclasses import dataclass
from typing import Any

from co_cli.store.db import Database, Transaction


@dataclass(frozen=True)
class FileChange:
    """One change about to be made: the file's content before (None: absent) and after."""

    path: str
    before: bytes | None
    after: bytes | None
    tool: str


@dataclass(frozen=True)
class ChangeRow:
    """A saved change; its contents are read by hash (``FileChanges.content``)."""

    id: int
    seq: int
    """The seq of the prompt of the turn that made it."""
    path: str
    tool: str
    before_hash: str | None
    after_hash: str | None
    created_at: float


def content_hash(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def unified_diff(shown: str, before: str | None, after: str) -> str:
    """The change as a unified diff (``/dev/null`` for a new file)."""
    lines = difflib.unified_diff(
        (before or "").splitlines(),
        after.splitlines(),
        fromfile="/dev/null" if before is None else f"a/{shown}",
        tofile=f"b/{shown}",
        lineterm="",
    )
    return "\n".join(lines)


def change_diff(shown: str, before: bytes | None, after: bytes | None) -> str:
    """A saved change as a unified diff of its text (bytes that are not UTF-8 shown as U+FFFD)."""

    def text(data: bytes | None) -> str | None:
        return None if data is None else data.decode("utf-8", errors="replace").replace("\r\n", "\n")

    return unified_diff(shown, text(before), text(after) or "")


def insert(tx: Transaction, session_id: str, seq: int, change: FileChange, now: float | None = None) -> None:
    """Save a change made by the turn whose prompt is message ``seq``, with both contents."""
    now = time.time() if now is None else now
    for data in (change.before, change.after):
        if data is not None:
            tx.execute("INSERT OR IGNORE INTO file_contents (hash, data) VALUES (?, ?)", (content_hash(data), data))
    tx.execute(
        "INSERT INTO file_changes (session_id, seq, created_at, path, tool, before_hash, after_hash) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (session_id, seq, now, change.path, change.tool, content_hash(change.before), content_hash(change.after)),
    )


def copy(tx: Transaction, source_id: str, target_id: str, upto_seq: int) -> None:
    """A fork's copy of the changes made up to message ``upto_seq`` (their contents are shared)."""
    tx.execute(
        "INSERT INTO file_changes (session_id, seq, created_at, path, tool, before_hash, after_hash) "
        "SELECT ?, seq, created_at, path, tool, before_hash, after_hash FROM file_changes "
        "WHERE session_id = ? AND seq <= ? ORDER BY id",
        (target_id, source_id, upto_seq),
    )


def prune_contents(tx: Transaction) -> None:
    """Drop the contents no change names (after sessions were removed for good)."""
    tx.execute(
        "DELETE FROM file_contents WHERE hash NOT IN (SELECT before_hash FROM file_changes WHERE before_hash "
        "IS NOT NULL) AND hash NOT IN (SELECT after_hash FROM file_changes WHERE after_hash IS NOT NULL)"
    )


def _row(row: Any) -> ChangeRow:
    return ChangeRow(
        id=int(row["id"]),
        seq=int(row["seq"]),
        path=str(row["path"]),
        tool=str(row["tool"]),
        before_hash=row["before_hash"],
        after_hash=row["after_hash"],
        created_at=float(row["created_at"]),
    )


class FileChanges:
    def __init__(self, db: Database) -> None:
        self.db = db

    def of_session(self, session_id: str) -> list[ChangeRow]:
        """The session's changes in the order they were made."""
        rows = self.db.read(
            "SELECT id, seq, path, tool, before_hash, after_hash, created_at FROM file_changes "
            "WHERE session_id = ? ORDER BY id",
            (session_id,),
        )
        return [_row(row) for row in rows]

    def content(self, digest: str | None) -> bytes | None:
        """The content saved under ``digest`` (None for None: the file was absent)."""
        if digest is None:
            return None
        row = self.db.read_one("SELECT data FROM file_contents WHERE hash = ?", (digest,))
        if row is None:
            raise LookupError(f"no saved content {digest}")
        return bytes(row["data"])

    def with_diffs(self, session_id: str) -> list[tuple[ChangeRow, str]]:
        """The session's changes, each with its unified diff."""
        return [
            (row, change_diff(row.path, self.content(row.before_hash), self.content(row.after_hash)))
            for row in self.of_session(session_id)
        ]
