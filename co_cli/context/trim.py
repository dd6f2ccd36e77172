"""Cut long tool results in older turns; the current turn is left whole."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TypeGuard

from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart

from co_cli.context.boundaries import current_turn_start
from co_cli.context.memo import MISS, MessageMemo
from co_cli.message_view import content_text

TRUNCATED_MARKER = "[…truncated, {n} chars total]"
_TRUNCATED_RE = re.compile(r"\n?\[…truncated, (\d+) chars total\]")
OFFLOAD_REF_RE = re.compile(r"\[Full output \(\d+ chars\) saved as ref=[^\]\s;]+;[^\]]*\]")
"""The reference line of an offloaded output's preview (see offload.py); trimming keeps it."""


def is_plain_tool_return(part: object) -> TypeGuard[ToolReturnPart]:
    """A regular tool result (not a typed or provider-native one) whose content may be rewritten."""
    return type(part) is ToolReturnPart


def truncate_text(text: str, max_chars: int) -> str | None:
    """``text`` cut to ``max_chars`` with the marker (an offload reference survives), or None when cutting
    would not make it shorter."""
    if len(text) <= max_chars or _TRUNCATED_RE.search(text[max_chars:]) is not None:
        return None
    ref = OFFLOAD_REF_RE.search(text)
    cut = text[:max_chars] + "\n" + TRUNCATED_MARKER.format(n=len(text))
    if ref is not None and ref.start() >= max_chars:
        cut += "\n" + ref.group(0)
    return cut if len(cut) < len(text) else None


def _trim_message(msg: ModelRequest, max_chars: int) -> ModelRequest:
    new_parts = None
    for part_index, part in enumerate(msg.parts):
        if not is_plain_tool_return(part):
            continue
        cut = truncate_text(content_text(part.content), max_chars)
        if cut is None:
            continue
        if new_parts is None:
            new_parts = list(msg.parts)
        new_parts[part_index] = replace(part, content=cut)
    return msg if new_parts is None else replace(msg, parts=new_parts)


def truncate_tool_returns(
    messages: Sequence[ModelMessage], max_chars: int, *, memo: MessageMemo | None = None
) -> list[ModelMessage]:
    """Copy of ``messages`` where tool results before the current turn are at most ``max_chars`` long
    (plus the marker). ``max_chars`` 0 disables. The input is never mutated.

    ``memo`` (optional) carries results between calls on the same growing history, so a message is
    trimmed once.
    """
    if max_chars <= 0:
        return list(messages)
    boundary = current_turn_start(messages)
    result = list(messages)
    if memo is not None:
        memo.bind(max_chars)
    for index in range(boundary):
        msg = messages[index]
        if not isinstance(msg, ModelRequest):
            continue
        trimmed: Any = memo.get(msg) if memo is not None else MISS
        if trimmed is MISS:
            trimmed = _trim_message(msg, max_chars)
            if memo is not None:
                memo.put(msg, trimmed)
        result[index] = trimmed
    if memo is not None:
        memo.prune(messages)
    return result
