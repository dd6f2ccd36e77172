"""The door to the session database: one SQLite connection, the lock every use of it holds, and the file's
permissions, pragmas, error mapping and migrations.

``Database`` is how every table module runs its SQL: ``read``/``read_one`` for queries and ``transaction()`` for
writes. Rows come back as ``sqlite3.Row``, read by column name. The migrations themselves are in
``co_cli.store.schema``; each runs here in its own ``BEGIN IMMEDIATE`` transaction, so two processes opening an
old database at once migrate it exactly once.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from co_cli.errors import StoreError
from co_cli.store import schema
from co_cli.store.lockfiles import SessionLocks, lock_directory
from co_cli.terminal_text import printable

BUSY_TIMEOUT_MS = 10_000
STOP_CHECK_STEPS = 10_000
"""SQLite virtual-machine steps between two looks at a query's stop flag (well under a millisecond)."""
# Every commit is on disk before co goes on (the WAL is synced at each commit): a power cut loses no
# saved turn. NORMAL would sync only at checkpoints; docs/performance.md has the cost of each.
SYNCHRONOUS = "FULL"
# Text read from the database: a byte that is not UTF-8 (damage, or another program's write) becomes
# U+FFFD instead of making the whole row, and so the whole session, unreadable.
TEXT_FACTORY = functools.partial(str, encoding="utf-8", errors="replace")


class ReadOnlyDatabase(StoreError):
    """The database file or its directory cannot be written."""


def store_error(exc: sqlite3.Error, path: Path) -> StoreError:
    """Turn a sqlite3 error into a one-line StoreError that names the file and what to do."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc)
    if (
        name.startswith("SQLITE_FULL")
        or "disk is full" in text
        or ((name.startswith("SQLITE_IOERR") or "disk I/O error" in text) and _disk_nearly_full(path))
    ):
        return StoreError(
            f"cannot write session database {path}: the disk is full{_free_space(path)}; nothing of this change "
            "was saved and everything saved before is intact; free some space and retry"
        )
    if name.startswith("SQLITE_READONLY") or "readonly" in text:
        return ReadOnlyDatabase(
            f"session database {path} is read-only; make the file and its directory writable "
            "or set CO_CLI_DATA_DIR to another directory"
        )
    if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")) or "not a database" in text or "malformed" in text:
        return StoreError(
            f"session database {path} is corrupt or not a co database; `co sessions recover` saves what "
            "can still be read into a new database (the damaged file is kept)"
        )
    if _is_busy(exc):
        return StoreError(f"session database {path} stayed locked by another process; retry in a moment")
    if name.startswith("SQLITE_CANTOPEN"):
        return StoreError(f"cannot open session database {path}; check that its directory exists and is writable")
    if "decode" in text:  # sqlite3's decoding errors quote the stored text: never echo it
        return StoreError(f"session database {path} holds text that is not UTF-8; `co sessions recover` can repair it")
    return StoreError(f"session database {path} failed: {' '.join(printable(text).split())[:200]}")


DISK_NEARLY_FULL_BYTES = 4 * 1024 * 1024
"""Free space under which an I/O error writing the database is taken for a full disk (SQLite often reports
one as "disk I/O error" when its log or shared-memory file cannot grow)."""


def _free_bytes(path: Path) -> int | None:
    try:
        status = os.statvfs(path.parent)
    except OSError:
        return None
    return status.f_bavail * status.f_frsize


def _disk_nearly_full(path: Path) -> bool:
    free = _free_bytes(path)
    return free is not None and free < DISK_NEARLY_FULL_BYTES


def _free_space(path: Path) -> str:
    free = _free_bytes(path)
    return "" if free is None else f" ({free // 1024:,} KB free)"


@contextlib.contextmanager
def translated_errors(path: Path) -> Iterator[None]:
    """Re-raise any sqlite3 error inside the block as a StoreError."""
    try:
        yield
    except sqlite3.Error as exc:
        raise store_error(exc, path) from exc


@contextlib.contextmanager
def _write_transaction(conn: sqlite3.Connection, path: Path) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; rolls back on any error and maps sqlite3 errors to StoreError."""
    with translated_errors(path):
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")


def _prepare_file(path: Path) -> None:
    """Create the parent dir (0700) and the database file (0600) before SQLite touches them."""
    if not path.parent.exists():
        try:
            path.parent.mkdir(parents=True, mode=0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise StoreError(
                f"cannot create directory {path.parent} for the session database: {exc.strerror}"
            ) from None
    if path.exists():
        if not path.is_file():
            raise StoreError(f"session database {path} is not a regular file; move it aside")
        if not os.access(path, os.R_OK | os.W_OK):
            raise ReadOnlyDatabase(
                f"session database {path} is read-only; make it writable (chmod u+rw) "
                "or set CO_CLI_DATA_DIR to another directory"
            )
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            with contextlib.suppress(OSError):
                os.chmod(path, mode & 0o700)
        return
    try:
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot create session database {path}: {exc.strerror}") from None
    os.close(fd)


def _schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _looks_like_co_db(conn: sqlite3.Connection) -> bool:
    """A version-0 database must be empty: anything else was not made by co."""
    return conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0] == 0


def newer_co_error(path: Path, version: int) -> StoreError:
    return StoreError(
        f"session database {path} was written by a newer co (schema {version}, this co knows "
        f"{schema.SCHEMA_VERSION}); upgrade co"
    )


def migrate(conn: sqlite3.Connection, path: Path) -> int:
    """Bring the schema to SCHEMA_VERSION, one version per transaction; return the final version."""
    version = _schema_version(conn)
    if version > schema.SCHEMA_VERSION:
        raise newer_co_error(path, version)
    while version < schema.SCHEMA_VERSION:
        with _write_transaction(conn, path):
            version = _schema_version(conn)  # another process may have migrated meanwhile
            if version >= schema.SCHEMA_VERSION:
                break
            if version == 0 and not _looks_like_co_db(conn):
                raise StoreError(
                    f"{path} is an SQLite database that co did not create; move it aside "
                    "or set CO_CLI_DATA_DIR to another directory"
                )
            schema.MIGRATIONS[version](conn)
            version += 1
            conn.execute(f"PRAGMA user_version = {version}")
    return version


def _is_busy(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in str(exc)


def _enable_wal(conn: sqlite3.Connection, path: Path) -> None:
    """Switch to write-ahead logging once per file.

    The switch needs an exclusive lock and SQLite does not always wait for it through the busy
    handler (two processes opening a new file at once), so it is retried here until the timeout.
    """
    if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
        return
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            break
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() > deadline:
                raise
            time.sleep(random.uniform(0.005, 0.05))
    if str(mode).lower() != "wal":
        raise StoreError(f"session database {path} cannot use write-ahead logging (journal mode {mode})")


def _writable(path: Path) -> bool:
    """Whether SQLite can write ``path`` in WAL mode (the file, and the directory for its -wal and -shm files)."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)


def connect(path: Path, *, reads_only: bool = False) -> sqlite3.Connection:
    """Open (creating if needed) and migrate the session database; raise StoreError on any problem.

    ``reads_only`` (for commands that only read): an existing database that cannot be written (a backup,
    read-only media) is opened read-only instead of refused; any write through it then fails with the
    read-only error.
    """
    path = Path(path).expanduser()
    if reads_only and path.is_file() and not _writable(path):
        return _connect_read_only(path)
    try:
        return _connect_read_write(path)
    except ReadOnlyDatabase:
        if reads_only and path.is_file():
            return _connect_read_only(path)
        raise


def open_connection(target: str | Path, *, uri: bool = False) -> sqlite3.Connection:
    """A plain connection (autocommit, usable from any thread, rows by name, text decoded leniently), without
    the file checks and migrations of ``connect``: also for a long read in another thread that must not hold
    the shared connection's lock."""
    conn = sqlite3.connect(
        target, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False, uri=uri
    )
    conn.text_factory = TEXT_FACTORY
    conn.row_factory = sqlite3.Row
    return conn


def _connect_read_write(path: Path) -> sqlite3.Connection:
    _prepare_file(path)
    try:
        conn = open_connection(path)
    except sqlite3.Error as exc:
        raise store_error(exc, path) from exc
    try:
        with translated_errors(path):
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            # Reading the schema first fails fast on a file that is not a database at all.
            conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()
            if _schema_version(conn) > schema.SCHEMA_VERSION:
                migrate(conn, path)  # raises the "newer co" error before anything is written
            _enable_wal(conn, path)
            conn.execute(f"PRAGMA synchronous = {SYNCHRONOUS}")
            conn.execute("PRAGMA foreign_keys = ON")
            migrate(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """Open an existing database without writing anything, not even its -wal and -shm files.

    ``mode=ro`` still reads a write-ahead log left next to the file; when SQLite cannot use it (no -shm
    file and a read-only directory) ``immutable=1`` reads the main file alone.
    """
    base = path.resolve().as_uri()
    failure: sqlite3.Error | None = None
    for query in ("mode=ro", "mode=ro&immutable=1"):
        try:
            conn = open_connection(f"{base}?{query}", uri=True)
        except sqlite3.Error as exc:
            failure = exc
            continue
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()
            version = _schema_version(conn)
        except sqlite3.Error as exc:
            conn.close()
            failure = exc
            continue
        if version > schema.SCHEMA_VERSION or version == 0:
            conn.close()
            if version == 0:
                raise StoreError(f"session database {path} is read-only and is not a co database yet")
            raise newer_co_error(path, version)
        conn.execute("PRAGMA query_only = ON")
        return conn
    assert failure is not None
    raise store_error(failure, path) from failure


class Reader(Protocol):
    """What runs a query: the ``Database`` itself, or an open ``Transaction`` (which sees its own writes)."""

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]: ...

    def read_one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None: ...


class Transaction:
    """The statements of one write transaction (``Database.transaction``): they commit together or not at all.

    The table modules' statement-level writes take one, so a caller can put writes to several tables (a whole
    turn: its messages, usage, compaction, pins and queue item) into a single commit."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self._conn.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> sqlite3.Cursor:
        return self._conn.executemany(sql, rows)

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return self._conn.execute(sql, params).fetchall()

    def read_one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self._conn.execute(sql, params).fetchone()
        return row


class Database:
    """One open session database. Safe to share between threads (one lock serialises every use of the
    connection); many processes may use one file (SQLite's own locking, WAL, ``BEGIN IMMEDIATE``)."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path
        self.lock = threading.RLock()
        """Held by every read and transaction; hold it also across steps no other thread may come between."""
        self.lock_files = SessionLocks(lock_directory(path))
        """The sessions this process holds open (``co_cli.store.locks``); released when the database closes."""

    @classmethod
    def open(cls, path: Path, *, reads_only: bool = False) -> Database:
        """Open (creating and migrating if needed); ``reads_only`` opens a database that cannot be written
        read-only instead of refusing it (see ``connect``)."""
        path = Path(path).expanduser()
        return cls(connect(path, reads_only=reads_only), path)

    def close(self) -> None:
        with self.lock:
            self.lock_files.release_all()
            self._conn.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read(
        self, sql: str, params: Sequence[Any] = (), *, stop: Callable[[], bool] | None = None
    ) -> list[sqlite3.Row]:
        """Every row of a query (StoreError on any database error). A long query ends (StoreError) soon after
        ``stop()`` turns true: a search abandoned by a cancelled turn does not hold the connection's lock."""
        with self.lock, translated_errors(self.path):
            if stop is None:
                return self._conn.execute(sql, params).fetchall()
            self._conn.set_progress_handler(lambda: int(stop()), STOP_CHECK_STEPS)
            try:
                return self._conn.execute(sql, params).fetchall()
            finally:
                self._conn.set_progress_handler(None, 0)

    def read_one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        """The first row of a query, or None."""
        with self.lock, translated_errors(self.path):
            row: sqlite3.Row | None = self._conn.execute(sql, params).fetchone()
            return row

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` under the lock: ROLLBACK on any error, sqlite3 errors raised as
        StoreError."""
        with self.lock, _write_transaction(self._conn, self.path) as conn:
            yield Transaction(conn)

    def integrity_ok(self) -> bool:
        """SQLite's integrity check and the full-text index's own check both pass."""
        with self.lock:
            try:
                result = self._conn.execute("PRAGMA integrity_check").fetchall()
                if [tuple(row) for row in result] != [("ok",)]:
                    return False
                self._conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")
            except sqlite3.DatabaseError:
                return False
        return True

    def reclaim_space(self) -> bool:
        """Merge the search index (dropping deleted entries for good) and VACUUM the file; False if another
        process kept the database busy (the space is then reused by later writes instead)."""
        with self.lock:
            try:
                with translated_errors(self.path):
                    self._conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('optimize')")
                    self._conn.execute("VACUUM")
                    # In WAL mode the vacuumed pages sit in the log: copy them back so the file itself shrinks.
                    self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            except StoreError:
                return False
        return True
