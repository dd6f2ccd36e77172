"""SQLite connection for the session store: file permissions, pragmas, error mapping and migrations.

The schema version lives in ``PRAGMA user_version``; each version has one small migration function
that runs in its own ``BEGIN IMMEDIATE`` transaction, so two processes opening an old database at
once migrate it exactly once.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from co_cli.errors import StoreError
from co_cli.terminal_text import printable

BUSY_TIMEOUT_MS = 10_000
# Every commit is on disk before co goes on (the WAL is synced at each commit): a power cut loses no
# saved turn. NORMAL would sync only at checkpoints; docs/performance.md has the cost of each.
SYNCHRONOUS = "FULL"
# Text read from the database: a byte that is not UTF-8 (damage, or another program's write) becomes
# U+FFFD instead of making the whole row, and so the whole session, unreadable.
TEXT_FACTORY = functools.partial(str, encoding="utf-8", errors="replace")
MESSAGE_KINDS = ("user", "assistant", "tool-call", "tool-return", "summary", "system")
MESSAGE_STATUSES = ("ok", "failed", "cancelled")


class ReadOnlyDatabase(StoreError):
    """The database file or its directory cannot be written."""


def _kinds_check(column: str, values: tuple[str, ...]) -> str:
    return f"CHECK ({column} IN ({', '.join(repr(v) for v in values)}))"


def run_script(conn: sqlite3.Connection, script: str) -> None:
    """Run SQL statements one by one inside the caller's transaction (``executescript`` would commit it)."""
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            conn.execute(statement)
            statement = ""
    if statement.strip():
        raise ValueError(f"incomplete SQL statement: {statement.strip()[:60]}")


def _migrate_to_v1(conn: sqlite3.Connection) -> None:
    """Initial schema: sessions, the append-only transcript, compaction events and full-text search."""
    run_script(
        conn,
        f"""
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            title TEXT NOT NULL DEFAULT '',
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            model TEXT NOT NULL DEFAULT '',
            cwd TEXT NOT NULL DEFAULT '',
            parent_id TEXT,
            fork_seq INTEGER,
            message_count INTEGER NOT NULL DEFAULT 0,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            cost_usd REAL NOT NULL DEFAULT 0,
            compaction_count INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX sessions_by_updated ON sessions (updated_at DESC);

        CREATE TABLE messages (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            created_at REAL NOT NULL,
            kind TEXT NOT NULL {_kinds_check("kind", MESSAGE_KINDS)},
            text TEXT NOT NULL DEFAULT '',
            json TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'ok' {_kinds_check("status", MESSAGE_STATUSES)},
            UNIQUE (session_id, seq)
        );

        CREATE TABLE compactions (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            created_at REAL NOT NULL,
            from_seq INTEGER NOT NULL,
            upto_seq INTEGER NOT NULL,
            summary TEXT NOT NULL,
            focus TEXT,
            trigger TEXT NOT NULL {_kinds_check("trigger", ("auto", "manual"))},
            tokens_before INTEGER NOT NULL DEFAULT 0,
            tokens_after INTEGER NOT NULL DEFAULT 0,
            model TEXT NOT NULL DEFAULT '',
            replacement_json TEXT NOT NULL
        );
        CREATE INDEX compactions_by_session ON compactions (session_id, id);

        CREATE VIRTUAL TABLE messages_fts USING fts5 (
            text, content='messages', content_rowid='id', tokenize='porter unicode61'
        );
        CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts (rowid, text) VALUES (new.id, new.text);
        END;
        CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
        END;
        CREATE TRIGGER messages_fts_update AFTER UPDATE OF text ON messages BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
            INSERT INTO messages_fts (rowid, text) VALUES (new.id, new.text);
        END;
        """,
    )


def _migrate_to_v2(conn: sqlite3.Connection) -> None:
    """Open-session lock (owner pid and since when) and a lookup of a session's forks."""
    run_script(
        conn,
        """
        ALTER TABLE sessions ADD COLUMN owner_pid INTEGER;
        ALTER TABLE sessions ADD COLUMN owner_since REAL;
        CREATE INDEX sessions_by_parent ON sessions (parent_id) WHERE parent_id IS NOT NULL;
        """,
    )


def _migrate_compaction_details(conn: sqlite3.Connection) -> None:
    """What each compaction did (method, trigger detail, identifier check, cheap passes that ran), undone
    compactions, and the pinned standing instructions of a session."""
    run_script(
        conn,
        """
        ALTER TABLE compactions ADD COLUMN method TEXT NOT NULL DEFAULT 'summary';
        ALTER TABLE compactions ADD COLUMN detail TEXT NOT NULL DEFAULT '';
        ALTER TABLE compactions ADD COLUMN ledger TEXT NOT NULL DEFAULT '';
        ALTER TABLE compactions ADD COLUMN tiers TEXT NOT NULL DEFAULT '';
        ALTER TABLE compactions ADD COLUMN undone_at REAL;
        CREATE TABLE pins (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            text TEXT NOT NULL,
            source TEXT NOT NULL,
            created_at REAL NOT NULL,
            removed_at REAL
        );
        CREATE INDEX pins_by_session ON pins (session_id, id);
        """,
    )


def _migrate_trash_and_usage(conn: sqlite3.Connection) -> None:
    """The trash (when a session was deleted) and per-turn usage (tokens, requests, cost; NULL cost = unknown)."""
    run_script(
        conn,
        """
        ALTER TABLE sessions ADD COLUMN deleted_at REAL;
        CREATE INDEX sessions_in_trash ON sessions (deleted_at) WHERE deleted_at IS NOT NULL;
        CREATE TABLE turn_usage (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            created_at REAL NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('chat', 'summary', 'memory', 'title')),
            model TEXT NOT NULL DEFAULT '',
            requests INTEGER NOT NULL DEFAULT 0,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            cache_read_tokens INTEGER NOT NULL DEFAULT 0,
            cache_write_tokens INTEGER NOT NULL DEFAULT 0,
            cost_usd REAL
        );
        CREATE INDEX turn_usage_by_session ON turn_usage (session_id, id);
        CREATE INDEX turn_usage_by_time ON turn_usage (created_at);
        """,
    )


def _migrate_memories(conn: sqlite3.Connection) -> None:
    """Long-term memory: one row per memory, an append-only history of every change, full-text search, and
    the queue of turns whose facts are still to be extracted."""
    from co_cli.memory.schema import MEMORY_SCHEMA

    run_script(conn, MEMORY_SCHEMA)


# MIGRATIONS[i] brings a database from version i to version i + 1.
MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    _migrate_to_v1,
    _migrate_to_v2,
    _migrate_compaction_details,
    _migrate_memories,
    _migrate_trash_and_usage,
)
SCHEMA_VERSION = len(MIGRATIONS)


def store_error(exc: sqlite3.Error, path: Path) -> StoreError:
    """Turn a sqlite3 error into a one-line StoreError that names the file and what to do."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc)
    if name.startswith("SQLITE_FULL") or "disk is full" in text:
        return StoreError(f"cannot write session database {path}: the disk is full; free some space and retry")
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


@contextlib.contextmanager
def translated_errors(path: Path) -> Iterator[None]:
    """Re-raise any sqlite3 error inside the block as a StoreError."""
    try:
        yield
    except sqlite3.Error as exc:
        raise store_error(exc, path) from exc


@contextlib.contextmanager
def write_transaction(conn: sqlite3.Connection, path: Path) -> Iterator[sqlite3.Connection]:
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


def _newer_co(path: Path, version: int) -> StoreError:
    return StoreError(
        f"session database {path} was written by a newer co (schema {version}, this co knows "
        f"{SCHEMA_VERSION}); upgrade co"
    )


def migrate(conn: sqlite3.Connection, path: Path) -> int:
    """Bring the schema to SCHEMA_VERSION, one version per transaction; return the final version."""
    version = _schema_version(conn)
    if version > SCHEMA_VERSION:
        raise _newer_co(path, version)
    while version < SCHEMA_VERSION:
        with write_transaction(conn, path):
            version = _schema_version(conn)  # another process may have migrated meanwhile
            if version >= SCHEMA_VERSION:
                break
            if version == 0 and not _looks_like_co_db(conn):
                raise StoreError(
                    f"{path} is an SQLite database that co did not create; move it aside "
                    "or set CO_CLI_DATA_DIR to another directory"
                )
            MIGRATIONS[version](conn)
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


def _open(target: str | Path, *, uri: bool = False) -> sqlite3.Connection:
    conn = sqlite3.connect(
        target, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False, uri=uri
    )
    conn.text_factory = TEXT_FACTORY
    return conn


def _connect_read_write(path: Path) -> sqlite3.Connection:
    _prepare_file(path)
    try:
        conn = _open(path)
    except sqlite3.Error as exc:
        raise store_error(exc, path) from exc
    try:
        with translated_errors(path):
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            # Reading the schema first fails fast on a file that is not a database at all.
            conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()
            if _schema_version(conn) > SCHEMA_VERSION:
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
            conn = _open(f"{base}?{query}", uri=True)
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
        if version > SCHEMA_VERSION or version == 0:
            conn.close()
            if version == 0:
                raise StoreError(f"session database {path} is read-only and is not a co database yet")
            raise _newer_co(path, version)
        conn.execute("PRAGMA query_only = ON")
        return conn
    assert failure is not None
    raise store_error(failure, path) from failure
