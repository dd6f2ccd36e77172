"""Trimming tool results in older turns."""

from __future__ import annotations

import copy

from pydantic_ai.messages import ModelRequest, ToolReturnPart

from co_cli.context.memo import MessageMemo
from co_cli.context.offload import REFERENCE
from co_cli.context.trim import truncate_tool_returns
from tests.support.messages import calls, conversation, reply, returns, user


def _return_part(history: list, index: int) -> ToolReturnPart:
    part = history[index].parts[0]
    assert isinstance(part, ToolReturnPart)
    return part


def test_long_output_in_older_turn_is_cut_with_marker() -> None:
    history = conversation(2, "y" * 5000)
    trimmed = truncate_tool_returns(history, 100)
    part = _return_part(trimmed, 2)
    assert part.content.startswith("y" * 100)
    assert part.content.endswith("[…truncated, 5000 chars total]")
    assert len(part.content) < 200
    assert part.tool_name == "read_file" and part.tool_call_id == "call_0"


def test_short_output_is_unchanged() -> None:
    history = conversation(2, "short")
    trimmed = truncate_tool_returns(history, 100)
    assert all(a is b for a, b in zip(trimmed, history, strict=True))


def test_dict_output_is_serialised_before_cutting() -> None:
    history = [
        user("q"),
        calls(("search", {}, "c1")),
        returns(("search", {"hits": ["x" * 50] * 100}, "c1")),
        reply("done"),
        user("next"),
    ]
    part = _return_part(truncate_tool_returns(history, 200), 2)
    assert isinstance(part.content, str)
    assert part.content.startswith('{"hits":["xxx')
    assert "chars total]" in part.content


def test_current_turn_is_never_trimmed() -> None:
    history = [user("q"), calls(("read", {}, "c1")), returns(("read", "z" * 5000, "c1"))]
    trimmed = truncate_tool_returns(history, 100)
    assert _return_part(trimmed, 2).content == "z" * 5000


def test_zero_disables() -> None:
    history = conversation(2, "y" * 5000)
    assert truncate_tool_returns(history, 0) == history


def test_input_is_not_mutated() -> None:
    history = conversation(3, "y" * 5000)
    snapshot = copy.deepcopy(history)
    truncate_tool_returns(history, 50)
    assert history == snapshot


def test_trimming_twice_is_a_no_op() -> None:
    once = truncate_tool_returns(conversation(2, "y" * 5000), 100)
    twice = truncate_tool_returns(once, 100)
    assert _return_part(twice, 2).content == _return_part(once, 2).content


def test_offload_reference_survives_trimming() -> None:
    preview = "line\n" * 300 + REFERENCE.format(n=90000, ref="call_0")
    history = [
        user("q"),
        calls(("read", {}, "call_0")),
        returns(("read", preview, "call_0")),
        reply("ok"),
        user("next"),
    ]
    part = _return_part(truncate_tool_returns(history, 100), 2)
    assert "ref=call_0" in part.content
    assert "truncated" in part.content


def test_output_barely_over_the_limit_is_left_alone() -> None:
    history = [user("q"), calls(("read", {}, "c")), returns(("read", "a" * 105, "c")), reply("ok"), user("n")]
    trimmed = truncate_tool_returns(history, 100)
    assert isinstance(trimmed[2], ModelRequest)
    assert _return_part(trimmed, 2).content == "a" * 105


def test_memo_reuses_results_and_notices_reassigned_parts() -> None:
    history = conversation(3, "y" * 5000)
    memo = MessageMemo()
    first = truncate_tool_returns(history, 100, memo=memo)
    second = truncate_tool_returns([*history, reply("more"), user("again")], 100, memo=memo)
    assert second[2] is first[2]
    assert truncate_tool_returns(history, 100) == first
    history[2].parts = [ToolReturnPart("read_file", "short now", "call_0")]
    third = truncate_tool_returns(history, 100, memo=memo)
    assert _return_part(third, 2).content == "short now"
    assert _return_part(truncate_tool_returns(history, 10, memo=memo), 6).content.startswith("y" * 10 + "\n[")
