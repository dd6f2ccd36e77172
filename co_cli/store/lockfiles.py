"""Which co process has a session open: one lock file per session, locked with ``flock``.

The kernel drops a ``flock`` lock when its process ends, however it ends (a crash, ``kill -9``, a
power cut), so a lock never outlives its holder and a reused pid means nothing. Processes on one
machine, containers sharing the data directory included, see each other's locks.

A lock file is removed by its holder on release. Between opening a file and locking it another process
may have removed (released) or replaced (taken over) it, so a lock counts only if the locked file is
still the one at the path; otherwise the attempt starts again.

A takeover (``--force``) renames the holder's file to ``<id>.lock.taken-…`` rather than removing it: the
old holder still runs and still holds its lock there, so a later co without ``--force`` sees it and is
refused, even once the co that took over has released the session. A renamed file whose holder has ended
is removed by whoever finds it. The old holder tells it was taken over (``taken``): its file is no longer the
one at the path, and every write of a live session checks that inside its transaction (``store.locks``).
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import time
from pathlib import Path

from co_cli.errors import StoreError

TAKEN = ".taken-"
_ATTEMPTS = 50  # files replaced under us this often in a row means someone keeps taking the lock


def lock_directory(db: Path) -> Path:
    """Where the lock files of the sessions of the database at ``db`` live."""
    return db.parent / f"{db.name}.locks"


class SessionLocks:
    """The session locks this process holds, as lock files in ``directory`` (0700, files 0600)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._held: dict[str, int] = {}  # session id -> open, locked file descriptor

    def path(self, session_id: str) -> Path:
        return self.directory / f"{session_id}.lock"

    def holds(self, session_id: str) -> bool:
        return session_id in self._held

    def taken(self, session_id: str) -> bool:
        """Whether this process held the session's lock and another took it over since: its file is no longer the
        one at the path (a takeover renames it, and it is never renamed back)."""
        fd = self._held.get(session_id)
        return fd is not None and not _is_current(fd, self.path(session_id))

    def acquire(self, session_id: str, *, force: bool = False) -> bool:
        """Lock the session for this process; False if another process holds it.

        ``force`` takes the lock from a live holder: its lock file is removed and a new one locked, so the
        holder keeps a lock on a file nobody else opens any more.
        """
        if session_id in self._held:
            return True
        self._ensure_directory()
        path = self.path(session_id)
        for _ in range(_ATTEMPTS):
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise StoreError(f"cannot create session lock file {path}: {exc.strerror}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                if not force:
                    return False
                with contextlib.suppress(FileNotFoundError):
                    os.rename(path, path.with_name(f"{path.name}{TAKEN}{os.getpid()}-{time.time_ns()}"))
                continue
            if not _is_current(fd, path):
                os.close(fd)  # released or taken over meanwhile: try the file now at the path
                continue
            if not force and self._taken_and_alive(session_id):
                self._drop(fd, path)  # an earlier holder, taken over, still runs
                return False
            with contextlib.suppress(OSError):
                # The holder's pid, for people and other tools, written over whatever a previous holder left
                # (padded: no truncation, which would make ext4 flush the file when it is closed, ~3 ms).
                os.pwrite(fd, f"{os.getpid():<10}\n".encode(), 0)
            self._held[session_id] = fd
            return True
        return False

    def release(self, session_id: str) -> None:
        """Unlock the session and remove its lock file (the renamed one if the session was taken over)."""
        fd = self._held.pop(session_id, None)
        if fd is None:
            return
        self._drop(fd, self.path(session_id))
        self._taken_and_alive(session_id)  # removes the files of taken-over holders that have ended

    def _drop(self, fd: int, path: Path) -> None:
        """Remove the lock file ``fd`` has open (at ``path``, or renamed by a takeover), then unlock it."""
        try:
            for candidate in (path, *self._taken_files(path.name.removesuffix(".lock"))):
                if _is_current(fd, candidate):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(candidate)
                    break
        finally:
            os.close(fd)  # closing the last descriptor drops the lock

    def _taken_files(self, session_id: str) -> list[Path]:
        return sorted(self.directory.glob(f"{glob.escape(session_id)}.lock{TAKEN}*"))

    def _taken_and_alive(self, session_id: str) -> bool:
        """Whether a holder this session was taken from still runs (its renamed file is locked); the files of
        holders that have ended are removed."""
        alive = False
        for path in self._taken_files(session_id):
            if _locked_by_another(path):
                alive = True
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        return alive

    def release_all(self) -> None:
        for session_id in list(self._held):
            self.release(session_id)

    def held_elsewhere(self) -> list[str]:
        """Ids of the sessions another live process holds open now."""
        held: list[str] = []
        if not self.directory.is_dir():
            return held
        for path in sorted(self.directory.glob("*.lock*")):
            session_id = path.name.split(".lock", 1)[0]
            if session_id in held or (session_id in self._held and path == self.path(session_id)):
                continue
            if _locked_by_another(path):
                held.append(session_id)
        return held

    def _ensure_directory(self) -> None:
        if self.directory.is_dir():
            return
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(self.directory, 0o700)  # mkdir's mode is reduced by the umask
        except OSError as exc:
            raise StoreError(f"cannot create the session lock directory {self.directory}: {exc.strerror}") from None


def _locked_by_another(path: Path) -> bool:
    """Whether another process (or another descriptor of this one) holds the lock file at ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _is_current(fd: int, path: Path) -> bool:
    """Whether the open file ``fd`` is still the file at ``path``."""
    try:
        at_path = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (at_path.st_dev, at_path.st_ino) == (mine.st_dev, mine.st_ino)
