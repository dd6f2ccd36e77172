"""Compaction of the middle and of the whole history, and dropping tool outputs."""

from __future__ import annotations

import copy

import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolReturnPart, UserPromptPart

from co_cli.context.compact import (
    CompactionResult,
    NothingToCompact,
    Skipped,
    compact_all,
    compact_middle,
    drop_tool_outputs,
)
from co_cli.context.digest import DIGEST_HEADING
from co_cli.context.repair import tool_pairs_valid
from co_cli.context.user_words import USER_WORDS_HEADING
from co_cli.errors import CoError
from co_cli.synthetic import ACK_TEXT, is_summary
from tests.support.messages import (
    ack,
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


def _summary_text(msg: ModelRequest) -> str:
    part = msg.parts[0]
    assert isinstance(part, UserPromptPart) and isinstance(part.content, str)
    return part.content


async def test_middle_becomes_one_summary_message() -> None:
    history = conversation(10)  # 41 messages; head = first turn (4)
    model, prompts = recording_model("Goal: answer questions.")
    result = await compact_middle(history, model, max_history_messages=10)
    assert result is not None
    assert not result.used_fallback and result.error is None
    assert result.covered == 36  # the tail of >= 5 messages starts at "question 9"
    assert result.messages == [*result.replacement, *history[result.covered :]]
    head, summary, ack = result.replacement[:4], result.replacement[4], result.replacement[5]
    assert head == history[:4]
    assert isinstance(summary, ModelRequest) and is_summary(summary)
    text = _summary_text(summary)
    assert text.startswith(f"[Summary of 32 earlier messages]\nGoal: answer questions.\n\n{USER_WORDS_HEADING}\n")
    assert "\n- question 1\n" in text and "question 9" not in text  # the user's own words, verbatim
    assert "\nKept verbatim:\n" in text and "- src/file_8.py" in text  # an identifier both lacked is appended
    assert result.check.startswith("summary kept 0/") and result.method == "summary"
    assert isinstance(ack, ModelResponse) and ack.parts[0] == TextPart(ACK_TEXT)
    assert result.n_replaced == 32
    assert result.tokens_after < result.tokens_before
    assert "question 4" in prompts[0] and "question 9" not in prompts[0]
    assert tool_pairs_valid(result.messages)


async def test_focus_reaches_the_summariser() -> None:
    model, prompts = recording_model()
    await compact_middle(conversation(10), model, max_history_messages=10, focus="error handling")
    assert "Focus the summary on: error handling" in prompts[0]


async def test_failure_falls_back_to_the_extractive_digest() -> None:
    result = await compact_middle(conversation(10), failing_model("boom"), max_history_messages=10)
    assert isinstance(result, CompactionResult)
    assert result.used_fallback and result.method == "digest"
    assert result.error == "RuntimeError: boom"
    assert DIGEST_HEADING in result.summary
    assert all(f"question {i}" in result.summary for i in range(1, 9))  # every user message of the span
    assert result.tokens_after < result.tokens_before


async def test_an_inflated_summary_grows_the_span_instead_of_dropping_it() -> None:
    model, _ = recording_model(lambda prompt: "verbose " * 5000)
    result = await compact_middle(conversation(10), model, max_history_messages=10)
    assert isinstance(result, Skipped) and result.summary_tokens > 1000
    assert "not clearly smaller" in result.reason


async def test_an_inflated_summary_under_window_pressure_falls_back_to_the_digest() -> None:
    model, _ = recording_model(lambda prompt: "verbose " * 5000)
    result = await compact_middle(conversation(10), model, max_history_messages=10, must_fit=True)
    assert isinstance(result, CompactionResult) and result.method == "digest"
    assert result.error is not None and "not clearly smaller" in result.error


async def test_a_span_too_small_to_pay_is_left_to_grow() -> None:
    model, prompts = recording_model("S.")
    result = await compact_middle(conversation(10), model, max_history_messages=10, min_span_tokens=5000)
    assert isinstance(result, Skipped) and "under ~5000 tokens" in result.reason
    assert prompts == []
    forced = await compact_middle(conversation(10), model, max_history_messages=10, min_span_tokens=5000, must_fit=True)
    assert isinstance(forced, CompactionResult) and forced.method == "summary"


async def test_the_static_marker_is_only_the_last_resort() -> None:
    """When no digest is smaller than the span, only a request that would not fit the window drops it."""
    words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore "
    history = [user("a"), reply("b"), *[m for _ in range(6) for m in (user(words * 2), reply("ok"))]]
    waiting = await compact_middle(history, None, max_history_messages=4)
    assert isinstance(waiting, Skipped) and "no digest" in waiting.reason
    dropped = await compact_middle(history, None, max_history_messages=4, must_fit=True)
    assert isinstance(dropped, CompactionResult) and dropped.method == "marker"
    assert dropped.summary.startswith("[Earlier conversation trimmed")


async def test_an_acknowledgement_is_not_accepted_as_a_summary() -> None:
    earlier = summary_message("[Summary of 50 earlier messages]\nWe chose SQLite for storage in db/core.sqlite.")
    history = [*conversation(1)[:4], earlier, ack(), *conversation(10)[4:]]
    model, _ = recording_model(ACK_TEXT)
    result = await compact_middle(history, model, max_history_messages=10)
    assert isinstance(result, CompactionResult) and result.method == "digest"
    assert result.error is not None and "acknowledgement" in result.error
    assert "db/core.sqlite" in result.summary


async def test_a_summary_that_drops_the_earlier_summary_is_rejected() -> None:
    earlier = summary_message(
        "[Summary of 50 earlier messages]\nCodename PHOENIX7, region us-east-1, port 8443, config at "
        "deploy/prod.yaml, error E4012 fixed by LEDGER_TIMEOUT=45."
    )
    history = [*conversation(1)[:4], earlier, ack(), *conversation(10)[4:]]
    model, _ = recording_model("The user asked questions about files.")
    result = await compact_middle(history, model, max_history_messages=10)
    assert isinstance(result, CompactionResult) and result.method == "digest"
    assert result.error is not None and "earlier summary" in result.error
    for key in ("PHOENIX7", "us-east-1", "8443", "deploy/prod.yaml", "E4012"):
        assert key in result.summary


async def test_previous_summary_is_merged() -> None:
    earlier = summary_message("[Summary of 50 earlier messages]\nWe chose SQLite for storage.")
    history = [*conversation(1)[:4], earlier, ack(), *conversation(10)[4:]]
    model, prompts = recording_model()
    result = await compact_middle(history, model, max_history_messages=10)
    assert result is not None
    assert "We chose SQLite for storage." in prompts[0]
    assert _summary_text(result.replacement[4]).startswith("[Summary of 82 earlier messages]")
    assert sum(is_summary(m) for m in result.messages) == 1


async def test_nothing_to_compact_returns_none() -> None:
    model, prompts = recording_model()
    assert await compact_middle(conversation(2), model, max_history_messages=40) is None
    assert await compact_middle([user("only")], model, max_history_messages=0) is None
    assert prompts == []


async def test_no_model_means_the_digest_without_a_call() -> None:
    result = await compact_middle(conversation(10), None, max_history_messages=10)
    assert isinstance(result, CompactionResult) and result.method == "digest" and result.error is None


async def test_token_budget_shrinks_the_tail() -> None:
    history = conversation(10, "p" * 2000)
    loose = await compact_middle(history, None, max_history_messages=40)
    tight = await compact_middle(history, None, max_history_messages=40, max_tail_tokens=800)
    assert isinstance(loose, CompactionResult) and isinstance(tight, CompactionResult)
    assert tight.covered > loose.covered
    assert len(history) - tight.covered >= 4


async def test_latest_prompt_survives_when_the_tail_starts_mid_turn() -> None:
    history = [user("hello"), reply("hi"), user("Refactor the parser; keep the public API.")]
    for i in range(12):
        history += [calls(("edit", {"n": i}, f"c{i}")), returns(("edit", "ok " * 20, f"c{i}"))]
    result = await compact_middle(history, None, max_history_messages=8)
    assert result is not None
    assert isinstance(history[result.covered], ModelResponse)
    assert "Refactor the parser; keep the public API." in result.summary
    assert isinstance(result.messages[-1], ModelRequest)
    assert tool_pairs_valid(result.messages)


async def test_compact_middle_does_not_mutate_input() -> None:
    history = conversation(10)
    snapshot = copy.deepcopy(history)
    await compact_middle(history, None, max_history_messages=10)
    assert history == snapshot


async def test_compact_all_keeps_latest_instruction_verbatim() -> None:
    history = conversation(6, "x" * 500, final_prompt="Now write the tests, using pytest only.")
    model, prompts = recording_model("Summary body: the user wants tests with pytest.")
    result = await compact_all(history, model, focus="tests")
    assert result.covered == len(history)
    assert len(result.messages) == 2 and result.messages == result.replacement
    summary, ack = result.messages
    assert isinstance(summary, ModelRequest) and isinstance(ack, ModelResponse)
    text = _summary_text(summary)
    assert text.startswith("[Summary of 25 earlier messages]\nSummary body: the user wants tests with pytest.")
    assert text.endswith("Now write the tests, using pytest only.")
    assert "Focus the summary on: tests" in prompts[0]
    assert result.tokens_after < result.tokens_before


async def test_compact_all_raises_on_failure() -> None:
    with pytest.raises(RuntimeError, match="boom"):
        await compact_all(conversation(3), failing_model("boom"))


async def test_compact_all_refuses_to_grow_the_history() -> None:
    """A conversation too short to compact is not an error: one plain line says so."""
    model, _ = recording_model("a much longer summary than the conversation itself " * 20)
    with pytest.raises(NothingToCompact, match="^nothing worth compacting yet") as raised:
        await compact_all([user("hi"), reply("hello")], model)
    assert isinstance(raised.value, CoError) and "\n" not in raised.value.message
    with pytest.raises(NothingToCompact, match="empty"):
        await compact_all([], model)
    with pytest.raises(NothingToCompact, match="nothing new"):
        await compact_all([summary_message("[Summary of 4 earlier messages]\nx"), ack()], model)


def test_drop_tool_outputs_outside_current_turn() -> None:
    history = conversation(3, "d" * 3000)
    history += [calls(("read", {}, "now")), returns(("read", "current " * 100, "now"))]
    dropped = drop_tool_outputs(history)
    old = dropped[2].parts[0]
    assert isinstance(old, ToolReturnPart)
    assert old.content == "[output of read_file dropped to fit the context window (3000 chars)]"
    current = dropped[-1].parts[0]
    assert isinstance(current, ToolReturnPart) and current.content == "current " * 100
    assert history[2].parts[0].content == "d" * 3000
