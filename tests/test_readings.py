"""What the model read in each of the user's messages, kept by message: memory extraction's reading gives the
rules, changes and next steps; compaction acts on them for the messages it replaces (whatever the summariser
answers); the store keeps them with the session (forks copy them, deleting the session removes them)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic_ai import CancellationToken
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from co_cli.context import plans, standing
from co_cli.context.user_quotes import CHANGES_HEADING, NEXT_STEP_HEADING
from co_cli.memory import people
from co_cli.memory.extract import Reading, said_parts
from co_cli.message_view import user_text
from co_cli.store import ReadPart
from tests.support.summariser import scripted_summariser
from tests.support.turn_core import Core, RecordingView, core, long_echo, streaming_model

__all__ = ["core"]

pytestmark = pytest.mark.allow_model_requests

RULE = "Quando citi un file, scrivi sempre il percorso completo."
CHANGE = "Il database di prova adesso gira su pg-test-4."
STEP = "Dopo la demo sistemiamo la pagina dei prezzi."
ONE_OFF = "Traduci questa frase in inglese, per favore."


def part(quote: str, kind: str, form: str = "statement") -> dict[str, Any]:
    return {"quote": quote, "form": form, "kind": kind, "subject": "I", "about": "user", "person": None, "text": quote,
            "topic": "misc", "replaces": None}  # fmt: skip


READINGS = {
    RULE: [part(RULE.rstrip("."), "rule_for_assistant")],
    CHANGE: [part("adesso gira su pg-test-4", "change")],
    STEP: [part(STEP, "next_step")],
    ONE_OFF: [part(ONE_OFF, "lasting_fact", "request")],
}


def reader() -> FunctionModel:
    """The summarisation model: it reads each message as ``READINGS`` says, and summarises in prose (no typed
    fields: nothing of the user's words comes from the summary)."""

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = user_text(messages[-1]) or ""
        if standing.INSTRUCTIONS in (info.instructions or ""):  # each rule holds for every later answer
            return ModelResponse(parts=[TextPart(json.dumps({"answer": "rule"}))])
        if plans.INSTRUCTIONS in (info.instructions or ""):  # each next step is a plan
            return ModelResponse(parts=[TextPart(json.dumps({"answer": "later"}))])
        if people.INSTRUCTIONS in (info.instructions or ""):  # whom a fact is about is a person
            return ModelResponse(parts=[TextPart(json.dumps({"answer": "person"}))])
        if "<message>" in prompt:
            message = prompt.split("<message>\n", 1)[1].split("\n</message>", 1)[0]
            payload = {"facts": READINGS.get(message, [])}
            if info.output_tools:
                return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, payload)])
            return ModelResponse(parts=[TextPart(json.dumps(payload))])
        return ModelResponse(parts=[TextPart("## Goal\nA demo in Italian.\n\n## Pending and next step\n- Not said.")])

    return scripted_summariser(answer, model_name="reader")


def test_said_parts_keep_the_users_sentences_of_rules_changes_and_next_steps() -> None:
    message = f"{CHANGE} {ONE_OFF}"
    reading = Reading.model_validate(
        {"facts": [*READINGS[CHANGE], *READINGS[ONE_OFF], part("gira su pg-test-9", "change"),
                   part("Il database di prova?", "rule_for_assistant")]}
    )  # fmt: skip
    # the change widened to its sentence; the request is none; an invented quote and a question are dropped
    assert said_parts(reading, message) == [ReadPart("change", CHANGE)]


def test_a_compaction_acts_on_what_each_message_was_read_to_say(core: Core) -> None:
    conv = core.conversation(streaming_model(long_echo), summarizer=reader())
    worker = conv.background.attach_extraction()
    assert worker is not None

    async def talk() -> Any:
        for prompt in [RULE, ONE_OFF, CHANGE, STEP, "E poi?"]:
            await conv.run_turn(prompt, RecordingView(), CancellationToken())
            await worker.drain()
        return await conv.compactions.compact(None)

    result = asyncio.run(talk())
    assert conv.session is not None
    kept = {r.text: r.parts for r in core.store.readings.of_session(conv.session.id)}
    assert len(kept) == 4  # "E poi?" is too short to read
    assert kept[RULE] == (ReadPart("rule", RULE),) and kept[ONE_OFF] == ()
    assert result.standing_instructions == (RULE,) and result.suggestions == ()
    assert [pin.text for pin in conv.pins.all()] == [RULE]
    assert f"{NEXT_STEP_HEADING}\n> {STEP}" in result.summary
    assert f"{CHANGES_HEADING}\n> {CHANGE}" in result.summary


def test_a_prompt_that_carried_a_file_is_acted_on_by_the_reading_of_the_users_words(core: Core) -> None:
    """Extraction reads the user's own words; the transcript holds the prompt with the file it carried: compaction
    finds the reading for that message all the same."""
    conv = core.conversation(streaming_model(long_echo), summarizer=reader())
    worker = conv.background.attach_extraction()
    assert worker is not None
    composed = f'{RULE}\n\n<file path="notes.txt">\nriga uno\nriga due\n</file>'

    async def talk() -> Any:
        await conv.run_turn(composed, RecordingView(), CancellationToken(), words=RULE)
        await worker.drain()
        for prompt in [ONE_OFF, CHANGE, STEP]:
            await conv.run_turn(prompt, RecordingView(), CancellationToken())
            await worker.drain()
        return await conv.compactions.compact(None)

    result = asyncio.run(talk())
    assert conv.session is not None
    [first, *_] = core.store.readings.of_session(conv.session.id)
    assert (first.text, first.stored) == (RULE, composed)
    assert result.standing_instructions == (RULE,)


def test_readings_go_with_their_session(core: Core) -> None:
    store = core.store
    conv = core.conversation(streaming_model(long_echo), summarizer=reader())
    worker = conv.background.attach_extraction()
    assert worker is not None

    async def talk() -> None:
        for prompt in [RULE, ONE_OFF, CHANGE]:
            await conv.run_turn(prompt, RecordingView(), CancellationToken())
            await worker.drain()

    asyncio.run(talk())
    assert conv.session is not None
    session = conv.session.id
    seqs = [r.seq for r in store.readings.of_session(session)]
    assert len(seqs) == 3
    store.readings.save(session, seqs[1], ONE_OFF, [ReadPart("next_step", ONE_OFF)])  # read again: replaced
    assert store.readings.of_session(session)[1].parts == (ReadPart("next_step", ONE_OFF),)
    store.readings.save("no-such-session", 0, RULE, [ReadPart("rule", RULE)])  # kept nowhere
    assert store.readings.of_session("no-such-session") == []
    conv.release()
    fork = store.fork(session, upto_seq=seqs[1])
    assert [r.seq for r in store.readings.of_session(fork.id)] == seqs[:2]
    store.sessions.delete(session)
    assert store.readings.of_session(session) == []
