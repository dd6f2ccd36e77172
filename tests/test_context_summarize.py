"""The summariser: prompt contents, focus, previous summaries, chunking, and its typed answer (forced tool,
prompted JSON, plain text)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.profiles import ModelProfile

from co_cli.context.summarize import SummaryMode, render_transcript, summarize_messages
from tests.support.messages import (
    calls,
    conversation,
    failing_model,
    recording_model,
    reply,
    returns,
    summary_message,
    user,
)
from tests.support.summariser import TOOL_ONLY, scripted_summariser, typed_summary

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_prompt_asks_for_what_must_survive() -> None:
    model, prompts = recording_model("Goal: fix the parser.")
    summary = await summarize_messages(conversation(2), model)
    assert summary.text == "Goal: fix the parser." and summary.typed
    prompt = prompts[0]
    for needle in ("latest instructions", "verbatim", "Decisions", "Constraints", "Errors", "failed", "next step"):
        assert needle in prompt
    assert "User: question 1" in prompt
    assert 'Assistant called read_file({"path":"src/file_1.py"})' in prompt
    assert "Tool result (read_file): ok" in prompt
    assert "Focus the summary on" not in prompt


async def test_focus_reaches_the_prompt() -> None:
    model, prompts = recording_model()
    await summarize_messages(conversation(1), model, focus="the database migration")
    assert "Focus the summary on: the database migration" in prompts[0]


async def test_previous_summary_is_passed_to_be_merged() -> None:
    model, prompts = recording_model()
    earlier = summary_message("[Summary of 30 earlier messages]\nThe user renamed Foo to Bar in core.py.")
    await summarize_messages([earlier, reply("ack"), user("go on"), reply("done")], model)
    assert "[Earlier summary]" in prompts[0]
    assert "renamed Foo to Bar in core.py" in prompts[0]
    assert "merge its content" in prompts[0]


async def test_big_middle_is_summarised_in_chunks_then_merged() -> None:
    model, prompts = recording_model(lambda prompt: "partial" if "<transcript>" in prompt else "merged")
    history = conversation(30, "o" * 1500)
    summary = await summarize_messages(history, model, max_input_tokens=2000)
    chunk_prompts = [p for p in prompts if "<transcript>" in p]
    merge_prompts = [p for p in prompts if "<transcript>" not in p]
    assert len(chunk_prompts) >= 3
    assert f"part 1 of {len(chunk_prompts)}" in chunk_prompts[0]
    assert all(len(p) // 4 <= 2000 for p in chunk_prompts)
    assert len(merge_prompts) == 1 and merge_prompts[0].count("<part>") == len(chunk_prompts)
    assert summary.text == "merged"


async def test_small_middle_is_one_call_even_with_a_budget() -> None:
    model, prompts = recording_model()
    await summarize_messages(conversation(2), model, max_input_tokens=100_000)
    assert len(prompts) == 1


async def test_failure_raises() -> None:
    with pytest.raises(RuntimeError, match="rate limited"):
        await summarize_messages(conversation(1), failing_model())


async def test_empty_summary_raises() -> None:
    model, _ = recording_model("   ")
    with pytest.raises(RuntimeError, match="empty summary"):
        await summarize_messages(conversation(1), model)


def test_transcript_clips_huge_tool_results() -> None:
    history = [user("q"), calls(("read", {}, "c")), returns(("read", "z" * 100_000, "c")), reply("ok")]
    entries = render_transcript(history)
    assert len(entries) == 4
    assert len(entries[2]) < 2200 and "chars omitted" in entries[2]


async def test_the_summary_request_is_streamed() -> None:
    """A model that can only stream serves as the summariser: the request's time limit then bounds each
    silence, not the length of the summary."""
    from pydantic_ai.models.function import FunctionModel

    async def stream(messages: object, info: object) -> AsyncIterator[str]:
        for chunk in ("Goal: fix ", "the parser."):
            yield chunk

    summary = await summarize_messages(conversation(2), FunctionModel(stream_function=stream))
    assert summary.text == "Goal: fix the parser." and not summary.typed  # prose, even when shown the schema


def test_a_summary_request_is_never_retried_and_waits_for_silence_only() -> None:
    from co_cli.models import summary_time_limits

    limits = summary_time_limits("openai:gpt-4o-mini", 120.0)
    assert limits == {"timeout": 120.0, "first_event_timeout": 120.0, "max_retries": 0}


# --- the typed answer ---------------------------------------------------------------------------------------


def _profile(native: bool) -> ModelProfile | None:
    return None if native else TOOL_ONLY  # FunctionModel's own profile claims native structured output


def _part_answer(prompt: str, info: AgentInfo) -> ModelResponse:
    """Each part names its own rule, change, person and next step; a merge request gets plain text."""
    if "<transcript>" not in prompt:
        return typed_summary(info, "merged")
    n = prompt.split("This is part ", 1)[1].split(" ", 1)[0]
    return typed_summary(
        info,
        f"part {n}",
        standing_instructions=[f"regla {n}", "regla común"],
        changes=[{"quote": f"cambio {n}", "old": "a", "new": "b"}],
        next_step=f"paso {n}" if n != "3" else None,
        people=["Lucía", f"Persona {n}"],
    )


@pytest.mark.parametrize("native", [True, False])
async def test_the_answer_is_typed_and_its_fields_are_returned_unverified(native: bool) -> None:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assert not info.function_tools
        if native:  # the schema itself, where the model's profile says it is enforced
            assert info.model_request_parameters.output_mode == "native" and not info.output_tools
        else:  # a forced output tool
            assert info.output_tools
        return typed_summary(
            info, "## Goal\nDocs.", standing_instructions=["Schreib kurz."], next_step="Dann testen.", people=["Ada"]
        )

    summary = await summarize_messages(conversation(2), scripted_summariser(respond, profile=_profile(native)))
    assert summary.typed
    assert summary.answer.standing_instructions == ["Schreib kurz."]
    assert (summary.answer.next_step, summary.answer.people) == ("Dann testen.", ["Ada"])


async def test_chunks_carry_their_fields_into_the_merge_the_later_next_step_wins() -> None:
    prompts: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = str(messages[-1].parts[-1].content)  # type: ignore[union-attr]
        prompts.append(prompt)
        return _part_answer(prompt, info)

    summary = await summarize_messages(
        conversation(30, "o" * 1500), scripted_summariser(respond), max_input_tokens=2000
    )
    parts = sum("<transcript>" in p for p in prompts)
    assert parts >= 3 and summary.typed and summary.text == "merged"
    answer = summary.answer
    assert answer.standing_instructions == ["regla 1", "regla común", *(f"regla {n}" for n in range(2, parts + 1))]
    assert [c.quote for c in answer.changes] == [f"cambio {n}" for n in range(1, parts + 1)]
    assert answer.people == ["Lucía", *(f"Persona {n}" for n in range(1, parts + 1))]
    assert answer.next_step == (f"paso {parts}" if parts != 3 else "paso 2")  # part 3 names none


async def test_a_prose_answer_switches_to_prompted_json_once_for_the_session() -> None:
    modes: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        mode = info.model_request_parameters.output_mode
        modes.append(mode)
        if mode == "tool":  # a server that ignores the forced tool call
            return ModelResponse(parts=[TextPart("## Goal\nprose")])
        return typed_summary(info, "## Goal\njson", next_step="Потом тесты.")

    model, mode = scripted_summariser(respond, profile=TOOL_ONLY), SummaryMode()
    first = await summarize_messages(conversation(2), model, mode=mode)
    assert (first.typed, first.text, first.answer.next_step) == (True, "## Goal\njson", "Потом тесты.")
    assert modes == ["tool", "prompted"] and mode.prompted
    await summarize_messages(conversation(2), model, mode=mode)
    assert modes == ["tool", "prompted", "prompted"]  # asked as prompted JSON from the start now


async def test_prose_even_when_shown_the_schema_is_a_plain_text_summary() -> None:
    requests: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        requests.append(info.model_request_parameters.output_mode)
        return ModelResponse(parts=[TextPart("## Goal\nplain words")])

    summary = await summarize_messages(conversation(2), scripted_summariser(respond, profile=TOOL_ONLY))
    assert (summary.typed, summary.text, requests) == (False, "## Goal\nplain words", ["tool", "prompted"])
    assert summary.answer.standing_instructions == [] and summary.answer.next_step is None


async def test_a_model_that_is_prompted_anyway_is_not_asked_twice() -> None:
    """A model whose profile asks for prompted output (and claims no JSON schema): its prose answer is taken as
    plain text at once (asking again would repeat the same request)."""
    requests: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        requests.append(info.model_request_parameters.output_mode)
        return ModelResponse(parts=[TextPart("## Goal\nlocal words")])

    model = scripted_summariser(respond, profile=ModelProfile(default_structured_output_mode="prompted"))
    summary = await summarize_messages(conversation(2), model)
    assert (summary.typed, summary.text, requests) == (False, "## Goal\nlocal words", ["prompted"])


@pytest.mark.parametrize(
    "answer", ['{"summary": "## Goal\\nunfinished', '```json\n{\n  "summary": "## Goal\\nunfinished']
)
async def test_a_broken_json_object_is_no_summary(answer: str) -> None:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(answer)])

    with pytest.raises(RuntimeError, match="neither a summary nor the object asked for"):
        await summarize_messages(conversation(2), scripted_summariser(respond, profile=TOOL_ONLY))


async def test_an_answer_held_to_the_schema_and_cut_short_fails_and_keeps_the_mode() -> None:
    """The engine held the answer to the schema and the token cap cut it: a failure (a digest stands in), not a
    sign that the server ignores structured output, so the next compaction asks the same way."""
    requests: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        requests.append(info.model_request_parameters.output_mode)
        return ModelResponse(parts=[TextPart('{"summary": "## Goal\\nunfinished')])

    mode = SummaryMode()
    model = scripted_summariser(respond, profile=ModelProfile(supports_json_schema_output=True))
    with pytest.raises(RuntimeError, match="cut short"):
        await summarize_messages(conversation(2), model, mode=mode)
    assert requests == ["native"] and not mode.prompted
