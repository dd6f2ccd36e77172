"""Automatic extraction and reconciliation with FunctionModel: each decision, invalid answers, failures, secrets,
the junk filter, and the background worker's queue."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from co_cli.memory.extract import Decision, ExtractionWorker, is_standalone, plan
from co_cli.store.db import Database
from co_cli.store.memories import Memories
from co_cli.store.queue import ExtractionQueue

pytestmark = pytest.mark.allow_model_requests
PROJECT = "/repo/one"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Memories]:
    db = Database.open(tmp_path / "co.db")
    yield Memories(db)
    db.close()


def _prompt_of(messages: list[ModelMessage]) -> str:
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                return part.content
    return ""


def structured(facts: list[str] | None = None, decisions: list[dict[str, Any]] | None = None,
               calls: list[str] | None = None) -> FunctionModel:  # fmt: skip
    """Answers the extraction call with ``facts`` and the reconciliation call with ``decisions``."""

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = _prompt_of(messages)
        if calls is not None:
            calls.append(prompt)
        tool = info.output_tools[0].name
        if prompt.startswith("EXISTING"):
            return ModelResponse(parts=[ToolCallPart(tool, {"memory": decisions or []})])
        return ModelResponse(parts=[ToolCallPart(tool, {"facts": facts or []})])

    return FunctionModel(answer)


def run_worker(store: Memories, model: FunctionModel, message: str, mode: str = "review") -> ExtractionWorker:
    async def go() -> ExtractionWorker:
        worker = ExtractionWorker(store, lambda: model, mode, PROJECT)  # type: ignore[arg-type]
        worker.submit(message, "sess1", 4)
        await worker.drain()
        return worker

    return asyncio.run(go())


def test_add_without_neighbours_becomes_a_proposal_with_provenance(store: Memories) -> None:
    calls: list[str] = []
    model = structured(facts=["The user's wife is named Anne", "The user uses vim"], calls=calls)
    worker = run_worker(store, model, "My wife is Anne and I use vim for everything")
    proposals = store.proposals(PROJECT)
    assert [p.text for p in proposals] == ["The user's wife is named Anne", "The user uses vim"]
    assert all(p.proposal == "add" and p.source_session == "sess1" and p.source_seq == 4 for p in proposals)
    assert store.list() == []  # nothing active until reviewed
    assert len(calls) == 1 and "My wife is Anne" in calls[0]  # no reconciliation without neighbours
    assert worker.last_error is None and len(ExtractionQueue(store.db)) == 0


def test_reconciliation_update_delete_none_and_add(store: Memories) -> None:
    lives = store.add("The user lives in Paris", actor="user")
    likes = store.add("The user likes Paris cafes", actor="user")
    editor = store.add("The user edits in Paris with emacs", actor="user")
    decisions = [
        {"event": "UPDATE", "id": lives.ref, "text": "The user lives in Lyon since May"},
        {"event": "DELETE", "id": editor.ref},
        {"event": "NONE", "id": likes.ref},
        {"event": "ADD", "text": "The user moved from Paris to Lyon"},
    ]
    calls: list[str] = []
    model = structured(facts=["The user lives in Lyon since May"], decisions=decisions, calls=calls)
    run_worker(store, model, "I moved from Paris to Lyon in May, and I gave up emacs")
    assert calls[1].startswith("EXISTING") and lives.ref in calls[1]
    by_kind = {p.proposal: p for p in store.proposals(PROJECT)}
    assert by_kind["update"].target_id == lives.id and by_kind["update"].text == "The user lives in Lyon since May"
    assert by_kind["delete"].target_id == editor.id
    assert by_kind["add"].text == "The user moved from Paris to Lyon"
    assert len(store.list()) == 3  # review mode: nothing applied yet


def test_auto_mode_applies_at_once_logged_and_undoable(store: Memories) -> None:
    old = store.add("The user lives in Paris", actor="user")
    decisions = [{"event": "UPDATE", "id": old.ref, "text": "The user lives in Lyon now"}]
    run_worker(
        store,
        structured(facts=["The user lives in Lyon now"], decisions=decisions),
        "I live in Lyon now, not Paris",
        "auto",
    )
    assert [m.text for m in store.list()] == ["The user lives in Lyon now"]
    assert store.log()[0].actor == "extractor"
    store.undo()
    assert [m.text for m in store.list()] == ["The user lives in Paris"]


def test_invalid_answer_proposes_nothing_and_is_reported(store: Memories) -> None:
    def nonsense(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("Sure! Here are some facts: the user is nice.")])

    worker = run_worker(store, FunctionModel(nonsense), "I always use tabs when I write Go code")
    assert store.proposals(None) == [] and store.list() == []
    assert worker.last_error
    assert len(ExtractionQueue(store.db)) == 0  # retried once, then dropped: no endless retries


def test_model_failure_proposes_nothing_and_loses_nothing(store: Memories) -> None:
    kept = store.add("The user uses tabs in Go", actor="user")

    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ConnectionError("provider down")

    worker = run_worker(store, FunctionModel(broken), "I always use tabs when I write Go code")
    assert worker.last_error and "provider down" in worker.last_error
    assert store.list() == [kept] and store.proposals(None) == []


def test_secrets_from_the_model_are_dropped(store: Memories) -> None:
    model = structured(facts=["The user's API key is sk-proj-abcdefghijklmnopqrstuv", "The user deploys on Fridays"])
    run_worker(store, model, "my key is sk-proj-abcdefghijklmnopqrstuv and I deploy on Fridays")
    assert [p.text for p in store.proposals(None)] == ["The user deploys on Fridays"]


@pytest.mark.parametrize("mode", ["review", "auto"])
@pytest.mark.parametrize(
    "secret",
    [
        "The user's DB_PASSWORD=hunter2 on staging",
        "The user's GITHUB_TOKEN=abc123def456ghi7",
        "The user's Slack webhook is https://hooks.slack.com/services/T0001/B0001/abcdefghijklmnop",
        "The user's API key is 01234567-89ab-cdef-0123-456789abcdef",
    ],
)
def test_common_credential_spellings_are_dropped(store: Memories, mode: str, secret: str) -> None:
    run_worker(store, structured(facts=[secret, "The user deploys on Fridays"]), f"note: {secret}", mode)
    kept = [m.text for m in store.list(statuses=("active", "proposed", "deleted"))]
    assert kept == ["The user deploys on Fridays"]


def test_short_messages_are_not_sent_to_the_model(store: Memories) -> None:
    calls: list[str] = []
    run_worker(store, structured(facts=["The user says thanks"], calls=calls), "thanks!")
    assert calls == []


@pytest.mark.parametrize(
    "text",
    ["What is the user's name?", "It is written in Rust", "I like tea very much", "None", "tabs", "no facts found",
     "line one\nline two here", "The assistant explained the code"],
)  # fmt: skip
def test_junk_is_not_a_standalone_statement(text: str) -> None:
    assert not is_standalone(text)


def test_a_tiny_model_cannot_flood_the_inbox(store: Memories) -> None:
    facts = [f"The user mentioned topic number {i} today" for i in range(10)]
    model = structured(facts=facts + ["?", "it", "I do"])
    run_worker(store, model, "a long rambling message that mentions many different topics at once")
    assert len(store.proposals(None)) == 3


def test_plan_drops_unknown_ids_duplicates_and_double_targets(store: Memories) -> None:
    m = store.add("The user lives in Paris", actor="user")
    decisions = [
        Decision(event="UPDATE", id="m999", text="The user lives in Rome now"),
        Decision(event="ADD", text="The user lives in Paris"),
        Decision(event="DELETE", id=m.ref),
        Decision(event="UPDATE", id=m.ref, text="The user lives in Lyon now"),
    ]
    changes = plan(["x"], [m], decisions)
    assert [(c.op, c.target) for c in changes] == [("delete", m.id)]


def test_worker_never_blocks_the_caller_and_drains_at_exit(store: Memories) -> None:
    release = asyncio.Event()

    async def slow(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await release.wait()
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"facts": ["The user writes Go daily"]})])

    async def go() -> tuple[bool, list[str]]:
        model = FunctionModel(slow)
        worker = ExtractionWorker(store, lambda: model, "review", PROJECT)
        worker.submit("I write Go every single day at work", "s", 0)  # returns at once
        busy = worker.busy
        notices: list[str] = []
        asyncio.get_running_loop().call_later(0.2, release.set)
        await worker.drain(notices.append, after=0.05)
        return busy, notices

    busy, notices = asyncio.run(go())
    assert busy and notices and "Finishing memory extraction" in notices[0]
    assert [p.text for p in store.proposals(None)] == ["The user writes Go daily"]


def test_queued_work_of_an_interrupted_co_is_resumed(store: Memories) -> None:
    ExtractionQueue(store.db).put("old-session", 7, "I prefer dark themes in every editor", PROJECT)
    item = ExtractionQueue(store.db).claim()  # a co that died while working on it
    assert item is not None
    with store.db.transaction() as tx:
        tx.execute("UPDATE memory_queue SET claimed_at = claimed_at - 3600")

    async def go() -> None:
        worker = ExtractionWorker(store, lambda: structured(facts=["The user prefers dark themes"]), "review", PROJECT)
        worker.start()
        await worker.drain()

    asyncio.run(go())
    [proposal] = store.proposals(None)
    assert (proposal.text, proposal.source_session, proposal.source_seq) == (
        "The user prefers dark themes",
        "old-session",
        7,
    )
