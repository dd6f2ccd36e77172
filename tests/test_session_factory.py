"""The one way in: ``open_conversation`` opens a conversation new, resumed, forked or brought by a client's
history, with the front end's origin on its deps and its sessions; ``Conversation.close()`` ends its background
work and drains the memory worker."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pydantic_ai.models.function import FunctionModel

from co_cli.models import ModelChoice, ResolvedModel
from co_cli.session import Conversation
from co_cli.session.factory import FrontEnd, Opening, open_conversation
from tests.support.turn_core import Core, core, echo, run, streaming_model

__all__ = ["core"]


def resolved() -> ResolvedModel:
    model: FunctionModel = streaming_model(echo)
    return ResolvedModel(
        model=model, choice=ModelChoice(spec="scripted", reason="test"), context_window=100_000, window_source="test"
    )


def opened(core: Core, opening: Opening, origin: str = "terminal") -> Conversation:
    front = FrontEnd(origin="serve" if origin == "serve" else "terminal")
    loaded = core.loaded
    return open_conversation(loaded.settings, loaded.paths, core.store, core.cwd, resolved(), front, opening)


def test_a_new_conversation_is_saved_with_its_first_prompt(core: Core) -> None:
    conv = opened(core, Opening.new())
    assert conv.session_id is None and core.store.sessions.list() == []
    run(conv, "hello")
    assert conv.session is not None
    saved = core.store.sessions.get(conv.session.id)
    assert (saved.title, saved.origin, saved.message_count) == ("hello", "terminal", 2)
    assert conv.deps.origin == "terminal"
    conv.release()


def test_a_client_history_starts_a_session_the_recorder_creates_under_serve(core: Core) -> None:
    """The server's way in: the session exists at once (its turn needs the id), titled by the client's first
    prompt, holding the client's earlier turns, created by the conversation's recorder with the serve origin."""
    turns = [("what is a fig", "a fruit"), ("and a date", "a fruit too")]
    conv = opened(core, Opening.brought_by_client("what is a fig", turns), origin="serve")
    assert conv.session_id is not None
    saved = core.store.sessions.get(conv.session_id)
    assert (saved.title, saved.origin, saved.message_count) == ("what is a fig", "serve", 4)
    assert conv.deps.origin == "serve" and conv.recorder.held.origin == "serve"
    assert len(conv.working) == 4  # the next prompt continues the client's conversation
    run(conv, "and a plum")
    assert core.store.sessions.get(conv.session_id).message_count == 6
    conv.release()
    empty = opened(core, Opening.brought_by_client("hi"), origin="serve")
    assert empty.session_id is not None and core.store.sessions.get(empty.session_id).message_count == 0
    empty.release()


def test_resumed_and_forked(core: Core) -> None:
    first = opened(core, Opening.new())
    run(first, "one")
    run(first, "two")
    assert first.session is not None
    session = first.session
    first.release()

    resumed = opened(core, Opening.resumed(core.store.sessions.get(session.id)))
    assert resumed.session_id == session.id and len(resumed.working) == 4
    resumed.release()

    forked = opened(core, Opening.forked(core.store.sessions.get(session.id), at=1))
    assert forked.session is not None and forked.session_id != session.id
    assert forked.session.parent_id == session.id and len(forked.working) == 2
    forked.release()


class Worker:
    """A memory worker whose queue takes ``seconds`` to work through."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.drained = self.stopped = False
        self.told: list[str] = []

    async def drain(self, notice: Callable[[str], None] | None = None) -> None:
        if notice is not None:
            notice("finishing")
        await asyncio.sleep(self.seconds)
        self.drained = True

    async def stop(self) -> None:
        self.stopped = True


def test_close_drains_the_memory_worker_or_leaves_it_queued_when_late(core: Core) -> None:
    conv = opened(core, Opening.new())
    quick = Worker(0.01)
    conv.background.memory_worker = quick  # type: ignore[assignment]
    told: list[str] = []
    asyncio.run(conv.close(drain=None, notice=told.append))
    assert quick.drained and not quick.stopped and told == ["finishing"]

    slow = Worker(5)
    conv.background.memory_worker = slow  # type: ignore[assignment]
    asyncio.run(conv.close(drain=0.05))
    assert slow.stopped and not slow.drained  # what it was doing stays queued for the next co
