"""Token estimates: text, messages, overhead, and the reported-usage anchor."""

from __future__ import annotations

from pydantic_ai.messages import ModelRequest, ToolReturnPart
from pydantic_ai.tools import ToolDefinition

from co_cli.context.tokens import (
    estimate_history,
    estimate_message_tokens,
    estimate_overhead,
    estimate_text_tokens,
)
from tests.support.messages import at, conversation, reply, static_marker, summary_message, user


def test_text_tokens_about_four_chars_each() -> None:
    assert estimate_text_tokens("") == 0
    assert estimate_text_tokens("abcd" * 100) == 100
    assert estimate_text_tokens("abc") == 1


def test_non_ascii_text_costs_more_per_char() -> None:
    cjk = "漢字" * 50
    assert estimate_text_tokens(cjk) >= 100
    assert estimate_text_tokens(cjk) > estimate_text_tokens("ab" * 50)


def test_message_tokens_count_dict_tool_output_as_json() -> None:
    small = ModelRequest(parts=[ToolReturnPart("t", {"a": 1}, "c1")])
    big = ModelRequest(parts=[ToolReturnPart("t", {"rows": ["x" * 400] * 10}, "c1")])
    assert estimate_message_tokens(big) > estimate_message_tokens(small) + 900


def test_history_without_usage_is_estimated_and_includes_overhead() -> None:
    history = conversation(2)
    plain = estimate_history(history)
    with_overhead = estimate_history(history, overhead_tokens=500)
    assert plain.source == "estimated" and plain.reported is None
    assert with_overhead.total == plain.total + 500


def test_history_anchors_on_last_reported_usage() -> None:
    history = [user("hi", ts=at(0)), reply("hello", input_tokens=1000, output_tokens=20, ts=at(1))]
    history.append(user("x" * 400, ts=at(2)))
    estimate = estimate_history(history, overhead_tokens=500)
    assert estimate.source == "reported"
    assert estimate.reported == 1020
    assert estimate.estimated == estimate_message_tokens(history[-1])
    assert estimate.total == 1020 + estimate.estimated


def test_anchor_before_a_summary_is_ignored() -> None:
    old = [user("q", ts=at(0)), reply("a", input_tokens=90_000, ts=at(1))]
    summary = summary_message("[Summary of 10 earlier messages]\nstuff")
    # The tail kept after the summary was produced before the compaction.
    history = [summary, *old, user("next", ts=summary.timestamp)]
    history[1] = user("q", ts=at(0))
    assert estimate_history(history).source == "estimated"


def test_anchor_after_a_summary_is_used() -> None:
    summary = summary_message(static_marker(4))
    later = summary.timestamp
    history = [summary, user("q", ts=later), reply("a", input_tokens=300, ts=later), user("more", ts=later)]
    estimate = estimate_history(history)
    assert estimate.source == "reported"
    assert estimate.reported == 300


def test_overhead_counts_instructions_and_tool_schemas() -> None:
    tool = ToolDefinition(
        name="read_file",
        description="Read a file from the workspace." * 5,
        parameters_json_schema={"type": "object", "properties": {"path": {"type": "string"}}},
    )
    base = estimate_overhead("You are helpful.", [])
    assert base == estimate_text_tokens("You are helpful.")
    assert estimate_overhead("You are helpful.", [tool]) > base + 40
