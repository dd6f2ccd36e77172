"""Make a history sendable: answer interrupted tool calls, drop results without a call, drop empty requests.

pydantic-ai 2.68 has ``pydantic_ai.messages.repair_messages`` (and runs the same repair before each request),
but it also merges consecutive requests (shifting indices the caller maps to the transcript) and accepts a
result anywhere later in the history. This pass is stricter — a call must be answered in the request right
after its response, as providers require — and keeps message boundaries. Synthetic results carry
pydantic-ai's ``SYNTHESIZED_TOOL_RETURN_METADATA_KEY`` and ``outcome='interrupted'`` so both agree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TypeGuard

from pydantic_ai.messages import (
    SYNTHESIZED_TOOL_RETURN_METADATA_KEY,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    RetryPromptPart,
    ToolCallPart,
    ToolReturnPart,
)

from co_cli.context.memo import MISS, MessageMemo

INTERRUPTED_CONTENT = "interrupted: the tool call did not complete"


def is_tool_result(part: object) -> TypeGuard[ToolReturnPart | RetryPromptPart]:
    """A part answering a tool call: a tool return or a tool-bound retry prompt."""
    return isinstance(part, ToolReturnPart) or (isinstance(part, RetryPromptPart) and part.tool_name is not None)


def synthesized_return(call: ToolCallPart, response: ModelResponse) -> ToolReturnPart:
    """The stand-in result for a call that never completed (deterministic, so repair is idempotent)."""
    return ToolReturnPart(
        tool_name=call.tool_name,
        content=INTERRUPTED_CONTENT,
        tool_call_id=call.tool_call_id,
        tool_kind=call.tool_kind,
        metadata={SYNTHESIZED_TOOL_RETURN_METADATA_KEY: True},
        timestamp=response.timestamp,
        outcome="interrupted",
    )


def _answers_exactly(request: ModelRequest, calls: list[ToolCallPart]) -> bool:
    """Fast check: the request's tool results are exactly one per call."""
    result_ids = [part.tool_call_id for part in request.parts if is_tool_result(part)]
    if len(result_ids) != len(calls):
        return False
    if not calls:
        return True
    return sorted(result_ids) == sorted(call.tool_call_id for call in calls)


def _answer(request: ModelRequest, calls: list[ToolCallPart], response: ModelResponse | None) -> ModelRequest | None:
    """``request`` with results only for ``calls`` (each answered once) and stand-ins for the unanswered;
    the same object when nothing changes, None when nothing is left."""
    if request.parts and _answers_exactly(request, calls):
        return request
    open_ids = Counter(call.tool_call_id for call in calls)
    kept: list[ModelRequestPart] = []
    changed = False
    for part in request.parts:
        if is_tool_result(part):
            call_id = part.tool_call_id
            if open_ids[call_id] > 0:
                open_ids[call_id] -= 1
                kept.append(part)
            else:
                changed = True
            continue
        kept.append(part)
    missing: list[ToolReturnPart] = []
    if response is not None:
        for call in calls:
            if open_ids[call.tool_call_id] > 0:
                open_ids[call.tool_call_id] -= 1
                missing.append(synthesized_return(call, response))
    if missing:
        changed = True
        insert_at = max((i + 1 for i, part in enumerate(kept) if is_tool_result(part)), default=0)
        kept[insert_at:insert_at] = missing
    if not kept:
        return None
    return replace(request, parts=kept) if changed else request


def repair_orphans(messages: Sequence[ModelMessage], *, memo: MessageMemo | None = None) -> list[ModelMessage]:
    """Copy of ``messages`` where every tool call is answered in the request right after its response
        (a synthetic "interrupted" result when it is not), results without a call are dropped and requests
        left empty are removed. The input is never mutated. ``memo`` (optional) reuses the result for a request
    whose preceding response is unchanged since an earlier call."""
    repaired: list[ModelMessage] = []
    calls: list[ToolCallPart] = []
    response: ModelResponse | None = None
    for msg in messages:
        if isinstance(msg, ModelResponse):
            if calls and response is not None:
                repaired.append(ModelRequest(parts=[synthesized_return(call, response) for call in calls]))
            response = msg
            calls = [part for part in msg.parts if isinstance(part, ToolCallPart)]
            repaired.append(msg)
            continue
        fixed: Any = memo.get(msg, response) if memo is not None else MISS
        if fixed is MISS:
            fixed = _answer(msg, calls, response)
            if memo is not None:
                memo.put(msg, fixed, response)
        if fixed is not None:
            repaired.append(fixed)
        calls = []
        response = None
    if calls and response is not None:
        repaired.append(ModelRequest(parts=[synthesized_return(call, response) for call in calls]))
    if memo is not None:
        memo.prune(messages)
    return repaired


def tool_pairs_valid(messages: Sequence[ModelMessage]) -> bool:
    """Whether every tool call is answered exactly in the next request and every result has its call."""
    repaired = repair_orphans(messages)
    return len(repaired) == len(messages) and all(a is b for a, b in zip(repaired, messages, strict=True))
