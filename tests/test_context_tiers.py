"""The cheap passes before a summary: pure, pairing-safe, and each reports what it saved."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart

from co_cli.context.repair import tool_pairs_valid
from co_cli.context.tiers import (
    CLAMP_MARKER,
    MIN_CLAMP_CHARS,
    SUPERSEDED_POINTER,
    TIERS,
    clamp_oversized_parts,
    clamp_text,
    drop_superseded_reads,
    trim_old_tool_outputs,
)
from co_cli.message_view import content_text
from co_cli.synthetic import summary_request
from tests.support.messages import ack, calls, conversation, reply, returns, user
from tests.support.planted_facts import planted_conversation

BIG = "line of file content\n" * 200


def read(path: str, call_id: str, output: str = BIG, **extra: Any) -> list[ModelMessage]:
    return [calls(("read_file", {"path": path, **extra}, call_id)), returns(("read_file", output, call_id))]


def result_of(messages: list[ModelMessage], call_id: str) -> str:
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolReturnPart) and part.tool_call_id == call_id:
                return content_text(part.content)
    raise AssertionError(f"no result for {call_id}")


def test_tier_order() -> None:
    assert TIERS == ("drop_superseded_reads", "clamp_oversized_parts", "trim_old_tool_outputs", "summarise")


# --- superseded reads -------------------------------------------------------------------------------------


def test_earlier_read_of_a_path_read_again_becomes_a_pointer() -> None:
    history = [user("look"), *read("src/app.py", "r1"), *read("other.py", "o1"), *read("./src/app.py", "r2")]
    history.append(reply("done"))
    frozen = copy.deepcopy(history)
    result = drop_superseded_reads(history)
    assert history == frozen  # the input is not mutated
    assert result_of(result.messages, "r1") == SUPERSEDED_POINTER.format(tool="read_file", path="src/app.py")
    assert result_of(result.messages, "r2") == BIG
    assert result_of(result.messages, "o1") == BIG
    assert result.parts_changed == 1 and result.changed
    assert result.saved_chars == len(BIG) - len(result_of(result.messages, "r1"))
    assert result.saved_tokens > 0
    assert tool_pairs_valid(result.messages)
    assert result.messages[4] is history[4]  # untouched messages are the same objects


def test_read_of_another_range_is_not_superseded() -> None:
    history = [
        user("look"),
        *read("a.py", "r1", offset=0, limit=100),
        *read("a.py", "r2", offset=100, limit=100),
        *read("a.py", "r3"),
        *read("b.py", "b1", offset=10, limit=10),
        *read("b.py", "b2", offset=0, limit=50),
    ]
    result = drop_superseded_reads(history)
    assert result_of(result.messages, "r1") == BIG  # the later default read is not known to cover it
    assert result_of(result.messages, "r2") == BIG
    assert result_of(result.messages, "b1").startswith("[superseded:")  # lines 10-20 are inside 0-50
    assert result.parts_changed == 1


@pytest.mark.parametrize(
    "later",
    [
        returns(("read_file", "Error: a.py does not exist.", "r2")),
        ModelRequest(parts=[ToolReturnPart("read_file", "The user denied this tool call.", "r2", outcome="denied")]),
    ],
)
def test_a_failed_later_read_supersedes_nothing(later: ModelRequest) -> None:
    history = [user("look"), *read("a.py", "r1"), calls(("read_file", {"path": "a.py"}, "r2")), later]
    result = drop_superseded_reads(history)
    assert result_of(result.messages, "r1") == BIG
    assert not result.changed and result.saved_chars == 0


def test_reads_in_one_response_and_json_string_args() -> None:
    history: list[ModelMessage] = [
        user("look"),
        ModelResponse(
            parts=[
                ToolCallPart("read_file", '{"path": "a.py"}', "r1"),
                ToolCallPart("read_file", {"path": "a.py"}, "r2"),
            ]
        ),
        returns(("read_file", BIG, "r1"), ("read_file", BIG, "r2")),
    ]
    result = drop_superseded_reads(history)
    assert result_of(result.messages, "r1").startswith("[superseded:")
    assert result_of(result.messages, "r2") == BIG
    assert tool_pairs_valid(result.messages)


def test_short_results_and_other_tools_are_left() -> None:
    history = [user("x"), *read("a.py", "r1", output="tiny"), *read("a.py", "r2", output="tiny")]
    history += [calls(("grep", {"path": "a.py", "pattern": "x"}, "g1")), returns(("grep", BIG, "g1"))]
    history += [calls(("grep", {"path": "a.py", "pattern": "x"}, "g2")), returns(("grep", BIG, "g2"))]
    assert not drop_superseded_reads(history).changed


# --- oversized parts --------------------------------------------------------------------------------------


def test_clamp_text() -> None:
    text = "H" * 600 + "T" * 600
    cut = clamp_text(text, 300)
    assert cut is not None and len(cut) <= 300
    assert cut.startswith("HHH") and cut.endswith("TTT")
    marker = re.search(r"\n\[… (\d+) chars clamped …\]\n", cut)
    assert marker is not None and marker.group(0) == CLAMP_MARKER.format(n=marker.group(1))
    assert int(marker.group(1)) == len(text) - (len(cut) - len(marker.group(0)))  # the count is exact
    assert clamp_text("short", 300) is None
    assert clamp_text(cut, 300) is None  # idempotent


def test_clamps_every_oversized_part_but_the_current_prompt() -> None:
    huge = "x" * 5000
    history: list[ModelMessage] = [
        user("old " + huge),
        ModelResponse(
            parts=[TextPart("runaway " + huge), ToolCallPart("write_file", {"path": "a.py", "content": huge}, "w1")]
        ),
        returns(("write_file", "ok", "w1")),
        calls(("run_shell", json.dumps({"command": "echo " + huge}), "s1")),
        returns(("run_shell", {"stdout": huge}, "s1")),
        reply("fine"),
        user("current " + huge),
    ]
    frozen = copy.deepcopy(history)
    result = clamp_oversized_parts(history, 1000)
    assert history == frozen
    out = result.messages
    assert len(out[0].parts[0].content) <= 1000  # type: ignore[union-attr]
    first = out[1].parts
    assert isinstance(first[0], TextPart) and len(first[0].content) <= 1000 and first[0].content.startswith("runaway")
    assert isinstance(first[1], ToolCallPart)
    args = first[1].args_as_dict()
    assert args["path"] == "a.py" and len(args["content"]) <= 1000
    shell_call = out[3].parts[0]
    assert isinstance(shell_call, ToolCallPart) and isinstance(shell_call.args, str)
    assert json.loads(shell_call.args)["command"].startswith("echo ")  # still valid JSON
    assert len(result_of(out, "s1")) <= 1000
    assert out[6] is history[6]  # the current prompt is never cut
    assert result.parts_changed == 5
    assert result.saved_chars > 5 * 3000 and result.saved_tokens > 0
    assert tool_pairs_valid(out)
    again = clamp_oversized_parts(out, 1000)
    assert not again.changed  # idempotent


def test_summaries_are_not_clamped_and_small_limits_do_nothing() -> None:
    summary = summary_request(40, "PHOENIX7 " * 500)
    history: list[ModelMessage] = [summary, ack(), user("q"), reply("a" * 5000)]
    result = clamp_oversized_parts(history, 1000)
    assert result.messages[0] is summary
    assert result.parts_changed == 1
    assert not clamp_oversized_parts(history, MIN_CLAMP_CHARS - 1).changed


def test_nothing_oversized_is_unchanged() -> None:
    history = conversation(5)
    result = clamp_oversized_parts(history, 10_000)
    assert all(a is b for a, b in zip(result.messages, history, strict=True))
    assert result.saved_chars == 0 and result.saved_tokens == 0


# --- old tool outputs -------------------------------------------------------------------------------------


def test_trim_old_tool_outputs_reports_savings() -> None:
    history = conversation(4, output="y" * 3000)
    result = trim_old_tool_outputs(history, 500)
    assert result.parts_changed == 4
    assert result.saved_chars > 4 * 2000
    assert tool_pairs_valid(result.messages)
    assert not trim_old_tool_outputs(history, 0).changed


def test_passes_in_order_on_a_realistic_history() -> None:
    messages = planted_conversation().messages
    assert tool_pairs_valid(messages)
    saved = []
    current = messages
    for tier in (
        drop_superseded_reads,
        lambda m: clamp_oversized_parts(m, 800),
        lambda m: trim_old_tool_outputs(m, 300),
    ):
        result = tier(current)
        assert tool_pairs_valid(result.messages)
        assert len(result.messages) == len(current)
        saved.append(result.saved_chars)
        current = result.messages
    assert saved[0] > 0  # the planted conversation reads src/ledger/sync.py and store.py twice
    assert all(value >= 0 for value in saved)
