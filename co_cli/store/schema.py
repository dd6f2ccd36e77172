"""The schema of the session database: its words, and the migrations that build it one version at a time.

The schema version lives in ``PRAGMA user_version``; ``MIGRATIONS[i]`` brings a database from version ``i`` to
``i + 1`` (``co_cli.store.db.migrate`` runs each in its own transaction). The text of a migration is never
changed once released: a later schema change is a new migration.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

MESSAGE_KINDS = ("user", "assistant", "tool-call", "tool-return", "summary", "system")
MESSAGE_STATUSES = ("ok", "failed", "cancelled")

MEMORY_SCOPES = ("user", "project")
MEMORY_KINDS = ("fact", "preference", "instruction")
MEMORY_STATUSES = ("active", "proposed", "rejected", "deleted")
MEMORY_ACTIONS = ("add", "update", "delete", "accept", "reject", "restore")
MEMORY_ACTORS = ("user", "model", "extractor")
MEMORY_PROPOSALS = ("add", "update", "delete")
MEMORY_SUBJECTS = ("user", "other")
"""Whom a memory is about (``about``): the user, or another person (``person`` names them); NULL: not known
(memories made before extraction read subjects, or by the user's own commands)."""


def _kinds_check(column: str, values: tuple[str, ...]) -> str:
    return f"CHECK ({column} IN ({', '.join(repr(v) for v in values)}))"


# The memory tables, as their migration creates them.
MEMORY_SCHEMA = f"""
CREATE TABLE memories (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    text TEXT NOT NULL,
    scope TEXT NOT NULL {_kinds_check("scope", MEMORY_SCOPES)},
    project TEXT NOT NULL DEFAULT '',
    kind TEXT NOT NULL {_kinds_check("kind", MEMORY_KINDS)},
    status TEXT NOT NULL {_kinds_check("status", MEMORY_STATUSES)},
    source_session TEXT,
    source_seq INTEGER,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    replaced_by INTEGER,
    proposal TEXT {_kinds_check("proposal", MEMORY_PROPOSALS)},
    target_id INTEGER
);
CREATE INDEX memories_by_status ON memories (status, scope, project);
CREATE INDEX memories_by_kind ON memories (kind, status);

CREATE TABLE memory_events (
    id INTEGER PRIMARY KEY,
    change_id INTEGER NOT NULL,
    undoes INTEGER,
    memory_id INTEGER NOT NULL,
    at REAL NOT NULL,
    action TEXT NOT NULL {_kinds_check("action", MEMORY_ACTIONS)},
    actor TEXT NOT NULL {_kinds_check("actor", MEMORY_ACTORS)},
    old_text TEXT,
    new_text TEXT,
    old_status TEXT,
    new_status TEXT,
    old_replaced_by INTEGER,
    new_replaced_by INTEGER,
    old_meta TEXT,
    new_meta TEXT
);
CREATE INDEX memory_events_by_change ON memory_events (change_id);

CREATE VIRTUAL TABLE memories_fts USING fts5 (
    text, content='memories', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF text ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
    INSERT INTO memories_fts (rowid, text) VALUES (new.id, new.text);
END;

CREATE TABLE memory_queue (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    text TEXT NOT NULL,
    project TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    claimed_at REAL,
    attempts INTEGER NOT NULL DEFAULT 0
);
"""


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
    _v1_sessions_and_messages(conn)
    _v1_compactions_and_search(conn)


def _v1_sessions_and_messages(conn: sqlite3.Connection) -> None:
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
        """,
    )


def _v1_compactions_and_search(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        f"""
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
    run_script(conn, MEMORY_SCHEMA)


def _migrate_tasks_and_tool_calls(conn: sqlite3.Connection) -> None:
    """The session's task list, one snapshot per change (the list as it stood after message ``seq``), and one
    row per tool call (its outcome and how long it ran)."""
    run_script(
        conn,
        """
        CREATE TABLE task_lists (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            created_at REAL NOT NULL,
            source TEXT NOT NULL CHECK (source IN ('model', 'user')),
            items TEXT NOT NULL
        );
        CREATE INDEX task_lists_by_session ON task_lists (session_id, id);
        CREATE TABLE tool_calls (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            created_at REAL NOT NULL,
            tool TEXT NOT NULL,
            outcome TEXT NOT NULL CHECK (outcome IN ('ok', 'failed', 'denied')),
            seconds REAL NOT NULL DEFAULT 0
        );
        CREATE INDEX tool_calls_by_session ON tool_calls (session_id, id);
        CREATE INDEX tool_calls_by_time ON tool_calls (created_at);
        """,
    )


def _migrate_session_origin(conn: sqlite3.Connection) -> None:
    """Where each session was started: the terminal, or `co serve` (sessions made before were all the
    terminal's)."""
    run_script(conn, "ALTER TABLE sessions ADD COLUMN origin TEXT NOT NULL DEFAULT 'terminal';")


def _migrate_turn_memories(conn: sqlite3.Connection) -> None:
    """The memories each turn's requests were sent: one row per memory (its id, kind and text as sent), filed
    under the seq of the turn's prompt."""
    run_script(
        conn,
        """
        CREATE TABLE turn_memories (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            created_at REAL NOT NULL,
            memory_id INTEGER NOT NULL,
            kind TEXT NOT NULL,
            text TEXT NOT NULL
        );
        CREATE INDEX turn_memories_by_session ON turn_memories (session_id, id);
        """,
    )


def _migrate_memory_subjects(conn: sqlite3.Connection) -> None:
    """What extraction read of a memory: its topic key (``home_city``), whom it is about (the user or another
    person, and that person's name), and for a proposal that word cues suggested when no model answer could be
    read, which cue (such a proposal is never applied on its own). NULL for every memory made before."""
    run_script(
        conn,
        f"""
        ALTER TABLE memories ADD COLUMN topic TEXT;
        ALTER TABLE memories ADD COLUMN about TEXT {_kinds_check("about", MEMORY_SUBJECTS)};
        ALTER TABLE memories ADD COLUMN person TEXT;
        ALTER TABLE memories ADD COLUMN cue TEXT;
        CREATE INDEX memories_by_topic ON memories (topic, status) WHERE topic IS NOT NULL;
        """,
    )


def _migrate_file_changes(conn: sqlite3.Connection) -> None:
    """What co's edit tools changed: one row per change (the file's path, its content before and after, by
    hash), filed under the seq of the turn's prompt; each content once in ``file_contents``."""
    run_script(
        conn,
        """
        CREATE TABLE file_contents (
            hash TEXT PRIMARY KEY,
            data BLOB NOT NULL
        );
        CREATE TABLE file_changes (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            created_at REAL NOT NULL,
            path TEXT NOT NULL,
            tool TEXT NOT NULL,
            before_hash TEXT,
            after_hash TEXT
        );
        CREATE INDEX file_changes_by_session ON file_changes (session_id, id);
        """,
    )


def _migrate_readings(conn: sqlite3.Connection) -> None:
    """What the model read in each of the user's messages: its rules, changes and next steps as the user's
    sentences (a JSON list, empty when it held none), filed under the message's seq with the message's text."""
    run_script(
        conn,
        """
        CREATE TABLE readings (
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            created_at REAL NOT NULL,
            text TEXT NOT NULL,
            parts TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        );
        """,
    )


# MIGRATIONS[i] brings a database from version i to version i + 1.
MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    _migrate_to_v1,
    _migrate_to_v2,
    _migrate_compaction_details,
    _migrate_memories,
    _migrate_trash_and_usage,
    _migrate_tasks_and_tool_calls,
    _migrate_session_origin,
    _migrate_turn_memories,
    _migrate_memory_subjects,
    _migrate_file_changes,
    _migrate_readings,
)
SCHEMA_VERSION = len(MIGRATIONS)
