"""Automatic extraction and reconciliation with FunctionModel: each decision, invalid answers, failures, secrets,
the junk filter, and the background worker's queue."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from co_cli.memory.extract import (
    Decision,
    ExtractionWorker,
    is_standalone,
    is_temporary,
    joins_unrelated,
    nearest,
    plan,
    third_person,
)
from co_cli.store.memories import Memories
from co_cli.store.queue import ExtractionQueue
from tests.support.scripted_server import ScriptedServer, Text

pytestmark = pytest.mark.allow_model_requests
PROJECT = "/repo/one"


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
    facts = ["The user lives in Lyon since May", "The user gave up emacs"]
    model = structured(facts=facts, decisions=decisions, calls=calls)
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


def _later(store: Memories) -> None:
    """Move the queue's clock past RETRY_AFTER."""
    with store.db.transaction() as tx:
        tx.execute("UPDATE memory_queue SET claimed_at = claimed_at - ?", (ExtractionQueue.RETRY_AFTER + 1,))


def test_invalid_answer_proposes_nothing_is_reported_and_retried_once_later(store: Memories) -> None:
    calls: list[str] = []

    def nonsense(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(_prompt_of(messages))
        return ModelResponse(parts=[TextPart("Sure! Here are some facts: the user is nice.")])

    model = FunctionModel(nonsense)
    worker = run_worker(store, model, "I always use tabs when I write Go code")
    assert store.proposals(None) == [] and store.list() == []
    assert worker.last_error and worker.prompted
    # the prose answer, then the same question for JSON; then not retried at once: kept for later
    assert len(calls) == 2 and len(ExtractionQueue(store.db)) == 1

    async def next_turn() -> None:
        worker.start()
        await worker.drain()

    asyncio.run(next_turn())
    assert len(calls) == 2  # still too early
    _later(store)
    asyncio.run(next_turn())
    assert len(calls) == 3 and len(ExtractionQueue(store.db)) == 0  # retried once, then dropped


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
        "The user's Jenkins password is hunter2",
        "The user's PIN is 4821",
    ],
)
def test_common_credential_spellings_are_dropped(store: Memories, mode: str, secret: str) -> None:
    message = f"note: {secret}. And I deploy on Fridays"
    run_worker(store, structured(facts=[secret, "The user deploys on Fridays"]), message, mode)
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
    facts = [f"The user mentioned topic number {i} at work" for i in range(10)]
    model = structured(facts=facts + ["?", "it", "I do"])
    run_worker(store, model, "at work I mentioned topic number 0, 1, 2, 3, 4, 5, 6, 7, 8 and 9")
    assert len(store.proposals(None)) == 3


def test_plan_drops_unknown_ids_duplicates_and_double_targets(store: Memories) -> None:
    m = store.add("The user lives in Paris", actor="user")
    decisions = [
        Decision(event="UPDATE", id="m999", text="The user lives in Rome now"),
        Decision(event="ADD", text="The user lives in Paris"),
        Decision(event="UPDATE", id=m.ref, text="The user lives in Lyon now"),
        Decision(event="DELETE", id=m.ref),
    ]
    changes = plan(["x"], [m], decisions)
    assert [(c.op, c.target) for c in changes] == [("update", m.id)]


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


# ----- what a small model gets wrong, checked in the plan -----


def test_a_new_fact_called_none_or_left_out_is_added(store: Memories) -> None:
    style = store.add("The user writes Python with black formatting", actor="user")
    facts = ["The user writes commit messages in the imperative", "The project deadline is June 3"]
    decisions = [Decision(event="NONE", id=style.ref), Decision(event="NONE", text=facts[0])]
    changes = plan(facts, [style], decisions)
    assert [(c.op, c.text) for c in changes] == [("add", facts[0]), ("add", facts[1])]
    # ... but a fact that an existing memory already says is not added again
    assert plan(["The user writes Python with black formatting"], [style], [Decision(event="NONE")]) == []


def test_a_fact_an_update_already_states_is_not_added_twice(store: Memories) -> None:
    home = store.add("The user lives in Paris", actor="user")
    decisions = [Decision(event="UPDATE", id=home.ref, text="The user lives in Lyon since May")]
    changes = plan(["The user lives in Lyon"], [home], decisions)
    assert [(c.op, c.target) for c in changes] == [("update", home.id)]
    # ... also in other words
    changes = plan(["The user moved to Lyon"], [home], decisions)
    assert [(c.op, c.target) for c in changes] == [("update", home.id)]


@pytest.mark.parametrize(
    ("first", "third"),
    [
        ("Carol reviews my pull requests", "Carol reviews the user's pull requests"),
        ("I always use tabs in Go", "The user always uses tabs in Go"),
        ("I'm a backend developer at Acme", "The user is a backend developer at Acme"),
        ("My editor is Helix", "The user's editor is Helix"),
        ("We deploy on Fridays", "The user's team deploys on Fridays"),
        ("Our project Kestrel is a billing service", "The user's project Kestrel is a billing service"),
        ("We're a team of five", "The user's team is a team of five"),
    ],
)
def test_first_person_facts_are_rewritten_not_dropped(first: str, third: str) -> None:
    assert third_person(first) == third
    assert [(c.op, c.text) for c in plan([first], [], None)] == [("add", third)]


def test_a_delete_needs_the_fact_that_replaces_it(store: Memories) -> None:
    alice = store.add("Alice reviews the user's pull requests", actor="user")
    delete = Decision(event="DELETE", id=alice.ref)
    # the replacing fact is first person: rewritten and kept, so the old reviewer may go
    changes = plan(["Carol reviews my pull requests"], [alice], [delete])
    assert [(c.op, c.target) for c in changes] == [("delete", alice.id), ("add", None)]
    assert changes[1].text == "Carol reviews the user's pull requests"
    # no kept fact on the topic (the new one was junk): the old reviewer stays
    assert plan(["it is Carol"], [alice], [delete]) == []


def test_neighbours_share_a_topic_not_just_the_word_user(store: Memories) -> None:
    name = store.add("The user's name is Sam", actor="user")
    shell = store.add("The user uses fish as shell", actor="user")
    assert [m.id for m in nearest(store, ["The user prefers dark themes"], PROJECT)] == []
    assert [m.id for m in nearest(store, ["The user switched the shell to zsh"], PROJECT)] == [shell.id]
    assert name.id not in [m.id for m in nearest(store, ["The user feels stressed about work"], PROJECT)]


def test_a_change_finds_the_memory_it_changes_through_its_topic(store: Memories) -> None:
    home = store.add("The user lives in Paris", actor="user")
    editor = store.add("The user edits code in vim", actor="user")
    assert [m.id for m in nearest(store, ["The user moved to Lyon last month"], PROJECT)] == [home.id]
    assert [m.id for m in nearest(store, ["The user switched to helix"], PROJECT)] == [editor.id]


@pytest.mark.parametrize(
    ("old", "merged"),
    [
        ("The user's name is Sam", "The user's name is Sam and the user is worried about the release"),
        ("The project Kestrel is a Rust CLI", "The project Kestrel is a Rust CLI; the deadline moved to June 3"),
        ("The user uses fish as shell", "The user uses fish as shell, while Bob edits code with emacs"),
        ("The user writes mostly Go", "The user writes mostly Go and the project Kestrel is a billing service in Go"),
    ],
)
def test_an_update_joining_unrelated_statements_is_refused(store: Memories, old: str, merged: str) -> None:
    memory = store.add(old, actor="user")
    assert joins_unrelated(merged, old)
    assert plan([], [memory], [Decision(event="UPDATE", id=memory.ref, text=merged)]) == []


def test_a_real_update_is_not_a_join(store: Memories) -> None:
    memory = store.add("The user lives in Paris", actor="user")
    update = "The user lives in Lyon since May and works from home there"
    assert not joins_unrelated("The user lives in Lyon since May", memory.text)
    changes = plan([], [memory], [Decision(event="UPDATE", id=memory.ref, text="The user lives in Lyon since May")])
    assert [(c.op, c.target) for c in changes] == [("update", memory.id)]
    assert joins_unrelated(update, memory.text)


@pytest.mark.parametrize(
    "text",
    ["The user is tired today", "The user feels stressed about the release", "The user is in a bad mood",
     "The user is busy right now", "The user needs a regex for ISO dates", "The user wants to profile a Go program",
     "The user wants good morning translated into French"],
)  # fmt: skip
def test_passing_states_are_not_remembered(text: str) -> None:
    assert is_temporary(text) and not is_standalone(text)
    assert plan([text], [], None) == []


def test_durable_facts_are_not_taken_for_passing_states() -> None:
    for text in (
        "The user lives in Lyon",
        "The user works at Acme on the billing team",
        "The user prefers tabs",
        "The user writes commit messages in the imperative mood",
        "The user wants tests for every bug fix",
    ):
        assert not is_temporary(text) and is_standalone(text)


# ----- servers that ignore a forced tool call (scripted OpenAI-compatible server) -----


def _server_model(server: ScriptedServer) -> Any:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai_compatible import OpenAICompatibleProvider

    provider = OpenAICompatibleProvider("scripted", base_url=server.base_url, api_key="test-key")
    return OpenAIChatModel("scripted", provider=provider)


def _ignores_tool_choice(prose: str, facts: list[str]) -> Any:
    """A server that never enforces tool_choice: with tools offered the model answers ``prose``; asked for JSON
    in its instructions (prompted output) it answers the JSON object."""

    def respond(request: dict[str, Any]) -> Text:
        if request.get("tools"):
            return Text(prose)
        return Text(json.dumps({"facts": facts}))

    return respond


def test_a_server_that_answers_prose_gets_prompted_json(store: Memories) -> None:
    with ScriptedServer() as server:
        server.responder = _ignores_tool_choice("The user lives in Lyon.", ["The user lives in Lyon"])
        model = _server_model(server)
        worker = run_worker(store, model, "I live in Lyon with my two cats", "auto")
        assert worker.prompted and worker.last_error is None and len(worker.queue) == 0
        assert [m.text for m in store.list()] == ["The user lives in Lyon"]
        requests = server.chat_requests
        assert len(requests) == 2  # the forced tool call answered in prose, then the same question for JSON
        assert requests[0].body and requests[0].body.get("tool_choice") == "required"
        assert requests[1].body and not requests[1].body.get("tools") and '"facts"' in requests[1].all_text

        async def next_message() -> None:  # from now on JSON at once: one request (no neighbours to reconcile)
            worker.submit("My two cats are called Tom and Jerry", "s", 2)
            await worker.drain()

        server.responder = _ignores_tool_choice("prose", ["The user's cats are called Tom and Jerry"])
        asyncio.run(next_message())
        assert len(server.chat_requests) == 3
    assert len(store.list()) == 2


def test_json_in_text_is_accepted_in_one_request(store: Memories) -> None:
    fenced = '```json\n{"facts": ["The user uses neovim daily"]}\n```'
    with ScriptedServer() as server:
        server.responder = _ignores_tool_choice(fenced, [])
        run_worker(store, _server_model(server), "I use neovim every day for everything", "auto")
        requests = server.chat_requests
    assert [m.text for m in store.list()] == ["The user uses neovim daily"]
    assert len(requests) == 1


def test_never_more_than_two_requests_per_message(store: Memories) -> None:
    store.add("The user lives in Paris", actor="user")
    with ScriptedServer() as server:
        server.responder = lambda request: Text("I cannot comply, here is some prose about Lyon.")
        model = _server_model(server)

        async def go() -> None:
            worker = ExtractionWorker(store, lambda: model, "auto", PROJECT)
            worker.prompted = True  # even in prompted mode, an invalid answer is not re-asked
            worker.submit("I moved from Paris to Lyon this spring", "s", 0)
            await worker.drain()
            _later(store)
            worker.start()
            await worker.drain()

        asyncio.run(go())
        requests = server.chat_requests
    assert len(requests) == 2  # two attempts of one request each, the second later
    assert [m.text for m in store.list()] == ["The user lives in Paris"]
