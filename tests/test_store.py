"""Store: saving turns, loading, forking, listing, searching, deleting, locking and failure modes."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from co_cli.context.repair import repair_orphans
from co_cli.errors import CoError, SessionNotFound, StoreError
from co_cli.store import CompactionRecord, SessionBusy, Store
from co_cli.store import sessions as sessions_module
from co_cli.store.db import store_error
from co_cli.store.export import export_json, export_markdown, import_json
from co_cli.store.schema import SCHEMA_VERSION
from co_cli.store.search import SNIPPET_CLOSE, SNIPPET_OPEN, fts_query
from co_cli.store.sessions import new_session_id

NASTY_QUERIES = [
    '"',
    "'",
    '""',
    "AND",
    "OR NOT",
    "NOT",
    "NEAR(a b, 2)",
    "*",
    "foo*",
    "(",
    ")",
    "((",
    ":",
    "text:foo",
    "^",
    "-",
    "+",
    '"unterminated',
    "a\x00b",
    "",
    "   ",
    "🙂",
    'a"b',
    "'; DROP TABLE sessions; --",
    "{}[]",
    ".",
    "\\",
    "%_",
    "a OR b AND (c",
    "\udcff undecodable",
]


def dump(messages: list[ModelMessage]) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(messages)


def text_turn(prompt: str, answer: str) -> list[ModelMessage]:
    return [
        ModelRequest(parts=[SystemPromptPart("be brief"), UserPromptPart(prompt)]),
        ModelResponse(parts=[TextPart(answer)], model_name="test"),
    ]


def tool_turn(prompt: str, path: str, content: str, answer: str) -> list[ModelMessage]:
    return [
        ModelRequest(parts=[UserPromptPart(prompt)]),
        ModelResponse(parts=[ToolCallPart("read_file", {"path": path}, "call-1")]),
        ModelRequest(parts=[ToolReturnPart("read_file", content, "call-1")]),
        ModelResponse(parts=[TextPart(answer)]),
    ]


def save_turn(store: Store, session_id: str, messages: list[ModelMessage], **usage: float) -> list[int]:
    prompt = messages[0].parts[-1].content
    assert isinstance(prompt, str)
    seq = store.messages.begin_turn(session_id, prompt)
    return store.messages.finish_turn(session_id, seq, messages, **usage)  # type: ignore[arg-type]


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "co-cli.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[Store]:
    with Store.open(db_path) as opened:
        yield opened


def new(store: Store, title: str = "a session") -> str:
    return store.sessions.create(model="test", cwd="/work", title=title).id


# --- create, append, load -------------------------------------------------------------------------


def test_create_session_normalises_title_and_uses_sortable_ids(store: Store) -> None:
    info = store.sessions.create(model="openai:gpt-5", cwd="/src", title="  first line\n\tsecond   line  ")
    assert info.title == "first line second line"
    assert len(info.id) == 20 and all(c in "0123456789abcdef" for c in info.id)
    long = store.sessions.create(model="m", cwd="/", title="word " * 60)
    assert len(long.title) == 100 and "\n" not in long.title
    assert store.sessions.get(info.id) == info
    assert new_session_id(1_000.0) < new_session_id(1_000.002) < new_session_id(2_000_000_000.0)


def test_turns_are_saved_and_loaded_losslessly(store: Store) -> None:
    sid = new(store)
    first = text_turn("hello there", "hi!")
    second = tool_turn("show me setup.py", "setup.py", "from setuptools import setup", "It calls setup().")
    assert save_turn(store, sid, first, input_tokens=10, output_tokens=3, cost_usd=0.001) == [0, 1]
    assert save_turn(store, sid, second, input_tokens=20, output_tokens=5, cost_usd=0.002) == [2, 3, 4, 5]
    assert dump(store.messages.messages(sid)) == dump(first + second)
    assert dump(store.messages.messages(sid, after_seq=3)) == dump(second[2:])
    transcript = store.messages.transcript(sid)
    assert [m.seq for m in transcript] == list(range(6))
    assert [m.kind for m in transcript] == ["user", "assistant", "user", "tool-call", "tool-return", "assistant"]
    assert transcript[0].text == "hello there"  # the system prompt is not searchable user text
    assert transcript[3].text == 'read_file({"path":"setup.py"})'
    assert transcript[4].text == "read_file: from setuptools import setup"
    info = store.sessions.get(sid)
    assert (info.message_count, info.input_tokens, info.output_tokens) == (6, 30, 8)
    assert info.cost_usd == pytest.approx(0.003)
    assert info.updated_at >= info.created_at


def test_prompt_is_committed_before_the_turn_finishes(store: Store, db_path: Path) -> None:
    sid = new(store)
    seq = store.messages.begin_turn(sid, "a question that crashes the model")
    with Store.open(db_path) as other:
        [stored] = other.messages.transcript(sid)
    assert (stored.seq, stored.kind, stored.status) == (seq, "user", "ok")
    assert isinstance(stored.message, ModelRequest)
    assert stored.message.parts[0].content == "a question that crashes the model"  # type: ignore[union-attr]


def test_failed_turn_marks_prompt_and_is_left_out_of_messages(store: Store) -> None:
    sid = new(store)
    save_turn(store, sid, text_turn("one", "1"))
    seq = store.messages.begin_turn(sid, "two")
    assert store.messages.finish_turn(sid, seq, [], status="failed") == []
    assert [m.status for m in store.messages.transcript(sid)] == ["ok", "ok", "failed"]
    assert len(store.messages.messages(sid)) == 2
    assert len(store.messages.messages(sid, include_failed=True)) == 3
    save_turn(store, sid, text_turn("three", "3"))
    assert [m.seq for m in store.messages.transcript(sid)] == [0, 1, 2, 3, 4]


def test_cancelled_turn_keeps_partial_messages(store: Store) -> None:
    sid = new(store)
    turn = tool_turn("read it", "a.txt", "x", "done")[:2]
    seq = store.messages.begin_turn(sid, "read it")
    assert store.messages.finish_turn(sid, seq, turn, status="cancelled") == [0, 1]
    assert [m.status for m in store.messages.transcript(sid)] == ["cancelled", "cancelled"]
    assert len(store.messages.messages(sid)) == 2


def test_finish_turn_appends_everything_when_first_message_is_not_the_prompt(store: Store) -> None:
    sid = new(store)
    seq = store.messages.begin_turn(sid, "continue")
    reply = [ModelResponse(parts=[TextPart("continuing")])]
    assert store.messages.finish_turn(sid, seq, reply) == [1]
    assert [m.kind for m in store.messages.transcript(sid)] == ["user", "assistant"]


def test_prompt_with_undecodable_bytes_is_saved(store: Store) -> None:
    sid = new(store, title="")
    seq = store.messages.begin_turn(sid, "caf\udce9 menu")
    assert store.messages.transcript(sid)[seq].text == "caf? menu"
    assert store.sessions.get(sid).title == "caf? menu"


def test_tool_output_with_undecodable_bytes_is_saved(store: Store) -> None:
    sid = new(store)
    save_turn(store, sid, tool_turn("read the binary", "a.bin", "head \udcff\udcfe tail", "binary"))
    stored = store.messages.transcript(sid)[2]
    assert stored.text == "read_file: head ?? tail"
    part = stored.message.parts[0]
    assert isinstance(part, ToolReturnPart) and part.content == "head ?? tail"


def test_first_prompt_becomes_title_of_an_untitled_session(store: Store) -> None:
    sid = new(store, title="")
    store.messages.begin_turn(sid, "Explain\nWAL mode")
    store.messages.begin_turn(sid, "and then?")
    assert store.sessions.get(sid).title == "Explain WAL mode"


def test_finish_turn_cost_does_not_depend_on_session_length(store: Store) -> None:
    sid = new(store)
    for i in range(5):
        save_turn(store, sid, text_turn(f"q{i}", f"a{i}"))
    statements: list[str] = []
    connection = store.db._conn  # the statements themselves: a trace on the store's own connection
    connection.set_trace_callback(statements.append)
    save_turn(store, sid, tool_turn("q", "p", "c", "a"))
    connection.set_trace_callback(None)
    data = [s for s in statements if s.split()[0].upper() in ("SELECT", "INSERT", "UPDATE", "DELETE")]
    assert data
    for sql in data:
        plan = " | ".join(row["detail"] for row in store.db.read(f"EXPLAIN QUERY PLAN {sql}"))
        assert "SCAN messages" not in plan and "SCAN sessions" not in plan, (sql, plan)


def test_unknown_session_raises_session_not_found(store: Store) -> None:
    for call in (
        lambda: store.messages.begin_turn("0" * 20, "x"),
        lambda: store.messages.transcript("0" * 20),
        lambda: store.messages.messages("0" * 20),
        lambda: store.sessions.rename("0" * 20, "x"),
        lambda: store.sessions.delete("0" * 20),
        lambda: store.fork("0" * 20),
    ):
        with pytest.raises(SessionNotFound):
            call()


def test_rename_and_set_model(store: Store) -> None:
    sid = new(store)
    store.sessions.rename(sid, "new\nname")
    store.sessions.set_model(sid, "anthropic:claude-sonnet-4-5")
    info = store.sessions.get(sid)
    assert (info.title, info.model) == ("new name", "anthropic:claude-sonnet-4-5")


# --- get by prefix ---------------------------------------------------------------------------------


def test_get_by_unique_and_ambiguous_prefix(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = iter([f"abc{i:017x}" for i in range(7)] + ["fff00000000000000000"])
    monkeypatch.setattr(sessions_module, "new_session_id", lambda now=None: next(ids))
    created = [new(store, title=f"title {i}") for i in range(8)]
    assert store.sessions.get("FFF").id == created[7]
    assert store.sessions.get(created[3]).id == created[3]
    with pytest.raises(SessionNotFound) as excinfo:
        store.sessions.get("abc")
    message = str(excinfo.value)
    assert "ambiguous" in message and "and 2 more" in message and "\n" not in message
    assert message.count("(title ") == 5
    with pytest.raises(SessionNotFound, match="no session matches"):
        store.sessions.get("123")
    with pytest.raises(SessionNotFound):
        store.sessions.get("  ")


# --- fork ------------------------------------------------------------------------------------------


def test_fork_copies_history_and_both_continue_independently(store: Store) -> None:
    sid = new(store, title="original")
    save_turn(store, sid, text_turn("one", "1"))
    save_turn(store, sid, text_turn("two", "2"))
    before = dump(store.messages.messages(sid))
    fork = store.fork(sid)
    assert (fork.parent_id, fork.fork_seq, fork.title, fork.message_count) == (sid, 3, "original (fork)", 4)
    assert dump(store.messages.messages(fork.id)) == before
    save_turn(store, fork.id, text_turn("fork only", "f"))
    save_turn(store, sid, text_turn("original only", "o"))
    assert [m.text for m in store.messages.transcript(fork.id)][-2:] == ["fork only", "f"]
    assert [m.text for m in store.messages.transcript(sid)][-2:] == ["original only", "o"]
    assert [m.seq for m in store.messages.transcript(fork.id)] == list(range(6))
    assert store.sessions.get(sid).message_count == 6 and store.sessions.get(fork.id).message_count == 6
    assert {h.session_id for h in store.search.messages("fork only")} == {fork.id}


def test_fork_up_to_a_message_copies_only_compactions_inside(store: Store) -> None:
    sid = new(store)
    summary = [ModelRequest(parts=[UserPromptPart("summary of q0")])]
    for i in range(3):
        save_turn(store, sid, text_turn(f"q{i}", f"a{i}"))
        upto = 2 * i + 1
        if upto in (1, 3):  # each compaction made right after the turn it covers
            store.compactions.add(
                sid, CompactionRecord(0, upto, f"upto {upto}", None, "auto", 100, 10, "test", summary)
            )
    # Made after the whole session: covers messages up to 1 but had not happened by message 2.
    store.compactions.add(sid, CompactionRecord(0, 1, "later", None, "manual", 100, 10, "test", summary))
    fork = store.fork(sid, upto_seq=2)
    assert fork.fork_seq == 2 and fork.message_count == 3
    assert [m.text for m in store.messages.transcript(fork.id)] == ["q0", "a0", "q1"]
    assert [c.summary for c in store.compactions.list(fork.id)] == ["upto 1"]
    assert store.sessions.get(fork.id).compaction_count == 1
    assert store.fork(sid, upto_seq=-1).message_count == 0
    with pytest.raises(CoError, match="cannot fork"):
        store.fork(sid, upto_seq=6)


# --- compactions -----------------------------------------------------------------------------------


def test_compactions_round_trip(store: Store) -> None:
    sid = new(store)
    save_turn(store, sid, text_turn("q", "a"))
    assert store.compactions.latest(sid) is None
    replacement = [
        ModelRequest(parts=[UserPromptPart("Summary: the user asked q")]),
        ModelResponse(parts=[TextPart("Understood.")]),
    ]
    first = CompactionRecord(0, 1, "the user asked q", "focus on q", "manual", 900, 120, "test", replacement)
    first_id = store.compactions.add(sid, first)
    second_id = store.compactions.add(sid, CompactionRecord(0, 1, "again", None, "auto", 1, 1, "m", []))
    assert second_id > first_id and first.id == first_id and first.created_at > 0
    latest = store.compactions.latest(sid)
    assert latest is not None and latest.summary == "again" and latest.replacement == []
    loaded = store.compactions.list(sid)[0]
    assert (loaded.focus, loaded.trigger, loaded.tokens_before, loaded.tokens_after) == (
        "focus on q",
        "manual",
        900,
        120,
    )
    assert dump(loaded.replacement) == dump(replacement)
    assert store.sessions.get(sid).compaction_count == 2
    with pytest.raises(ValueError):
        store.compactions.add(sid, CompactionRecord(0, 1, "x", None, "sometimes", 1, 1, "m", []))


# --- list ------------------------------------------------------------------------------------------


def test_list_orders_by_last_update(store: Store) -> None:
    a, b, c = (new(store, title=t) for t in "abc")
    for sid in (a, b, c):
        time.sleep(0.002)
        save_turn(store, sid, text_turn(f"start {sid}", "ok"))
    time.sleep(0.002)
    save_turn(store, a, text_turn("bump a", "ok"))
    assert [s.id for s in store.sessions.list()] == [a, c, b]
    latest = store.sessions.latest()
    assert latest is not None and latest.id == a
    assert [s.id for s in store.sessions.list(limit=1, offset=1)] == [c]
    assert store.sessions.count() == 3


def test_latest_of_empty_store_is_none(store: Store) -> None:
    assert store.sessions.latest() is None and store.sessions.list() == [] and store.sessions.count() == 0


# --- search ----------------------------------------------------------------------------------------


def test_search_ranks_and_highlights(store: Store) -> None:
    a = new(store, title="database talk")
    b = new(store, title="other")
    save_turn(store, a, text_turn("how does the sqlite journal work?", "The WAL journal keeps writers apart."))
    save_turn(store, b, text_turn("tell me about sqlite", "SQLite is a library. SQLite SQLite sqlite."))
    hits = store.search.messages("sqlite")
    assert hits and hits[0].session_id == b and hits[0].seq == 1  # most occurrences ranks first
    assert all(SNIPPET_OPEN in h.snippet and SNIPPET_CLOSE in h.snippet for h in hits)
    assert [h.rank for h in hits] == sorted(h.rank for h in hits)
    only_a = store.search.messages("sqlite", session_id=a)
    assert {h.session_id for h in only_a} == {a} and only_a[0].title == "database talk"
    assert {h.seq for h in store.search.messages("journal writers")} == {1}  # all terms must match
    assert store.search.messages("journals")  # porter stemming
    assert len(store.search.messages("sqlite", limit=1)) == 1


def test_search_finds_tool_calls_and_outputs(store: Store) -> None:
    sid = new(store)
    save_turn(store, sid, tool_turn("open it", "pyproject.toml", "requires-python = '>=3.11'", "3.11"))
    assert [h.kind for h in store.search.messages("pyproject.toml")] == ["tool-call"]
    assert [h.kind for h in store.search.messages("requires-python")] == ["tool-return"]


@pytest.mark.parametrize("query", NASTY_QUERIES)
def test_search_never_raises_on_fts_syntax(store: Store, query: str) -> None:
    sid = new(store)
    save_turn(store, sid, text_turn('a "quoted" AND (bracketed) NEAR text: 🙂 *stars*', "ok"))
    hits = store.search.messages(query)
    assert isinstance(hits, list)


def test_fts_query_quotes_every_term() -> None:
    assert fts_query('foo "bar" NEAR(x)') == '"foo" "bar" "NEAR x"'
    assert fts_query('  ""  ') == ""


# --- delete ----------------------------------------------------------------------------------------


def test_delete_purges_rows_search_compactions_and_files(store: Store, tmp_path: Path) -> None:
    keep = new(store, title="keep")
    gone = new(store, title="gone")
    save_turn(store, keep, text_turn("kept zebra", "ok"))
    save_turn(store, gone, text_turn("deleted zebra", "ok"))
    store.compactions.add(gone, CompactionRecord(0, 1, "s", None, "auto", 1, 1, "m", []))
    files = tmp_path / "tool-outputs"
    (files / gone).mkdir(parents=True)
    (files / gone / "call-1.txt").write_text("big output")
    (files / keep).mkdir()
    store.sessions.delete(gone, files_root=files)
    db = store.db
    assert tuple(db.read_one("SELECT count(*) FROM messages WHERE session_id = ?", (gone,))) == (0,)
    assert tuple(db.read_one("SELECT count(*) FROM compactions WHERE session_id = ?", (gone,))) == (0,)
    fts_rows = tuple(db.read_one("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'zebra'"))
    assert fts_rows == (1,)
    assert [h.session_id for h in store.search.messages("zebra")] == [keep]
    assert not (files / gone).exists() and (files / keep).exists()
    with pytest.raises(SessionNotFound):
        store.sessions.get(gone)
    assert store.sessions.get(keep).message_count == 2
    assert store.db.integrity_ok()


# --- the open-session lock -------------------------------------------------------------------------


_REPO = str(Path(__file__).resolve().parents[1])


def _holder(db_path: Path, sid: str, then: str) -> subprocess.Popen[str]:
    """A child process that opens the session, prints "held" and then runs ``then``."""
    code = (
        f"import sys, os, time; sys.path.insert(0, {_REPO!r})\n"
        "from pathlib import Path\n"
        "from co_cli.store import Store\n"
        f"store = Store.open(Path({str(db_path)!r}))\n"
        f"store.locks.acquire({sid!r})\n"
        "print('held', flush=True)\n"
        f"{then}\n"
    )
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def _child_holding(db_path: Path, sid: str) -> subprocess.Popen[str]:
    child = _holder(db_path, sid, "time.sleep(60)")
    assert child.stdout is not None and child.stdout.readline() == "held\n"
    return child


def test_a_session_held_by_a_live_process_is_refused(store: Store, db_path: Path) -> None:
    sid = new(store)
    save_turn(store, sid, text_turn("q", "a"))
    child = _child_holding(db_path, sid)
    try:
        with pytest.raises(SessionBusy, match=f"pid {child.pid}") as excinfo:
            store.locks.acquire(sid)
        assert excinfo.value.exit_code == 5 and "--fork" in str(excinfo.value) and "--force" in str(excinfo.value)
        with pytest.raises(SessionBusy):
            store.sessions.delete(sid)
        assert store.sessions.get(sid).message_count == 2
    finally:
        child.kill()
        child.communicate()
    store.locks.acquire(sid)  # the kernel dropped the killed holder's lock
    owner = tuple(store.db.read_one("SELECT owner_pid FROM sessions WHERE id = ?", (sid,)))
    assert owner == (os.getpid(),)
    store.locks.acquire(sid)  # re-acquiring one's own session is fine
    store.locks.release(sid)
    assert tuple(store.db.read_one("SELECT owner_pid FROM sessions WHERE id = ?", (sid,))) == (None,)
    assert issubclass(SessionBusy, CoError)


def test_a_lock_whose_holder_died_is_taken_without_force(store: Store, db_path: Path) -> None:
    sid = new(store)
    save_turn(store, sid, text_turn("q", "a"))
    child = _holder(db_path, sid, "os._exit(0)")  # dies without releasing, as a crash would
    child.communicate(timeout=60)
    assert child.returncode == 0
    stale = tuple(store.db.read_one("SELECT owner_pid FROM sessions WHERE id = ?", (sid,)))
    assert stale == (child.pid,)  # the crash left its pid behind
    store.locks.acquire(sid)
    # A stale pid that now belongs to another live process (a reused pid, or a pid from another container)
    # means nothing either.
    store.locks.release(sid)
    with store.db.transaction() as tx:
        tx.execute("UPDATE sessions SET owner_pid = ? WHERE id = ?", (os.getppid(), sid))
    store.locks.acquire(sid)
    store.locks.release(sid)
    store.sessions.delete(sid)


def test_force_takes_a_session_from_a_live_holder(store: Store, db_path: Path) -> None:
    sid = new(store)
    save_turn(store, sid, text_turn("q", "a"))
    child = _child_holding(db_path, sid)
    try:
        with pytest.raises(SessionBusy):
            store.locks.acquire(sid)
        store.locks.acquire(sid, force=True)
        owner = tuple(store.db.read_one("SELECT owner_pid FROM sessions WHERE id = ?", (sid,)))
        assert owner == (os.getpid(),)
        # The new holder's lock is a real one.
        with Store.open(db_path) as third, pytest.raises(SessionBusy, match=f"pid {os.getpid()}"):
            third.locks.acquire(sid)
    finally:
        child.kill()
        child.communicate()
    store.locks.release(sid)
    lock_dir = db_path.parent / "co-cli.db.locks"
    assert list(lock_dir.iterdir()) == []  # released locks leave no file behind
    assert stat.S_IMODE(lock_dir.stat().st_mode) == 0o700


# --- files and failure modes -----------------------------------------------------------------------


def test_files_are_private(db_path: Path) -> None:
    with Store.open(db_path) as store:
        save_turn(store, new(store), text_turn("q", "a"))
        assert stat.S_IMODE(db_path.parent.stat().st_mode) == 0o700
        for name in ("co-cli.db", "co-cli.db-wal", "co-cli.db-shm"):
            assert stat.S_IMODE((db_path.parent / name).stat().st_mode) == 0o600, name


def test_wal_and_busy_timeout_are_set(store: Store) -> None:
    assert tuple(store.db.read_one("PRAGMA journal_mode")) == ("wal",)
    assert store.db.read_one("PRAGMA busy_timeout")[0] >= 5000
    assert tuple(store.db.read_one("PRAGMA foreign_keys")) == (1,)


def test_corrupt_file_raises_store_error_and_is_kept(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    garbage = b"this is not an sqlite database, just some text that a user cares about" * 20
    db_path.write_bytes(garbage)
    with pytest.raises(StoreError) as excinfo:
        Store.open(db_path)
    assert str(db_path) in str(excinfo.value) and "corrupt" in str(excinfo.value)
    assert "\n" not in str(excinfo.value)
    assert db_path.read_bytes() == garbage


def test_foreign_sqlite_database_is_refused(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    conn = sqlite3.connect(db_path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="did not create"):
        Store.open(db_path)


def test_newer_schema_raises_store_error(db_path: Path) -> None:
    Store.open(db_path).close()
    conn = sqlite3.connect(db_path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer co") as excinfo:
        Store.open(db_path)
    assert str(db_path) in str(excinfo.value)


def test_read_only_file_raises_store_error(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    Store.open(db_path).close()
    db_path.chmod(0o400)
    if os.geteuid() == 0:  # root ignores permission bits; report the file as unwritable as a user would see it
        real_access = os.access
        monkeypatch.setattr(
            os, "access", lambda p, mode: False if Path(p) == db_path and mode & os.W_OK else real_access(p, mode)
        )
    with pytest.raises(StoreError, match="read-only") as excinfo:
        Store.open(db_path)
    assert str(db_path) in str(excinfo.value)


def test_sqlite_read_only_error_is_translated(db_path: Path) -> None:
    Store.open(db_path).close()
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError) as excinfo:
        conn.execute("DELETE FROM sessions")
    conn.close()
    error = store_error(excinfo.value, db_path)
    assert isinstance(error, StoreError) and "read-only" in str(error) and str(db_path) in str(error)


def test_full_disk_raises_store_error_and_keeps_data(store: Store) -> None:
    sid = new(store)
    save_turn(store, sid, text_turn("before", "ok"))
    connection = store.db._conn  # a size limit and the transaction state of the store's own connection
    pages = connection.execute("PRAGMA page_count").fetchone()[0]
    connection.execute(f"PRAGMA max_page_count = {pages + 1}")
    with pytest.raises(StoreError, match="disk is full") as excinfo:
        save_turn(store, sid, text_turn("x" * 200_000, "too big"))
    assert str(store.path) in str(excinfo.value)
    assert not connection.in_transaction
    assert [m.text for m in store.messages.transcript(sid)] == ["before", "ok"]
    assert store.sessions.get(sid).message_count == 2


# --- several processes -----------------------------------------------------------------------------


def _append_turns(db_path: str, own_id: str, shared_id: str, turns: int, start: float) -> None:
    store = Store.open(Path(db_path))
    while time.time() < start:
        time.sleep(0.001)
    for i in range(turns):
        sid = shared_id if i % 2 else own_id
        prompt = f"turn {i} of {os.getpid()}"
        seq = store.messages.begin_turn(sid, prompt)
        store.messages.finish_turn(sid, seq, text_turn(prompt, f"answer to {prompt}"), input_tokens=1)
    store.close()


def _seqs(store: Store, sid: str) -> list[int]:
    return [m.seq for m in store.messages.transcript(sid)]


def test_two_processes_append_concurrently(store: Store, db_path: Path) -> None:
    turns = 300
    shared = new(store, title="shared")
    own = [new(store, title=f"own {i}") for i in range(2)]
    ctx = multiprocessing.get_context("fork")
    start = time.time() + 0.5
    procs = [ctx.Process(target=_append_turns, args=(str(db_path), o, shared, turns, start)) for o in own]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=90)
    assert [proc.exitcode for proc in procs] == [0, 0]
    assert _seqs(store, shared) == list(range(2 * turns))
    for sid in own:
        assert _seqs(store, sid) == list(range(turns))
    info = store.sessions.get(shared)
    assert info.message_count == 2 * turns and info.input_tokens == turns
    # Each turn's reply lands after its own prompt even when the two processes interleave.
    seq_of = {m.text: m.seq for m in store.messages.transcript(shared)}
    prompts = [text for text in seq_of if text.startswith("turn ")]
    assert len(prompts) == turns
    assert all(seq_of[f"answer to {p}"] > seq_of[p] for p in prompts)
    assert store.db.integrity_ok()


def _write_forever(db_path: str) -> None:
    store = Store.open(Path(db_path))
    sid = store.sessions.create(model="test", cwd="/", title="victim").id
    i = 0
    while True:
        save_turn(store, sid, tool_turn(f"prompt {i}", f"f{i}.py", "x = 1\n" * 200, f"answer {i}"))
        if i % 25 == 24:
            sid = store.fork(sid).id
        i += 1


def test_sigkill_mid_writes_leaves_a_sound_database(store: Store, db_path: Path) -> None:
    proc = multiprocessing.get_context("fork").Process(target=_write_forever, args=(str(db_path),))
    proc.start()
    deadline = time.time() + 30
    while time.time() < deadline:
        if store.db.read_one("SELECT count(*) FROM messages")[0] >= 400:
            break
        time.sleep(0.02)
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    with Store.open(db_path) as reopened:
        assert reopened.db.integrity_ok()
        sessions = reopened.sessions.list(limit=1000)
        assert len(sessions) >= 2
        for info in sessions:
            seqs = _seqs(reopened, info.id)
            assert seqs == list(range(info.message_count))
        sid = sessions[0].id
        save_turn(reopened, sid, text_turn("after the crash", "fine"))
        assert reopened.search.messages("after the crash")[0].session_id == sid


# --- export and import -----------------------------------------------------------------------------


def test_export_markdown_is_readable(store: Store) -> None:
    sid = new(store, title="Reading files")
    save_turn(store, sid, tool_turn("show ```fences```", "a.py", "print('hi')", "It prints **hi**."))
    text = export_markdown(store, sid)
    assert text.startswith("# Reading files\n")
    assert f"`{sid}`" in text and "- Model: test" in text
    assert "### User · #0" in text and "### Assistant (tool call) · #1" in text
    assert '```json\n{\n  "path": "a.py"\n}\n```' in text
    assert "````\nread_file" not in text and "Result of `read_file`:\n\n```\nprint('hi')\n```" in text
    assert "It prints **hi**." in text


def test_export_json_import_round_trip(store: Store) -> None:
    sid = new(store, title="round trip")
    save_turn(store, sid, tool_turn("q", "a.py", "content", "answer"), input_tokens=7, cost_usd=0.5)
    seq = store.messages.begin_turn(sid, "failing")
    store.messages.finish_turn(sid, seq, [], status="failed")
    summary = [ModelRequest(parts=[UserPromptPart("summary")])]
    store.compactions.add(sid, CompactionRecord(0, 3, "sum", "f", "manual", 50, 5, "test", summary))
    exported = export_json(store, sid)
    document = json.loads(exported)
    assert (document["format"], document["version"]) == ("co-session", 1)
    imported = import_json(store, exported, repair_orphans)
    assert imported.id != sid and imported.title == "round trip" and imported.input_tokens == 7
    assert dump(store.messages.messages(imported.id, include_failed=True)) == dump(
        store.messages.messages(sid, include_failed=True)
    )
    assert [m.status for m in store.messages.transcript(imported.id)] == [
        m.status for m in store.messages.transcript(sid)
    ]
    [record] = store.compactions.list(imported.id)
    assert (record.summary, record.focus, record.upto_seq) == ("sum", "f", 3)
    assert dump(record.replacement) == dump(summary)
    assert store.search.messages("content", session_id=imported.id)
    # Into an empty database the original id is kept.
    other_path = store.path.parent / "other.db"
    with Store.open(other_path) as other:
        assert import_json(other, exported, repair_orphans).id == sid


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"format": "something-else"}',
        '{"format": "co-session", "version": 99}',
        '{"format": "co-session", "version": 1, "session": {}}',
    ],
)
def test_import_rejects_invalid_files(store: Store, text: str) -> None:
    with pytest.raises(CoError) as excinfo:
        import_json(store, text, repair_orphans)
    assert "\n" not in str(excinfo.value)
    assert store.sessions.count() == 0


def test_import_rejects_invalid_messages(store: Store) -> None:
    sid = new(store)
    save_turn(store, sid, text_turn("q", "a"))
    document = json.loads(export_json(store, sid))
    document["messages"][1]["message"] = {"kind": "response", "parts": [{"part_kind": "nonsense"}]}
    with pytest.raises(CoError, match="does not validate"):
        import_json(store, json.dumps(document), repair_orphans)
    document = json.loads(export_json(store, sid))
    document["messages"][1]["seq"] = 5
    with pytest.raises(CoError, match="seq"):
        import_json(store, json.dumps(document), repair_orphans)
    assert store.sessions.count() == 1


# A search query is normalised: repeated terms once, a bounded number of bounded terms, FTS5 syntax literal.


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("kestrel " * 2000, '"kestrel"'),
        ("Kestrel KESTREL kestrel. (kestrel) kestrel, " * 100, '"Kestrel"'),
        ("a-b a_b A-B", '"a b"'),
        ('NEAR("odd" * OR AND', '"NEAR odd" "OR" "AND"'),
        (" ".join(f"w{i}" for i in range(100)), " ".join(f'"w{i}"' for i in range(16))),
        ("x" * 100_000, '"' + "x" * 64 + '"'),
        ("-".join(["ab"] * 1000), '"' + " ".join(["ab"] * 21 + ["a"]) + '"'),
        ("*** ---", ""),
    ],
)
def test_search_queries_are_normalised(query: str, expected: str) -> None:
    from co_cli.store.search import fts_query

    assert fts_query(query) == expected


def test_after_a_takeover_ends_the_first_holder_still_keeps_the_session(store: Store, db_path: Path) -> None:
    """A holds the session, B takes it with --force and closes: a third co without --force is still refused
    while A runs (both would write one session: two answers in a row), and gets it once A is gone."""
    sid = new(store)
    save_turn(store, sid, text_turn("q", "a"))
    first = _child_holding(db_path, sid)
    try:
        with Store.open(db_path) as second:
            second.locks.acquire(sid, force=True)
            assert sid in store.locks.open_elsewhere()
            second.locks.release(sid)
        assert sid in store.locks.open_elsewhere()  # the first still has it open
        with pytest.raises(SessionBusy):
            store.locks.acquire(sid)
        with Store.open(db_path) as third, pytest.raises(SessionBusy):
            third.locks.acquire(sid)
    finally:
        first.kill()
        first.communicate()
    store.locks.acquire(sid)  # the first is gone: free without --force
    store.locks.release(sid)
    assert list((db_path.parent / "co-cli.db.locks").iterdir()) == []


def test_export_all_writes_each_session_as_the_one_by_one_export_does(store: Store) -> None:
    """``export --all`` writes the saved JSON as it is, without validating it again: the same documents as the
    one-session export, credentials and instructions left out even from rows saved before co left them out."""
    import json

    from co_cli.store.export import export_all_json_lines, export_document, export_json, export_json_line

    first, second = new(store, "first"), new(store, "ünïcode «title» \u2028")
    save_turn(store, first, text_turn("q1", "a1"))
    save_turn(store, second, text_turn('q2 with "quotes" and \\ and ünïcode', "a2\nline"))
    legacy_request = ModelRequest(parts=[UserPromptPart("old")], instructions="SECRET-INSTRUCTIONS from AGENTS.md")
    legacy_response = ModelResponse(
        parts=[TextPart("old answer")], model_name="m", provider_url="https://user:pw-SECRET@host/v1?key=SECRET"
    )
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    with store.db.transaction() as tx:  # as a co that saved them whole wrote them
        for seq, message in ((2, legacy_request), (3, legacy_response)):
            raw = ModelMessagesTypeAdapter.dump_json([message]).decode()
            tx.execute(
                "INSERT INTO messages (session_id, seq, created_at, kind, text, json, status) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (first, seq, 1.5, "user" if seq == 2 else "assistant", "old", raw, "ok"),
            )
    lines = list(export_all_json_lines(store))
    by_id = {json.loads(line)["session"]["id"]: line for line in lines}
    assert set(by_id) == {first, second}
    for session_id, line in by_id.items():
        assert json.loads(line) == export_document(store, session_id) == json.loads(export_json(store, session_id))
        assert line == export_json_line(store, session_id)
        assert "SECRET" not in line
    assert json.loads(by_id[first])["messages"][2]["message"]["instructions"] is None
    assert json.loads(by_id[first])["messages"][3]["message"]["provider_url"] == "https://host/v1"
