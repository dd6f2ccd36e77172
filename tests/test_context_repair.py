"""Repairing interrupted tool calls and orphaned results."""

from __future__ import annotations

import copy

import pytest
from pydantic_ai.messages import (
    SYNTHESIZED_TOOL_RETURN_METADATA_KEY,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    ToolReturnPart,
    UserPromptPart,
    repair_messages,
)

from co_cli.context.repair import INTERRUPTED_CONTENT, repair_orphans, tool_pairs_valid
from tests.support.messages import calls, conversation, reply, returns, user


def test_valid_history_is_returned_as_is() -> None:
    history = conversation(3)
    repaired = repair_orphans(history)
    assert tool_pairs_valid(history)
    assert all(a is b for a, b in zip(repaired, history, strict=True))


def test_interrupted_call_at_the_end_gets_a_new_request() -> None:
    history = [user("q"), calls(("run", {}, "c1"), ("read", {}, "c2"))]
    repaired = repair_orphans(history)
    assert len(repaired) == 3
    last = repaired[-1]
    assert isinstance(last, ModelRequest)
    assert [p.tool_call_id for p in last.parts] == ["c1", "c2"]
    part = last.parts[0]
    assert isinstance(part, ToolReturnPart)
    assert part.content == INTERRUPTED_CONTENT
    assert part.outcome == "interrupted"
    assert part.metadata == {SYNTHESIZED_TOOL_RETURN_METADATA_KEY: True}


def test_interrupted_call_answered_in_following_request_before_the_prompt() -> None:
    history = [user("q"), calls(("run", {}, "c1")), user("sorry, do something else")]
    repaired = repair_orphans(history)
    assert len(repaired) == 3
    parts = repaired[2].parts
    assert isinstance(parts[0], ToolReturnPart) and parts[0].tool_call_id == "c1"
    assert isinstance(parts[1], UserPromptPart)


def test_partly_answered_parallel_calls() -> None:
    history = [user("q"), calls(("a", {}, "c1"), ("b", {}, "c2")), returns(("a", "done", "c1"))]
    repaired = repair_orphans(history)
    ids = [(p.tool_call_id, p.content) for p in repaired[2].parts]
    assert ids == [("c1", "done"), ("c2", INTERRUPTED_CONTENT)]


def test_orphan_results_are_dropped_and_empty_requests_removed() -> None:
    history = [returns(("a", "stale", "gone")), user("q"), reply("hi"), returns(("b", "x", "nope")), user("n")]
    repaired = repair_orphans(history)
    assert len(repaired) == 3
    assert [type(m) for m in repaired] == [ModelRequest, ModelResponse, ModelRequest]


def test_calls_followed_by_another_response_get_a_request_between() -> None:
    history = [user("q"), calls(("a", {}, "c1")), reply("hm"), user("n")]
    repaired = repair_orphans(history)
    assert [type(m).__name__ for m in repaired] == [
        "ModelRequest",
        "ModelResponse",
        "ModelRequest",
        "ModelResponse",
        "ModelRequest",
    ]


def test_tool_retry_answers_a_call() -> None:
    retry = ModelRequest(parts=[ToolReturnPart("a", "bad args", "c1", outcome="retried")])
    assert tool_pairs_valid([user("q"), calls(("a", {}, "c1")), retry])


@pytest.mark.filterwarnings("ignore:`RetryPromptPart` is deprecated")
def test_legacy_retry_prompt_answers_a_call() -> None:
    retry = ModelRequest(parts=[RetryPromptPart("bad args", tool_name="a", tool_call_id="c1")])
    assert tool_pairs_valid([user("q"), calls(("a", {}, "c1")), retry])


def test_repair_is_idempotent_and_does_not_mutate() -> None:
    history = [user("q"), calls(("a", {}, "c1")), user("again"), returns(("x", "y", "zz"))]
    snapshot = copy.deepcopy(history)
    once = repair_orphans(history)
    assert history == snapshot
    assert repair_orphans(once) == once
    assert tool_pairs_valid(once)


def test_pydantic_ai_repair_finds_nothing_left_to_fix() -> None:
    history = [
        returns(("x", "orphan", "o1")),
        user("q"),
        calls(("a", {}, "c1"), ("b", {}, "c2")),
        returns(("a", "ok", "c1")),
        reply("text"),
        user("q2"),
        calls(("c", {}, "c3")),
    ]
    ours = repair_orphans(history)
    theirs = repair_messages(ours)
    synthesized_by_them = [
        part
        for msg in theirs
        for part in msg.parts
        if isinstance(part, ToolReturnPart)
        and part.metadata
        and part.content != INTERRUPTED_CONTENT
        and part.metadata.get(SYNTHESIZED_TOOL_RETURN_METADATA_KEY)
    ]
    assert synthesized_by_them == []
    count = sum(len(m.parts) for m in ours)
    assert sum(len(m.parts) for m in theirs) == count
