"""The memory tables, as created by their migration (``co_cli/store/db.py``).

This text is part of a migration: never change it; a later schema change is a new migration.
"""

from __future__ import annotations

SCOPES = ("user", "project")
KINDS = ("fact", "preference", "instruction")
STATUSES = ("active", "proposed", "rejected", "deleted")
ACTIONS = ("add", "update", "delete", "accept", "reject", "restore")
ACTORS = ("user", "model", "extractor")
PROPOSALS = ("add", "update", "delete")


def _check(column: str, values: tuple[str, ...]) -> str:
    return f"CHECK ({column} IN ({', '.join(repr(v) for v in values)}))"


MEMORY_SCHEMA = f"""
CREATE TABLE memories (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    text TEXT NOT NULL,
    scope TEXT NOT NULL {_check("scope", SCOPES)},
    project TEXT NOT NULL DEFAULT '',
    kind TEXT NOT NULL {_check("kind", KINDS)},
    status TEXT NOT NULL {_check("status", STATUSES)},
    source_session TEXT,
    source_seq INTEGER,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    replaced_by INTEGER,
    proposal TEXT {_check("proposal", PROPOSALS)},
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
    action TEXT NOT NULL {_check("action", ACTIONS)},
    actor TEXT NOT NULL {_check("actor", ACTORS)},
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
