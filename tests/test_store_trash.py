"""The trash: deleting hides a session and keeps it whole; restore brings it back; purge removes every trace."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from co_cli.errors import SessionBusy, SessionNotFound
from co_cli.store import CompactionRecord, Store
from co_cli.store.lockfiles import SessionLocks
from co_cli.store.usage import TurnUsage


def turn(prompt: str, answer: str) -> list[ModelMessage]:
    return [ModelRequest(parts=[UserPromptPart(prompt)]), ModelResponse(parts=[TextPart(answer)], model_name="test")]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "data" / "co-cli.db") as opened:
        yield opened


def saved_session(store: Store, word: str, turns: int = 2) -> str:
    sid = store.sessions.create(model="test", cwd="/work", title=f"about {word}").id
    for i in range(turns):
        seq = store.messages.begin_turn(sid, f"tell me about {word} {i}")
        store.messages.finish_turn(
            sid, seq, turn(f"tell me about {word} {i}", f"{word} is fine {i}"), usage=TurnUsage(requests=1)
        )
    summary: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(f"summary of {word}")])]
    store.compactions.add(sid, CompactionRecord(0, 1, f"summary {word}", None, "auto", 10, 5, "test", summary))
    return sid


def fts_terms(store: Store) -> set[str]:
    """Every term the full-text index holds (fts5vocab reads the index itself, not the content table)."""
    conn = sqlite3.connect(store.path)
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, messages_fts, row)")
        return {row[0] for row in conn.execute("SELECT term FROM temp.vocab")}
    finally:
        conn.close()


def test_trash_hides_everywhere_and_restore_brings_it_back_unchanged(store: Store) -> None:
    keep = saved_session(store, "pelican")
    doomed = saved_session(store, "albatross")
    before = (
        store.sessions.get(doomed),
        [(m.seq, m.text) for m in store.messages.transcript(doomed)],
        store.compactions.list(doomed),
    )
    store.trash.put(doomed)
    assert [s.id for s in store.sessions.list()] == [keep] and store.sessions.count() == 1
    assert store.sessions.latest() is not None and store.sessions.latest().id == keep  # type: ignore[union-attr]
    assert store.search.messages("albatross") == []
    with pytest.raises(SessionNotFound, match="in the trash"):
        store.sessions.get(doomed)
    [(info, deleted_at)] = store.trash.list()
    assert info.id == doomed and abs(deleted_at - time.time()) < 60
    assert "albatross" in fts_terms(store)  # kept whole while in the trash
    store.trash.restore(store.sessions.get(doomed, trashed=True).id)
    after = (
        store.sessions.get(doomed),
        [(m.seq, m.text) for m in store.messages.transcript(doomed)],
        store.compactions.list(doomed),
    )
    assert after == before
    assert {h.session_id for h in store.search.messages("albatross")} == {doomed}


def test_purge_leaves_no_row_search_entry_usage_or_file(store: Store, tmp_path: Path) -> None:
    keep = saved_session(store, "pelican")
    doomed = saved_session(store, "albatross", turns=200)
    files = tmp_path / "outputs"
    (files / doomed).mkdir(parents=True)
    (files / doomed / "call-1.txt").write_text("offloaded albatross output")
    pages_before = store.db.read("PRAGMA page_count")[0][0]
    store.trash.put(doomed)
    with pytest.raises(SessionNotFound):
        store.trash.purge([keep], files_root=files)  # only from the trash
    assert store.trash.purge([doomed], files_root=files) == 1
    for table, column in (("sessions", "id"), ("messages", "session_id"), ("compactions", "session_id")):
        assert store.db.read(f"SELECT count(*) FROM {table} WHERE {column} = ?", (doomed,))[0][0] == 0
    assert store.db.read("SELECT count(*) FROM turn_usage WHERE session_id = ?", (doomed,))[0][0] == 0
    assert store.usage.totals([doomed]) == {}
    assert "albatross" not in fts_terms(store) and "pelican" in fts_terms(store)
    assert store.db.read("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'albatross'")[0][0] == 0
    assert not (files / doomed).exists()
    assert store.db.integrity_ok()
    pages_after = store.db.read("PRAGMA page_count")[0][0]
    assert pages_after < pages_before  # the space is given back to the file system
    assert store.path.stat().st_size == pages_after * store.db.read("PRAGMA page_size")[0][0]
    assert [s.id for s in store.sessions.list()] == [keep]


def test_nothing_is_purged_by_age_unless_retention_is_set(store: Store) -> None:
    old = saved_session(store, "old")
    recent = saved_session(store, "recent")
    store.trash.put(old)
    store.trash.put(recent)
    with store.db.transaction() as tx:
        tx.execute("UPDATE sessions SET deleted_at = ? WHERE id = ?", (time.time() - 40 * 86400, old))
    assert store.trash.purge_expired(0) == 0
    assert {info.id for info, _ in store.trash.list()} == {old, recent}
    assert store.trash.purge_expired(30) == 1
    assert [info.id for info, _ in store.trash.list()] == [recent]


def test_a_session_open_in_another_process_is_not_trashed(store: Store) -> None:
    sid = saved_session(store, "busy")
    other = SessionLocks(store.path.parent / f"{store.path.name}.locks")  # another open file: another holder
    assert other.acquire(sid)
    try:
        assert store.locks.open_elsewhere() == {sid}
        with pytest.raises(SessionBusy):
            store.trash.put(sid)
        assert store.sessions.get(sid).id == sid
    finally:
        other.release(sid)
    store.trash.put(sid)
    assert store.trash.list()[0][0].id == sid
