"""Token estimates for a message history, anchored on the provider's reported usage when possible."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse
from pydantic_ai.tools import ToolDefinition

from co_cli.message_view import content_text, part_kind
from co_cli.synthetic import is_summary
from co_cli.text_tokens import estimate_text_tokens

MESSAGE_OVERHEAD_TOKENS = 4
"""Role markers and separators a provider adds around every message."""

PART_OVERHEAD_TOKENS = 3
"""Framing of one part (a tool call's name and id, a tool result's header)."""

NON_TEXT_ITEM_TOKENS = 1000
"""An image, audio clip or document inside a prompt or tool result."""

TOOL_DEF_OVERHEAD_TOKENS = 10


@dataclass(frozen=True)
class TokenEstimate:
    """How many tokens a history will cost, and where the number came from."""

    total: int
    reported: int | None
    """The anchor: the last usable response's reported input + output tokens, or None."""
    estimated: int
    """Tokens estimated locally: the messages after the anchor, or everything (with overhead) without one."""
    source: Literal["reported", "estimated"]
    overhead: int = 0


def _user_content_tokens(content: str | Sequence[Any]) -> int:
    if isinstance(content, str):
        return estimate_text_tokens(content)
    total = 0
    for item in content:
        total += estimate_text_tokens(item) if isinstance(item, str) else NON_TEXT_ITEM_TOKENS
    return total


def _tool_content_tokens(content: Any) -> int:
    if isinstance(content, str):
        return estimate_text_tokens(content)
    if isinstance(content, list | tuple):
        return sum(_tool_content_tokens(item) for item in content)
    if isinstance(content, dict | int | float | bool) or content is None:
        return estimate_text_tokens(content_text(content))
    if hasattr(content, "media_type") or hasattr(content, "url"):
        return NON_TEXT_ITEM_TOKENS
    return estimate_text_tokens(content_text(content))


def estimate_part_tokens(part: Any) -> int:
    """Estimated tokens of one request or response part."""
    kind = part_kind(part)
    if kind == "user":
        return _user_content_tokens(part.content)
    if kind == "tool-return":
        return PART_OVERHEAD_TOKENS + estimate_text_tokens(part.tool_name) + _tool_content_tokens(part.content)
    if kind in ("text", "thinking", "system"):
        return estimate_text_tokens(part.content)
    if kind == "tool-call":
        args = part.args
        args_text = args if isinstance(args, str) else content_text(args)
        return PART_OVERHEAD_TOKENS + estimate_text_tokens(part.tool_name) + estimate_text_tokens(args_text)
    if kind == "retry":
        return PART_OVERHEAD_TOKENS + estimate_text_tokens(content_text(part.content))
    content = getattr(part, "content", None)
    if isinstance(content, str):
        return estimate_text_tokens(content)
    return 0


def estimate_message_tokens(msg: ModelMessage) -> int:
    """Estimated tokens of one message, framing included."""
    return MESSAGE_OVERHEAD_TOKENS + sum(estimate_part_tokens(part) for part in msg.parts)


def estimate_messages_tokens(messages: Sequence[ModelMessage]) -> int:
    """Estimated tokens of a list of messages, never using reported usage."""
    return sum(estimate_message_tokens(msg) for msg in messages)


def estimate_overhead(instructions: str, tool_defs: Sequence[ToolDefinition]) -> int:
    """Tokens the instructions and tool schemas add to every request."""
    total = estimate_text_tokens(instructions)
    for tool in tool_defs:
        total += TOOL_DEF_OVERHEAD_TOKENS + estimate_text_tokens(tool.name)
        total += estimate_text_tokens(tool.description or "")
        total += estimate_text_tokens(content_text(tool.parameters_json_schema))
    return total


def _request_time(msg: ModelMessage) -> datetime | None:
    """When a request was made, by the local clock (the request's own stamp, else its parts')."""
    if not isinstance(msg, ModelRequest):
        return None
    if msg.timestamp is not None:
        return msg.timestamp
    stamps = [stamp for part in msg.parts if isinstance(stamp := getattr(part, "timestamp", None), datetime)]
    return max(stamps) if stamps else None


def _at_or_after(a: datetime | None, b: datetime | None) -> bool:
    if a is None or b is None:
        return False
    try:
        return a >= b
    except TypeError:  # naive vs aware: cannot tell
        return False


def _anchor_index(messages: Sequence[ModelMessage]) -> int | None:
    """Index of the last response whose reported usage measured this history, or None.

    After a summary, a response only qualifies when the request it answered was made after the summary:
    responses kept verbatim in a compaction's tail sit after the summary but measured the longer history.
    Request stamps come from the local clock, unlike response stamps, which some providers set.
    """
    summary_index = -1
    for i in range(len(messages) - 1, -1, -1):
        if is_summary(messages[i]):
            summary_index = i
            break
    summary_time = _request_time(messages[summary_index]) if summary_index >= 0 else None
    for i in range(len(messages) - 1, summary_index, -1):
        msg = messages[i]
        if not isinstance(msg, ModelResponse) or msg.usage.input_tokens <= 0:
            continue
        if summary_index >= 0:
            previous = messages[i - 1] if i - 1 > summary_index else None
            if previous is None or not _at_or_after(_request_time(previous), summary_time):
                return None  # earlier responses answered even older requests
        return i
    return None


def estimate_history(messages: Sequence[ModelMessage], *, overhead_tokens: int = 0) -> TokenEstimate:
    """Tokens the next request will cost: the last reported usage plus estimates for what came after it.

    Without a usable anchor everything is estimated and ``overhead_tokens`` (instructions and tool
    schemas) is added; with one, the reported input already includes them.
    """
    anchor = _anchor_index(messages)
    if anchor is None:
        estimated = overhead_tokens + estimate_messages_tokens(messages)
        return TokenEstimate(
            total=estimated, reported=None, estimated=estimated, source="estimated", overhead=overhead_tokens
        )
    usage = messages[anchor].usage  # type: ignore[union-attr]
    reported = usage.input_tokens + usage.output_tokens
    estimated = estimate_messages_tokens(messages[anchor + 1 :])
    return TokenEstimate(
        total=reported + estimated,
        reported=reported,
        estimated=estimated,
        source="reported",
        overhead=overhead_tokens,
    )
