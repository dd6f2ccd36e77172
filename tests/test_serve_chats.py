"""The server's turns in process: one session's requests one after another, a turn that never starts lets its
session go, a session held by another process is refused before anything is written."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelResponse, TextPart

from co_cli.config import load_settings
from co_cli.serve.chats import Finished, TextDelta, TurnRequest
from co_cli.serve.context import ServeContext
from co_cli.serve.errors import ApiError
from co_cli.serve.history import ChatMessage
from co_cli.serve.server import make_context
from co_cli.store import Store
from tests.support.readings import WRITES_GO
from tests.support.scripted_server import Error, ScriptedServer, Text, ToolCalls

pytestmark = pytest.mark.allow_model_requests


@pytest.fixture
def ctx(scripted_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[ServeContext]:
    for name, value in {
        "CO_CLI_BASE_URL": scripted_server.base_url,
        "CO_CLI_MODEL": "scripted",
        "CO_CLI_API_KEY": "test-key",
        "CO_CLI_MEMORY_EXTRACT": "off",
    }.items():
        monkeypatch.setenv(name, value)
    context, _ = make_context(load_settings(cwd=tmp_path), tmp_path)
    yield context
    context.store.close()


async def _answer(
    ctx: ServeContext, request: TurnRequest, finished: list[Finished] | None = None
) -> tuple[str, str, str]:
    turn = await ctx.chats.start(request)
    text, status = [], ""
    async for event in turn.events():
        if isinstance(event, TextDelta):
            text.append(event.text)
        elif isinstance(event, Finished):
            status = event.outcome.status
            if finished is not None:
                finished.append(event)
    return turn.session_id, "".join(text), status


def test_requests_for_one_session_run_one_after_the_other(ctx: ServeContext, scripted_server: ScriptedServer) -> None:
    async def run() -> list[tuple[str, str, str]]:
        first = await _answer(ctx, TurnRequest("first"))
        scripted_server.script(Text("slow one", chunk_size=2, delay=0.02), Text("quick one"))
        both = await asyncio.gather(
            _answer(ctx, TurnRequest("second", session=first[0])),
            _answer(ctx, TurnRequest("third", session=first[0][:10])),
        )
        await ctx.chats.close()
        return [first, *both]

    answers = asyncio.run(run())
    assert [a[1:] for a in answers] == [("echo: first", "ok"), ("slow one", "ok"), ("quick one", "ok")]
    session_id = answers[0][0]
    assert {a[0] for a in answers} == {session_id}
    texts = [m.text for m in ctx.store.messages.transcript(session_id)]
    assert texts == ["first", "echo: first", "second", "slow one", "third", "quick one"]
    assert not ctx.store.locks.holds(session_id)


def test_a_turn_that_never_starts_lets_its_session_go(ctx: ServeContext) -> None:
    async def run() -> tuple[str, str]:
        session_id, _, _ = await _answer(ctx, TurnRequest("hello"))
        abandoned = await ctx.chats.start(TurnRequest("never sent", session=session_id))
        assert ctx.store.locks.holds(session_id)
        abandoned.abandon()
        abandoned.abandon()  # once is enough
        again = await asyncio.wait_for(_answer(ctx, TurnRequest("after", session=session_id)), 10)
        return session_id, again[2]

    session_id, status = asyncio.run(run())
    assert status == "ok"
    assert [m.text for m in ctx.store.messages.transcript(session_id)][2:] == ["after", "echo: after"]


def test_a_session_held_elsewhere_is_refused_and_untouched(ctx: ServeContext, tmp_path: Path) -> None:
    session_id, _, _ = asyncio.run(_answer(ctx, TurnRequest("mine")))
    with Store.open(ctx.paths.db) as other:  # another co process, as far as the lock files can tell
        other.locks.acquire(session_id)
        with pytest.raises(ApiError) as refused:
            asyncio.run(ctx.chats.start(TurnRequest("yours?", session=session_id)))
        other.locks.release(session_id)
    assert refused.value.status == 409 and refused.value.code == "session_busy"
    assert ctx.store.sessions.get(session_id).message_count == 2


def test_unknown_models_and_sessions_are_404(ctx: ServeContext) -> None:
    with pytest.raises(ApiError) as model:
        asyncio.run(ctx.chats.start(TurnRequest("x", model="anthropic:no-such-model")))
    assert model.value.status == 404 and model.value.code == "model_not_found"
    with pytest.raises(ApiError) as session:
        asyncio.run(ctx.chats.start(TurnRequest("x", session="0123456789")))
    assert session.value.status == 404 and session.value.code == "session_not_found"


def test_a_session_changed_in_the_terminal_between_requests_is_rebuilt(
    ctx: ServeContext, scripted_server: ScriptedServer
) -> None:
    session_id, _, _ = asyncio.run(_answer(ctx, TurnRequest("before the pin")))
    with Store.open(ctx.paths.db) as terminal:  # `/pin` in a terminal that resumed the session meanwhile
        terminal.pins.add(session_id, "Always answer in French.", "user")
    asyncio.run(_answer(ctx, TurnRequest("after the pin", session=session_id)))
    sent = scripted_server.chat_requests[-1].all_text
    assert "Always answer in French." in sent and "before the pin" in sent


def test_facts_are_extracted_after_a_served_turn(
    scripted_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name, value in {
        "CO_CLI_BASE_URL": scripted_server.base_url,
        "CO_CLI_MODEL": "scripted",
        "CO_CLI_API_KEY": "test-key",
        "CO_CLI_MEMORY_EXTRACT": "review",
    }.items():
        monkeypatch.setenv(name, value)
    context, _ = make_context(load_settings(cwd=tmp_path), tmp_path)
    scripted_server.script(
        Text("Noted, Go it is."),
        ToolCalls([("final_result", {"facts": [WRITES_GO]})]),
    )

    async def run() -> None:
        await _answer(context, TurnRequest("I write Go at work every day, keep that in mind"))
        await context.chats.close()  # as the server does when it stops: background work finishes

    try:
        asyncio.run(run())
        proposed = [(m.text, m.status) for m in context.store.memories.list(statuses=("proposed",))]
    finally:
        context.store.close()
    assert proposed == [("I write Go at work every day", "proposed")]


def test_the_memories_a_turn_used_are_told(ctx: ServeContext) -> None:
    ctx.store.memories.add("The user's kayak is orange", scope="user", kind="fact", actor="user")
    finished: list[Finished] = []
    asyncio.run(_answer(ctx, TurnRequest("what colour is my kayak?"), finished))
    assert [m.text for m in finished[0].memories] == ["The user's kayak is orange"]
    assert finished[0].usage is not None and finished[0].usage.input_tokens > 0


def test_a_resent_history_finds_its_session_among_many_with_the_same_last_prompt(ctx: ServeContext) -> None:
    """More conversations ending in "yes" than are compared: the one resent is found by its own, longer, prompt."""
    from co_cli.serve.history import ChatMessage

    async def run() -> tuple[str, str]:
        wanted, _, _ = await _answer(ctx, TurnRequest("plan the migration of the billing database"))
        await _answer(ctx, TurnRequest("yes", session=wanted))
        for n in range(25):  # saved more recently than the one resent, each ending in "yes" too
            other = ctx.store.sessions.create(model="scripted", cwd="/", title="other", origin="serve").id
            for prompt in (f"another topic number {n}", "yes"):
                seq = ctx.store.messages.begin_turn(other, prompt)
                ctx.store.messages.finish_turn(other, seq, [ModelResponse(parts=[TextPart(f"echo: {prompt}")])])
        history = [
            ChatMessage("user", "plan the migration of the billing database"),
            ChatMessage("assistant", "echo: plan the migration of the billing database"),
            ChatMessage("user", "yes"),
            ChatMessage("assistant", "echo: yes"),
        ]
        found, _, _ = await _answer(ctx, TurnRequest("go on", history=history))
        return wanted, found

    wanted, found = asyncio.run(run())
    assert found == wanted


def test_pieces_that_come_within_the_pace_are_handed_over_together(
    ctx: ServeContext, scripted_server: ScriptedServer
) -> None:
    """A stream written once per ``pace`` instead of once per piece: the first piece at once, those that follow
    it within the pace together, the turn's end with the last of them; nothing lost or reordered."""
    answer = "pieces of two letters each, forty of them in all, for a stream"
    scripted_server.script(Text(answer, chunk_size=2, delay=0.002))

    async def run() -> list[list[object]]:
        turn = await ctx.chats.start(TurnRequest("stream it"))
        batches = [list(batch) async for batch in turn.batches(pace=0.5)]
        await ctx.chats.close()
        return batches

    batches = asyncio.run(run())
    pieces = [event for batch in batches for event in batch if isinstance(event, TextDelta)]
    assert "".join(piece.text for piece in pieces) == answer and len(pieces) > 20
    assert len(batches) < len(pieces) / 4, [len(batch) for batch in batches]
    assert [type(event) for event in batches[0]] == [TextDelta]
    assert isinstance(batches[-1][-1], Finished) and isinstance(batches[-1][0], TextDelta)


def test_the_event_loop_runs_while_a_new_session_is_saved(ctx: ServeContext, monkeypatch: pytest.MonkeyPatch) -> None:
    """Creating a session and saving the history a client brought wait for the disk in a worker thread: the
    server's other requests go on meanwhile."""
    from co_cli.store.sessions import Sessions

    served: list[str] = []
    create = Sessions.create

    def waits_for_the_loop(self: Sessions, **kwargs: Any) -> Any:
        loop_ran = threading.Event()
        loop.call_soon_threadsafe(lambda: (served.append("create"), loop_ran.set()))
        assert loop_ran.wait(5), "the event loop was blocked while the session was created"
        return create(self, **kwargs)

    monkeypatch.setattr(Sessions, "create", waits_for_the_loop)
    history = [ChatMessage("user", "earlier"), ChatMessage("assistant", "an earlier answer")]

    async def run() -> str:
        nonlocal loop
        loop = asyncio.get_running_loop()
        session_id, _, status = await _answer(ctx, TurnRequest("now", history=history))
        await ctx.chats.close()
        assert status == "ok"
        return session_id

    loop: asyncio.AbstractEventLoop
    session_id = asyncio.run(run())
    assert served == ["create"]
    texts = [m.text for m in ctx.store.messages.transcript(session_id)]
    assert texts == ["earlier", "an earlier answer", "now", "echo: now"]


def test_the_same_request_after_it_failed_continues_its_session(
    ctx: ServeContext, scripted_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retry lands in the session the failed request made; once that session's turn ended long ago, or ended
    well, the same request is a new conversation again."""
    from co_cli.serve import history as chat_history

    async def run() -> tuple[str, str, str, str]:
        scripted_server.script(Error(500, "overloaded"), Error(500, "overloaded"))
        failed, _, status = await _answer(ctx, TurnRequest("count the storks"))
        assert status == "failed"
        assert (await _answer(ctx, TurnRequest("count the storks")))[0] == failed
        retried, text, _ = await _answer(ctx, TurnRequest("count the storks"))
        assert text == "echo: count the storks"
        fresh, _, _ = await _answer(ctx, TurnRequest("count the storks"))  # the last one was answered
        scripted_server.script(Error(500, "overloaded"))
        stale, _, _ = await _answer(ctx, TurnRequest("count the cranes"))
        monkeypatch.setattr(chat_history, "RETRY_WINDOW", -1.0)  # as if it had failed long ago
        later, _, _ = await _answer(ctx, TurnRequest("count the cranes"))
        return failed, retried, fresh, stale if later != stale else ""

    failed, retried, fresh, stale = asyncio.run(run())
    assert retried == failed and fresh != failed and stale
    assert [m.status for m in ctx.store.messages.transcript(failed)] == ["failed", "failed", "ok", "ok"]
