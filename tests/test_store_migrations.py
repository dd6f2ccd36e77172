"""Schema migrations: from an empty file and from every earlier schema version."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import time
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelRequest, ModelResponse, TextPart, UserPromptPart

from co_cli.errors import StoreError
from co_cli.store import Store
from co_cli.store import schema as schema_module
from co_cli.store.memories import Subject
from co_cli.store.schema import MIGRATIONS, SCHEMA_VERSION, run_script

# The version-1 schema exactly as the first release wrote it; never change this text.
V1_SCHEMA = """
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
    kind TEXT NOT NULL CHECK (kind IN ('user', 'assistant', 'tool-call', 'tool-return', 'summary', 'system')),
    text TEXT NOT NULL DEFAULT '',
    json TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'ok' CHECK (status IN ('ok', 'failed', 'cancelled')),
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
    trigger TEXT NOT NULL CHECK (trigger IN ('auto', 'manual')),
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
PRAGMA user_version = 1;
"""

OLD_ID = "0190000000000abcdef0"


def _one(message: object) -> str:
    return ModelMessagesTypeAdapter.dump_json([message]).decode()  # type: ignore[list-item]


def _insert_old_session(conn: sqlite3.Connection) -> None:
    """A session with two messages and a compaction, written the way version 1 wrote them."""
    conn.execute(
        "INSERT INTO sessions (id, title, created_at, updated_at, model, cwd, message_count, compaction_count) "
        "VALUES (?, 'old talk', 1700000000, 1700000100, 'test', '/old', 2, 1)",
        (OLD_ID,),
    )
    rows = [
        (0, "user", "where is the kestrel config", _one(ModelRequest(parts=[UserPromptPart("where is it")]))),
        (1, "assistant", "in kestrel.toml", _one(ModelResponse(parts=[TextPart("in kestrel.toml")]))),
    ]
    conn.executemany(
        "INSERT INTO messages (session_id, seq, created_at, kind, text, json, status) "
        "VALUES (?, ?, 1700000050, ?, ?, ?, 'ok')",
        [(OLD_ID, *row) for row in rows],
    )
    conn.execute(
        "INSERT INTO compactions (session_id, created_at, from_seq, upto_seq, summary, focus, trigger, "
        "tokens_before, tokens_after, model, replacement_json) "
        "VALUES (?, 1700000090, 0, 1, 'asked about config', NULL, 'auto', 100, 10, 'test', '[]')",
        (OLD_ID,),
    )


def _build_at_version(path: Path, version: int) -> None:
    """A database at ``version`` built with the migrations up to it (0 = an empty file)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    for migration in MIGRATIONS[:version]:
        migration(conn)
    conn.execute(f"PRAGMA user_version = {version}")
    if version >= 1:
        _insert_old_session(conn)
    conn.execute("COMMIT")
    conn.close()


def _schema(path: Path) -> set[tuple[str, str]]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT type, name FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'").fetchall()
        columns = {
            ("column", f"{table}.{r[1]}")
            for table in ("sessions", "memories")
            for r in conn.execute(f"PRAGMA table_info({table})")
        }
    finally:
        conn.close()
    return set(rows) | columns


def _user_version(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def _exercise(store: Store) -> None:
    """Everything a current co does must work on the migrated file."""
    sid = store.sessions.create(model="test", cwd="/", title="new").id
    seq = store.messages.begin_turn(sid, "kestrel question")
    store.messages.finish_turn(sid, seq, [ModelResponse(parts=[TextPart("kestrel answer")])])
    store.locks.acquire(sid)
    store.locks.release(sid)
    fork = store.fork(sid)
    assert store.sessions.get(fork.id).message_count == 2
    assert store.db.integrity_ok()


def test_empty_file_gets_the_current_schema(tmp_path: Path) -> None:
    path = tmp_path / "co.db"
    path.touch()
    with Store.open(path) as store:
        _exercise(store)
    assert _user_version(path) == SCHEMA_VERSION


def test_hand_built_version_1_database_migrates_and_keeps_its_data(tmp_path: Path) -> None:
    path = tmp_path / "co.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(V1_SCHEMA)
    conn.execute("BEGIN")
    _insert_old_session(conn)
    conn.execute("COMMIT")
    conn.close()
    fresh = tmp_path / "fresh.db"
    Store.open(fresh).close()
    with Store.open(path) as store:
        old = store.sessions.get(OLD_ID)
        assert (old.title, old.message_count, old.compaction_count) == ("old talk", 2, 1)
        assert [m.text for m in store.messages.transcript(OLD_ID)] == ["where is the kestrel config", "in kestrel.toml"]
        assert {h.seq for h in store.search.messages("kestrel", session_id=OLD_ID)} == {0, 1}
        latest = store.compactions.latest(OLD_ID)
        assert latest is not None and latest.summary == "asked about config"
        store.locks.acquire(OLD_ID)
        _exercise(store)
    assert _user_version(path) == SCHEMA_VERSION
    assert _schema(path) == _schema(fresh)


@pytest.mark.parametrize("version", range(SCHEMA_VERSION + 1))
def test_every_earlier_version_migrates_to_the_current_schema(tmp_path: Path, version: int) -> None:
    path = tmp_path / "co.db"
    _build_at_version(path, version)
    fresh = tmp_path / "fresh.db"
    Store.open(fresh).close()
    with Store.open(path) as store:
        if version >= 1:
            assert store.sessions.get(OLD_ID).message_count == 2
            assert store.search.messages("kestrel")
        _exercise(store)
    assert _user_version(path) == SCHEMA_VERSION
    assert _schema(path) == _schema(fresh)


def test_memories_made_before_topics_and_subjects_migrate_without_them(tmp_path: Path) -> None:
    path = tmp_path / "co.db"
    before = MIGRATIONS.index(schema_module._migrate_memory_subjects)
    _build_at_version(path, before)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(
        "INSERT INTO memories (text, scope, project, kind, status, created_at, updated_at) "
        "VALUES ('The user prefers tabs', 'user', '', 'preference', 'active', 1700000000, 1700000000)"
    )
    conn.close()
    with Store.open(path) as store:
        [old] = store.memories.list()
        assert (old.text, old.topic, old.about, old.person, old.cue) == (
            "The user prefers tabs",
            None,
            None,
            None,
            None,
        )
        assert store.memories.search(["tabs"], project=None)[0].memory == old
        new = store.memories.add("Ich wohne in Graz", actor="extractor", subject=Subject("home_city", "user"))
        assert store.memories.with_topics(["home_city"], None) == [new]


def test_failed_migration_leaves_the_previous_version_intact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "co.db"
    _build_at_version(path, 1)

    def broken(conn: sqlite3.Connection) -> None:
        run_script(conn, "ALTER TABLE sessions ADD COLUMN half_done INTEGER;")
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(schema_module, "MIGRATIONS", (MIGRATIONS[0], broken))
    with pytest.raises(StoreError, match=str(path)):
        Store.open(path)
    assert _user_version(path) == 1
    conn = sqlite3.connect(path)
    columns = {row[1] for row in conn.execute("PRAGMA table_info(sessions)")}
    conn.close()
    assert "half_done" not in columns
    monkeypatch.undo()
    with Store.open(path) as store:
        assert store.sessions.get(OLD_ID).title == "old talk"
    assert _user_version(path) == SCHEMA_VERSION


def test_every_version_has_one_migration() -> None:
    assert SCHEMA_VERSION == len(MIGRATIONS) >= 2
    assert all(m.__doc__ for m in MIGRATIONS)


def _open_and_create(path: str, start: float) -> None:
    while time.time() < start:
        time.sleep(0.001)
    with Store.open(Path(path)) as store:
        store.sessions.create(model="test", cwd="/", title=f"from {os.getpid()}")


@pytest.mark.parametrize("version", [0, 1])
def test_processes_opening_an_old_database_at_once_migrate_it_once(tmp_path: Path, version: int) -> None:
    path = tmp_path / "co.db"
    if version:
        _build_at_version(path, version)
    ctx = multiprocessing.get_context("fork")
    start = time.time() + 0.3
    procs = [ctx.Process(target=_open_and_create, args=(str(path), start)) for _ in range(8)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=60)
    assert [proc.exitcode for proc in procs] == [0] * 8
    assert _user_version(path) == SCHEMA_VERSION
    with Store.open(path) as store:
        assert tuple(store.db.read_one("SELECT count(*) FROM sessions")) == (8 + (1 if version else 0),)
        assert store.db.integrity_ok()
