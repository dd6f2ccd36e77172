"""The memories a turn's requests were sent are saved with the turn, in its own transaction, filed under its
prompt; deleting the session removes them."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from co_cli.deps import SessionState
from co_cli.session import recorder as recorder_module
from co_cli.session.recorder import Extraction, Recorder, TurnRecord
from co_cli.store.turn_memories import SentMemory
from tests.support.turn_core import Core, core, run, streaming_model

__all__ = ["core"]

pytestmark = pytest.mark.allow_model_requests


def _instructions_of(messages: list[ModelMessage]) -> str:
    return next((m.instructions or "" for m in reversed(messages) if isinstance(m, ModelRequest)), "")


def test_a_turn_saves_the_memories_its_requests_were_sent(core: Core) -> None:
    kayak = core.store.memories.add("The user's kayak is orange", scope="user", kind="fact", actor="user").id
    metric = core.store.memories.add("Answer in metric units", scope="user", kind="instruction", actor="user").id
    bees = core.store.memories.add("The user keeps bees", scope="user", kind="fact", actor="user").id
    sent: list[str] = []
    calls = iter([("set_tasks", {"tasks": [{"text": "paint the kayak"}]})])

    def step(messages: list[ModelMessage]) -> str | tuple[str, dict[str, Any]]:
        sent.append(_instructions_of(messages))
        return next(calls, "done")

    conv = core.conversation(streaming_model(step))
    assert run(conv, "what colour is my kayak?").status == "ok"
    assert conv.session is not None
    assert len(sent) == 2 and all("The user's kayak is orange" in text for text in sent)

    saved = core.store.turn_memories.by_prompt(conv.session.id)
    assert saved == {
        0: [
            SentMemory(metric, "instruction", "Answer in metric units"),
            SentMemory(kayak, "fact", "The user's kayak is orange"),
            SentMemory(bees, "fact", "The user keeps bees"),
        ]
    }, "each memory once, though both requests carried it, under the turn's prompt; the match first, then the fill"
    # The text stays as it was sent when the memory changes later.
    core.store.memories.edit(kayak, "The user's kayak is red")
    run(conv, "and my bees?")
    saved = core.store.turn_memories.by_prompt(conv.session.id)
    assert saved[0][1].text == "The user's kayak is orange"
    second = conv.state.turn_seq
    assert second is not None and sorted(saved) == [0, second]
    assert [m.text for m in saved[second]][:2] == ["Answer in metric units", "The user keeps bees"]
    assert "The user's kayak is red" in [m.text for m in saved[second]], "the changed memory is sent as it is now"


def test_a_turn_with_memory_off_saves_none(core: Core) -> None:
    core.store.memories.add("The user's kayak is orange", scope="user", kind="fact", actor="user")
    core.loaded.settings.memory = False
    conv = core.conversation(streaming_model(lambda messages: "fine"))
    run(conv, "what colour is my kayak?")
    assert conv.session is not None and core.store.turn_memories.by_prompt(conv.session.id) == {}


def _answer(prompt: str) -> list[ModelMessage]:
    return [ModelRequest(parts=[UserPromptPart(prompt)]), ModelResponse(parts=[TextPart("ok")])]


def test_the_memories_commit_with_the_turn_or_not_at_all(core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    state = SessionState()
    recorder = Recorder(core.store, state, core.cwd, lambda: "m")
    seq = recorder.begin("hello")
    memories = [SentMemory(7, "fact", "The user's kayak is orange")]

    def broken(*args: Any) -> None:
        raise RuntimeError("disk full")

    # The last write of the turn fails: the memories written before it in the same transaction are undone.
    monkeypatch.setattr(recorder_module.queue, "put", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        recorder.finish(TurnRecord(seq, _answer("hello"), "ok", memories=memories, extraction=Extraction("hello", "")))
    assert state.info is not None
    session_id = state.info.id
    assert core.store.turn_memories.by_prompt(session_id) == {}
    assert [m.kind for m in core.store.messages.transcript(session_id)] == ["user"], "only the prompt"

    monkeypatch.undo()
    recorder.finish(TurnRecord(seq, _answer("hello"), "ok", memories=memories, extraction=Extraction("hello", "")))
    assert core.store.turn_memories.by_prompt(session_id) == {seq: memories}

    recorder.held.release()
    core.store.sessions.delete(session_id)
    assert core.store.db.read("SELECT count(*) AS n FROM turn_memories")[0]["n"] == 0
