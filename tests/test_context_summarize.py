"""The summariser: prompt contents, focus, previous summaries, chunking."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from co_cli.context.summarize import render_transcript, summarize_messages
from tests.test_context_fixtures import (
    calls,
    conversation,
    failing_model,
    recording_model,
    reply,
    returns,
    summary_message,
    user,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_prompt_asks_for_what_must_survive() -> None:
    model, prompts = recording_model("Goal: fix the parser.")
    summary = await summarize_messages(conversation(2), model)
    assert summary == "Goal: fix the parser."
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
    assert summary == "merged"


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

    assert await summarize_messages(conversation(2), FunctionModel(stream_function=stream)) == "Goal: fix the parser."


def test_a_summary_request_is_never_retried_and_waits_for_silence_only() -> None:
    from co_cli.models import summary_time_limits

    limits = summary_time_limits("openai:gpt-4o-mini", 120.0)
    assert limits == {"timeout": 120.0, "first_event_timeout": 120.0, "max_retries": 0}
