"""The recorder, the only writer of a live session: a finished turn is one transaction, whole or not at all.

A turn leaves its prompt (committed before the model is called) and then, in one transaction, its messages
and status, its usage rows, the compactions made during it, the pins a summary found, the task list it set, its
tool calls and the memory extraction queue item. A crash at any point leaves either the whole turn or only its prompt.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pydantic_ai import CancellationToken
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from co_cli.deps import SessionState, Task
from co_cli.errors import SessionTakenOver, StoreError
from co_cli.session.recorder import Extraction, Recorder, TurnRecord
from co_cli.store import CompactionRecord, Store
from co_cli.store.db import Database
from co_cli.store.tool_calls import ToolCallRow
from co_cli.store.usage import TurnUsage
from tests.support.turn_core import Core, RecordingView, core, echo, streaming_model

__all__ = ["core"]

pytestmark = pytest.mark.allow_model_requests


def answered(prompt: str, answer: str) -> list[ModelMessage]:
    return [ModelRequest(parts=[UserPromptPart(prompt)]), ModelResponse(parts=[TextPart(answer)])]


def whole_turn(recorder: Recorder, i: int) -> None:
    """One turn with everything a turn can bring; every row it leaves names ``i``."""
    prompt = f"prompt {i} about the deploy pipeline"
    seq = recorder.begin(prompt)
    [_, answer_seq] = recorder.seqs_for(seq, answered(prompt, f"answer {i}"))
    record = CompactionRecord(
        from_seq=seq, upto_seq=answer_seq, summary=f"summary {i}", focus="", trigger="auto", tokens_before=100,
        tokens_after=10, model="test", replacement=answered("summarise", f"summary {i}"),
    )  # fmt: skip
    recorder.finish(
        TurnRecord(
            seq,
            answered(prompt, f"answer {i}"),
            "ok",
            usage=[TurnUsage("chat", f"chat-{i}", 1, 10, 5), TurnUsage("summary", f"summary-{i}", 1, 50, 8)],
            compactions=[record],
            pins=[(f"pin {i}", "summary")],
            tasks=[Task(f"task {i}", "in_progress", 1.0, 2.0)],
            tool_calls=[ToolCallRow(f"tool-{i}", "ok", 0.5)],
            extraction=Extraction(prompt, "project"),
        )
    )


def new_recorder(store: Store) -> Recorder:
    return Recorder(store, SessionState(), Path("/work"), model_label=lambda: "test")


@contextmanager
def counted_transactions(db: Database) -> Iterator[list[int]]:
    """Count the write transactions ``db`` opens inside the block."""
    opened: list[int] = []
    original = db.transaction

    @contextmanager
    def counting() -> Iterator[object]:
        opened.append(1)
        with original() as tx:
            yield tx

    db.transaction = counting  # type: ignore[method-assign]
    try:
        yield opened
    finally:
        db.transaction = original  # type: ignore[method-assign]


def turn_rows(store: Store, session_id: str, i: int) -> dict[str, bool]:
    """Which of turn ``i``'s rows are saved."""
    db = store.db

    def found(sql: str, *params: object) -> bool:
        return db.read_one(sql, params) is not None

    return {
        "answer": found("SELECT 1 FROM messages WHERE session_id = ? AND text = ?", session_id, f"answer {i}"),
        "usage": found("SELECT 1 FROM turn_usage WHERE session_id = ? AND model = ?", session_id, f"chat-{i}"),
        "summary usage": found("SELECT 1 FROM turn_usage WHERE model = ?", f"summary-{i}"),
        "compaction": found(
            "SELECT 1 FROM compactions WHERE session_id = ? AND summary = ?", session_id, f"summary {i}"
        ),
        "pin": found("SELECT 1 FROM pins WHERE session_id = ? AND text = ?", session_id, f"pin {i}"),
        "tasks": found("SELECT 1 FROM task_lists WHERE session_id = ? AND items LIKE ?", session_id, f'%"task {i}"%'),
        "tool calls": found("SELECT 1 FROM tool_calls WHERE session_id = ? AND tool = ?", session_id, f"tool-{i}"),
        "queued": found("SELECT 1 FROM memory_queue WHERE session_id = ? AND text LIKE ?", session_id, f"prompt {i} %"),
    }


def test_a_finished_turn_is_one_transaction(tmp_path: Path) -> None:
    with Store.open(tmp_path / "co.db") as store:
        recorder = new_recorder(store)
        whole_turn(recorder, 0)  # creates the session
        with counted_transactions(store.db) as opened:
            whole_turn(recorder, 1)
        assert len(opened) == 2  # the prompt, then everything else the turn brought
        assert recorder.held.info is not None
        assert all(turn_rows(store, recorder.held.info.id, 1).values())
        info = store.sessions.get(recorder.held.info.id)
        assert info.message_count == 4 and info.compaction_count == 2 and info.input_tokens == 20


def test_a_turn_through_the_conversation_commits_twice(core: Core) -> None:
    conv = core.conversation(streaming_model(echo))
    asyncio.run(conv.run_turn("the first prompt of all", RecordingView(), CancellationToken()))
    with counted_transactions(core.store.db) as opened:
        outcome = asyncio.run(conv.run_turn("and a second one", RecordingView(), CancellationToken()))
    assert outcome.status == "ok" and len(opened) == 2
    assert [m.text for m in core.store.messages.transcript(conv.session_id or "")][-2:] == [
        "and a second one",
        "echo: and a second one",
    ]


def test_a_turn_that_fails_to_save_leaves_only_its_prompt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Store.open(tmp_path / "co.db") as store:
        recorder = new_recorder(store)
        whole_turn(recorder, 0)

        def full_disk(*args: object) -> None:
            raise StoreError("cannot write session database: the disk is full")

        monkeypatch.setattr("co_cli.session.recorder.queue.put", full_disk)  # the last write of the turn
        with pytest.raises(StoreError):
            whole_turn(recorder, 1)
        assert recorder.held.info is not None
        assert not any(turn_rows(store, recorder.held.info.id, 1).values())
        texts = [m.text for m in store.messages.transcript(recorder.held.info.id)]
        assert texts == ["prompt 0 about the deploy pipeline", "answer 0", "prompt 1 about the deploy pipeline"]


def _record_forever(path: str) -> None:
    store = Store.open(Path(path))
    recorder = new_recorder(store)
    i = 0
    while True:
        whole_turn(recorder, i)
        i += 1


def test_kill_9_leaves_every_turn_whole_or_only_its_prompt(tmp_path: Path) -> None:
    path = tmp_path / "co.db"
    Store.open(path).close()
    proc = multiprocessing.get_context("fork").Process(target=_record_forever, args=(str(path),))
    proc.start()
    with Store.open(path) as store:
        deadline = time.time() + 30
        while time.time() < deadline and store.db.read_one("SELECT count(*) FROM messages")[0] < 150:
            time.sleep(0.01)
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        assert store.db.integrity_ok()
        [session] = store.sessions.list()
        prompts = [m.text for m in store.messages.transcript(session.id) if m.kind == "user"]
        assert len(prompts) >= 50
        for i in range(len(prompts)):
            saved = turn_rows(store, session.id, i)
            assert len(set(saved.values())) == 1, (i, saved)  # all of the turn, or none of it
            assert saved["answer"] or i == len(prompts) - 1  # only the last turn can be cut off


def test_opening_the_session_already_open_keeps_holding_it(tmp_path: Path) -> None:
    with Store.open(tmp_path / "co.db") as store:
        recorder = new_recorder(store)
        whole_turn(recorder, 0)
        assert recorder.held.info is not None
        session = store.sessions.get(recorder.held.info.id)
        recorder.held.open(session)
        assert store.locks.holds(session.id)


# ----- a session taken over (--force): the old holder writes nothing more ---------------------------------


def _writes(recorder: Recorder, prompt_seq: int) -> dict[str, Callable[[], object]]:
    """Every write of the session's record the recorder makes, each as it would follow a takeover."""
    summary = CompactionRecord(
        from_seq=0, upto_seq=1, summary="résumé", focus="", trigger="manual", tokens_before=100, tokens_after=10,
        model="test", replacement=answered("summarise", "résumé"),
    )  # fmt: skip
    return {
        "prompt": lambda: recorder.begin("und jetzt noch eine Frage"),
        "turn": lambda: recorder.finish(TurnRecord(prompt_seq, answered("質問", "the old holder's answer"), "ok")),
        "closing note": lambda: recorder.close_open_turn(ModelResponse(parts=[TextPart("interrupted")]), prompt_seq),
        "compaction": lambda: recorder.compaction(summary, [], None),
        "pin": lambda: recorder.pin("всегда отвечай кратко", "user"),
        "task list": lambda: recorder.save_tasks([Task("écrire les tests", "pending", 1.0, 1.0)]),
    }


@pytest.mark.parametrize("write", ["prompt", "turn", "closing note", "compaction", "pin", "task list"])
def test_a_holder_whose_session_was_taken_over_writes_nothing_more(tmp_path: Path, write: str) -> None:
    with Store.open(tmp_path / "co.db") as store, Store.open(tmp_path / "co.db") as terminal:
        recorder = new_recorder(store)
        whole_turn(recorder, 0)
        prompt_seq = recorder.begin("質問")  # the old holder's turn is under way
        assert recorder.held.info is not None
        session_id = recorder.held.info.id
        terminal.locks.acquire(session_id, force=True)  # co chat --resume <id> --force
        before = [(m.seq, m.status, m.text) for m in store.messages.transcript(session_id)]
        tables = {t: store.db.read_one(f"SELECT count(*) FROM {t}")[0] for t in ("compactions", "pins", "task_lists")}
        with pytest.raises(SessionTakenOver, match=f"session {session_id} was taken over by another co"):
            _writes(recorder, prompt_seq)[write]()
        assert [(m.seq, m.status, m.text) for m in store.messages.transcript(session_id)] == before
        assert {t: store.db.read_one(f"SELECT count(*) FROM {t}")[0] for t in tables} == tables
        # The co that took it over writes as usual, and the old holder lets the session go cleanly.
        new_holder = new_recorder(terminal)
        new_holder.held.open(terminal.sessions.get(session_id))
        new_holder.begin("the terminal's prompt")
        recorder.held.release()
        assert terminal.locks.holds(session_id)


def test_a_takeover_waits_for_a_write_under_way_and_the_next_write_is_refused(tmp_path: Path) -> None:
    """The guarantee is not a race: the takeover renames the lock file inside a write transaction, and the
    holder checks its lock inside each of its own, so SQLite runs them one after the other. A write under way
    when the takeover comes lands whole before it (and the co taking over reads it); the next one is refused."""
    import threading

    with Store.open(tmp_path / "co.db") as store, Store.open(tmp_path / "co.db") as terminal:
        recorder = new_recorder(store)
        whole_turn(recorder, 0)
        prompt_seq = recorder.begin("a long question")
        assert recorder.held.info is not None
        session_id = recorder.held.info.id
        in_commit, go_on = threading.Event(), threading.Event()
        original = recorder.held.writing

        @contextmanager
        def slow_commit(sid: str) -> Iterator[object]:
            with original(sid) as tx:
                in_commit.set()  # the check passed: the write transaction is open
                go_on.wait(30)
                yield tx

        recorder.held.writing = slow_commit  # type: ignore[method-assign]
        writer = threading.Thread(
            target=lambda: recorder.finish(TurnRecord(prompt_seq, answered("a long question", "a long answer"), "ok"))
        )
        writer.start()
        assert in_commit.wait(30)
        took = threading.Thread(target=lambda: terminal.locks.acquire(session_id, force=True))
        took.start()
        took.join(0.5)
        assert took.is_alive()  # the takeover waits for the write under way: the lock file is still the holder's
        assert store.db.lock_files.holds(session_id) and not store.db.lock_files.taken(session_id)
        go_on.set()
        writer.join(30)
        took.join(30)
        assert not took.is_alive() and terminal.locks.holds(session_id)
        recorder.held.writing = original  # type: ignore[method-assign]
        texts = [m.text for m in terminal.messages.transcript(session_id)]
        assert texts[-2:] == ["a long question", "a long answer"]  # whole, before the takeover
        with pytest.raises(SessionTakenOver):
            recorder.begin("one more")
        assert [m.text for m in terminal.messages.transcript(session_id)] == texts


def test_a_terminal_whose_session_was_taken_over_says_so_in_one_line(core: Core) -> None:
    from tests.support.chat_app import ChatRun

    chat = ChatRun(core, streaming_model(echo))
    assert chat.send("première question").code == 0
    assert chat.conv.session is not None
    session_id = chat.conv.session.id
    chat.conv.load(core.store.sessions.get(session_id))  # held as a REPL holds it (each piped run lets it go)
    with Store.open(core.loaded.paths.db) as terminal:
        terminal.locks.acquire(session_id, force=True)
        before = terminal.messages.transcript(session_id)
        printed = chat.send("вторая попытка", "/pin 常に短く答える")
        assert printed.code == 1
        refusal = f"error: session {session_id} was taken over by another co (--force); this co no longer writes to it"
        assert printed.err.splitlines() == [refusal, refusal]
        assert [m.text for m in terminal.messages.transcript(session_id)] == [m.text for m in before]
        assert terminal.pins.active(session_id) == []
    chat.conv.release()
