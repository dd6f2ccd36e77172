"""Whole sessions written at once: a fork of a stored session, and a session imported as given.

Each is one transaction over the sessions, messages, compactions and task lists (and, for a fork, pins and
readings) tables.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from co_cli.errors import CoError
from co_cli.store import compactions, file_changes, messages, pins, readings, sessions, tasks
from co_cli.store.compactions import CompactionRecord
from co_cli.store.db import Database
from co_cli.store.messages import StoredMessage
from co_cli.store.sessions import SessionInfo, is_session_id, new_session_id, normalize_title
from co_cli.store.tasks import TaskSnapshot

FORK_MARK = " (fork)"


def fork(db: Database, session_id: str, upto_seq: int | None = None) -> SessionInfo:
    """Copy the session (up to ``upto_seq``) under a new id; the original is untouched.

    The fork keeps the pins in force, what its messages were read to say (readings kept by then; a message still waiting
    to be read is read for the original only), the changes co's edit tools made up to that point, the task list as it
    stood after message ``upto_seq`` and the compactions that had happened by that point: those covering only messages
    up to ``upto_seq`` and made before the message after it was saved, as a rebuild of the working context at that point
    has them)."""
    now = time.time()
    with db.transaction() as tx:
        source = sessions.find(tx, session_id)
        last = source.message_count - 1
        upto = last if upto_seq is None else upto_seq
        if upto < -1 or upto > last:
            raise CoError(f"cannot fork session {session_id} at message {upto_seq}: it has messages 0..{last}")
        info = SessionInfo(
            id=new_session_id(now),
            title=f"{source.title.removesuffix(FORK_MARK)}{FORK_MARK}",  # a fork of a fork is not "(fork) (fork)"
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
        sessions.insert(tx, info)
        messages.copy(tx, session_id, info.id, upto)
        following = messages.saved_at(tx, session_id, upto + 1)
        info.compaction_count = compactions.copy(tx, session_id, info.id, upto, following)
        sessions.add_counts(tx, info.id, updated_at=now, compactions=info.compaction_count)
        pins.copy(tx, session_id, info.id)
        tasks.copy(tx, session_id, info.id, upto)
        file_changes.copy(tx, session_id, info.id, upto)
        readings.copy(tx, session_id, info.id, upto)
    return info


def copy_files(source: Path, target: Path) -> None:
    """A fork's copy of its session's files: hard links where the file system allows (no second copy of a big
    output), private copies elsewhere; the directory is 0700, the files stay 0600."""
    if not source.is_dir() or source.is_symlink():
        return
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(target, 0o700)
    for path in source.iterdir():
        if path.is_symlink() or not path.is_file():
            continue
        copy = target / path.name
        with contextlib.suppress(FileExistsError):
            try:
                os.link(path, copy)
            except OSError:
                shutil.copyfile(path, copy)
                os.chmod(copy, 0o600)


def import_session(
    db: Database,
    info: SessionInfo,
    transcript: Sequence[StoredMessage],
    records: Sequence[CompactionRecord],
    task_lists: Sequence[TaskSnapshot] = (),
) -> SessionInfo:
    """Insert a whole session as given; a taken or malformed id is replaced by a new one."""
    rows = [messages.encode(m.seq, m.created_at, m.message, m.status) for m in transcript]
    stored = [compactions.encode(record) for record in records]
    with db.transaction() as tx:
        if sessions.exists(tx, info.id) or not is_session_id(info.id):
            info.id = new_session_id()
        info.message_count = len(rows)
        info.compaction_count = compactions.in_force(stored)
        info.title = normalize_title(info.title)
        sessions.insert(tx, info)
        messages.insert(tx, info.id, rows)
        compactions.insert_rows(tx, info.id, stored)
        tasks.insert_snapshots(tx, info.id, task_lists)
    return info
