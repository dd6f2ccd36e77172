"""Tool statistics of a turn: how long each tool call ran (timed around its execution, so waiting for the
user's approval does not count) and how each ended, read from the turn's messages."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import Hooks, WrapToolExecuteHandler
from pydantic_ai.messages import ModelMessage, ToolCallPart
from pydantic_ai.tools import ToolDefinition

from co_cli.deps import CoDeps
from co_cli.message_view import views
from co_cli.store.tool_calls import ToolCallRow
from co_cli.vocabulary import ToolOutcome


def tool_timer() -> Hooks[CoDeps]:
    """A capability that adds the time each tool call runs to ``deps.state.tool_seconds`` (by call id)."""
    hooks = Hooks[CoDeps]()

    @hooks.on.tool_execute
    async def timed(
        ctx: RunContext[CoDeps],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: Any,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        started = time.monotonic()
        try:
            return await handler(args)
        finally:
            seconds = ctx.deps.state.tool_seconds
            seconds[call.tool_call_id] = seconds.get(call.tool_call_id, 0.0) + time.monotonic() - started

    return hooks


def tool_calls_of(messages: Sequence[ModelMessage], seconds: dict[str, float]) -> list[ToolCallRow]:
    """One row per tool call in ``messages``: ok, failed (an error, an interrupted call, or arguments the model
    must correct) or denied, with the time it ran. A call sent back for correction and made again counts twice."""
    names: dict[str, str] = {}
    outcomes: dict[str, ToolOutcome] = {}
    order: list[str] = []
    for message in messages:
        for view in views(message):
            call_id = view.tool_call_id or ""
            if view.kind == "tool-call":
                names[call_id] = view.tool_name or "?"
                order.append(call_id)
            elif view.kind == "tool-return" and call_id in names:
                outcome = view.outcome or "success"
                outcomes[call_id] = "ok" if outcome == "success" else "denied" if outcome == "denied" else "failed"
            elif view.kind == "retry" and call_id in names:
                outcomes[call_id] = "failed"
    return [
        ToolCallRow(names[call_id], outcomes.get(call_id, "failed"), round(seconds.get(call_id, 0.0), 6))
        for call_id in order
    ]
