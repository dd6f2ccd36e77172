"""Holding a session open, so that a second co does not write to it at the same time.

The lock itself is a lock file (``co_cli.store.lockfiles``) the kernel releases when its process ends;
``owner_pid`` in the sessions table only says who holds it, for messages and for other tools.

A takeover (``--force``) renames the holder's lock file while it holds the database's write lock (inside a
``BEGIN IMMEDIATE`` transaction), and the writer of a live session checks it still holds its lock inside each
of its own write transactions (``check_held``). SQLite lets one write transaction run at a time, so the old
holder's write lands either whole before the takeover (and the co taking over reads it) or not at all.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from co_cli.errors import SessionBusy, SessionNotFound, SessionTakenOver
from co_cli.store.db import Database, Transaction


class OpenSessions:
    """The sessions this process holds open, and which ones other live co processes hold."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._unrecorded: set[str] = set()
        """Sessions held without saying so in ``owner_pid``."""

    def acquire(self, session_id: str, *, force: bool = False, record_owner: bool = True) -> None:
        """Hold the session open for this process; SessionBusy if another live process has it open.

        A lock left by a process that has ended is free. ``force`` takes the session from a live holder.
        ``record_owner=False`` takes the lock file alone (it is what refuses other processes): for a holder that
        takes and releases the session for every request, two writes fewer each time."""
        with self.db.lock:
            if force:
                self._take_over(session_id, record_owner)
                return
            self._take(session_id)
            if not record_owner:
                self._unrecorded.add(session_id)
                return
            try:
                with self.db.transaction() as tx:
                    _record_owner(tx, session_id)
            except BaseException:
                self.db.lock_files.release(session_id)
                raise

    def _take_over(self, session_id: str, record_owner: bool) -> None:
        """Take the session from a live holder inside a write transaction: no write of the holder can run
        between its lock file being renamed and the holder's next check (``check_held``)."""
        try:
            with self.db.transaction() as tx:
                self._take(session_id, force=True)
                if record_owner:
                    _record_owner(tx, session_id)
        except BaseException:
            self.db.lock_files.release(session_id)
            raise
        if not record_owner:
            self._unrecorded.add(session_id)

    def check_held(self, session_id: str) -> None:
        """SessionTakenOver if another co has taken the session from this process (``--force``). Called inside
        the write transaction it guards, so the answer holds until that transaction ends."""
        if self.db.lock_files.taken(session_id):
            raise SessionTakenOver(
                f"session {session_id} was taken over by another co (--force); this co no longer writes to it"
            )

    def release(self, session_id: str) -> None:
        with self.db.lock:
            if not self.db.lock_files.holds(session_id):
                return
            if session_id in self._unrecorded:
                self._unrecorded.discard(session_id)
                self.db.lock_files.release(session_id)
                return
            try:
                with self.db.transaction() as tx:
                    tx.execute(
                        "UPDATE sessions SET owner_pid = NULL, owner_since = NULL WHERE id = ? AND owner_pid = ?",
                        (session_id, os.getpid()),
                    )
            finally:
                self.db.lock_files.release(session_id)

    def holds(self, session_id: str) -> bool:
        """Whether this process holds the session open."""
        with self.db.lock:
            return self.db.lock_files.holds(session_id)

    def open_elsewhere(self) -> set[str]:
        """Ids of the sessions another live co process has open now (from the lock files, no database read)."""
        with self.db.lock:
            return set(self.db.lock_files.held_elsewhere())

    @contextmanager
    def holding(self, session_id: str) -> Iterator[None]:
        """The session's lock for the duration (SessionBusy if another process has it open); released after
        unless this process already held it. The database lock is held throughout."""
        with self.db.lock:
            ours = self.db.lock_files.holds(session_id)
            self._take(session_id)
            try:
                yield
            finally:
                if not ours:
                    self.db.lock_files.release(session_id)

    def _take(self, session_id: str, force: bool = False) -> None:
        """Take the session's lock file; SessionBusy if another live process holds it (and not ``force``)."""
        if self.db.read_one("SELECT id FROM sessions WHERE id = ?", (session_id,)) is None:
            raise SessionNotFound.no_such(session_id)
        if self.db.lock_files.acquire(session_id, force=force):
            return
        owner = self.db.read_one("SELECT owner_pid FROM sessions WHERE id = ?", (session_id,))
        pid = owner["owner_pid"] if owner else None
        by = f" (pid {pid})" if pid is not None else ""
        raise SessionBusy(
            f"session {session_id} is open in another co process{by}; close it there, "
            "continue a copy with --fork, or take it over with --force"
        )


def _record_owner(tx: Transaction, session_id: str) -> None:
    """Say in the sessions table that this process holds the session (for messages and other tools)."""
    tx.execute(
        "UPDATE sessions SET owner_pid = ?, owner_since = ? WHERE id = ?", (os.getpid(), time.time(), session_id)
    )
