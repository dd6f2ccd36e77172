"""History boundaries: head, tail, summary messages."""

from __future__ import annotations

from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart

from co_cli.context.boundaries import (
    current_turn_start,
    find_head_end,
    find_tail_start,
    is_user_turn_start,
    latest_request,
)
from co_cli.context.report import context_report
from co_cli.context.summarize import render_transcript
from co_cli.message_view import user_text
from co_cli.synthetic import is_summary, summary_request
from tests.support.messages import calls, conversation, reply, returns, static_marker, summary_message, user


def test_head_is_first_exchange() -> None:
    assert find_head_end([user("hi"), reply("hello"), user("more"), reply("ok")]) == 2


def test_head_spans_tool_calls_of_the_first_run() -> None:
    assert find_head_end(conversation(2)) == 4


def test_head_is_zero_without_a_text_answer() -> None:
    assert find_head_end([user("q"), calls(("a", {}, "c1")), returns(("a", "x", "c1"))]) == 0


def test_head_does_not_stop_at_text_that_also_calls_tools() -> None:
    mixed = ModelResponse(parts=[TextPart("Let me look."), ToolCallPart("a", {}, "c1")])
    history = [user("q"), mixed, returns(("a", "x", "c1")), reply("done")]
    assert find_head_end(history) == 4


def test_tail_starts_at_a_user_turn_with_enough_messages() -> None:
    history = conversation(5)  # 21 messages, user turns at 0, 4, 8, 12, 16, 20
    assert find_tail_start(history, 4) == 16
    assert find_tail_start(history, 6) == 12
    assert find_tail_start(history, 1) == 20


def test_tail_never_starts_with_a_tool_result() -> None:
    history = conversation(5)
    for min_tail in range(1, len(history)):
        start = find_tail_start(history, min_tail)
        if start:
            assert is_user_turn_start(history[start]) or isinstance(history[start], ModelResponse)


def test_tail_inside_one_long_turn_starts_at_a_response() -> None:
    history = [user("do it"), reply("ok")]
    history.append(user("long task"))
    for i in range(10):
        history += [calls(("step", {}, f"c{i}")), returns(("step", "done", f"c{i}"))]
    start = find_tail_start(history, 4, head_end=find_head_end(history))
    assert isinstance(history[start], ModelResponse)
    assert len(history) - start >= 4


def test_tail_is_zero_when_history_is_too_short() -> None:
    assert find_tail_start(conversation(1), 10) == 0


def test_summary_messages_are_recognised() -> None:
    assert is_summary(summary_message("[Summary of 12 earlier messages]\nblah"))
    assert is_summary(summary_message(static_marker(3)))
    assert is_summary(summary_request(3, "body")) and is_summary(summary_request(3, None))
    assert not is_summary(user("[Summary of my day]"))
    assert not is_summary(reply("[Summary of 12 earlier messages]"))


def test_a_prompt_worded_like_a_summary_is_the_users() -> None:
    """co recognises its summaries by their metadata mark, never by their wording."""
    typed = user("[Summary of 3 earlier messages] hello")
    history = [user("first"), reply("ok"), typed]
    assert not is_summary(typed)
    assert user_text(typed) == "[Summary of 3 earlier messages] hello"
    assert is_user_turn_start(typed)
    assert latest_request(history) == (2, "[Summary of 3 earlier messages] hello")
    report = context_report(
        history,
        context_window=1000,
        window_source="test",
        threshold=0.8,
        overhead_tokens=0,
        transcript_count=3,
        compactions=0,
        offload_dir=None,
    )
    assert report.breakdown["summaries"] == 0 and report.breakdown["user"] > 0
    assert render_transcript([typed]) == ["User: [Summary of 3 earlier messages] hello"]


def test_summary_is_not_a_user_turn_start() -> None:
    summary = summary_message(static_marker(3))
    assert not is_user_turn_start(summary)
    history = [user("a"), reply("b"), summary, reply("ack")]
    # A summary after the latest prompt carries that prompt, so the current turn starts there.
    assert current_turn_start(history) == 2
    assert current_turn_start([*history, user("new")]) == 4
    assert current_turn_start([summary, reply("ack")]) == 0
    assert current_turn_start([reply("x")]) == 0
    assert isinstance(history[2], ModelRequest)
