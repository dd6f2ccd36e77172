"""The cheap passes tried before a summary, in order: each is pure, keeps every tool call paired with its
result, and reports what it saved, so compaction can stop as soon as the context fits.

1. ``drop_superseded_reads``: an earlier ``read_file`` result for a path read again later becomes a pointer.
2. ``clamp_oversized_parts``: any single part past a size (a runaway answer, a huge tool argument or
   result) is cut head + tail; the user's current prompt never is.
3. ``trim_old_tool_outputs``: tool results before the current turn are cut (``co_cli.context.trim``).
4. summarise (``co_cli.context.compact``), only when the passes above were not enough.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart

from co_cli.context.boundaries import latest_user_prompt_index
from co_cli.context.tokens import estimate_message_tokens
from co_cli.context.trim import is_plain_tool_return, truncate_tool_returns
from co_cli.message_view import content_text, part_kind, views
from co_cli.synthetic import is_summary

__all__ = [
    "CLAMP_MARKER",
    "SUPERSEDED_POINTER",
    "TIERS",
    "TierResult",
    "clamp_oversized_parts",
    "clamp_text",
    "drop_superseded_reads",
    "trim_old_tool_outputs",
]

TIERS: tuple[str, ...] = ("drop_superseded_reads", "clamp_oversized_parts", "trim_old_tool_outputs", "summarise")
"""The passes of a compaction, in the order they are tried (names for the compaction's record)."""

READ_TOOL = "read_file"
SUPERSEDED_POINTER = "[superseded: {tool} of {path} was read again later]"
CLAMP_MARKER = "\n[… {n} chars clamped …]\n"
MIN_CLAMP_CHARS = 200
"""Below this a clamp would leave too little of the head and tail to be useful: the pass does nothing."""


@dataclass(frozen=True)
class TierResult:
    """What one pass produced and how much it saved."""

    messages: list[ModelMessage]
    saved_chars: int
    """Characters of part text removed."""
    saved_tokens: int
    """Estimated tokens removed (``co_cli.context.tokens``)."""
    parts_changed: int

    @property
    def changed(self) -> bool:
        return self.parts_changed > 0


def _part_chars(message: ModelMessage) -> int:
    return sum(len(view.text) for view in views(message))


def _result(original: Sequence[ModelMessage], messages: list[ModelMessage], parts_changed: int) -> TierResult:
    saved_chars = 0
    saved_tokens = 0
    for before, after in zip(original, messages, strict=True):
        if before is not after:
            saved_chars += _part_chars(before) - _part_chars(after)
            saved_tokens += estimate_message_tokens(before) - estimate_message_tokens(after)
    return TierResult(messages, saved_chars, saved_tokens, parts_changed)


# --- 1. superseded reads ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Read:
    order: tuple[int, int]
    call_id: str
    path: str
    """Normalised, for comparing."""
    shown: str
    """As the call wrote it, for the pointer."""
    offset: int
    limit: int | None


def _args(part: ToolCallPart) -> dict[str, Any] | None:
    args: Any = part.args
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return None
    return args if isinstance(args, dict) else None


def _normal_path(path: str) -> str:
    return posixpath.normpath(path.strip())


def _as_int(value: Any, default: int | None) -> int | None:
    if value is None:
        return default
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _reads(messages: Sequence[ModelMessage]) -> list[_Read]:
    found: list[_Read] = []
    for index, message in enumerate(messages):
        if not isinstance(message, ModelResponse):
            continue
        for part_index, part in enumerate(message.parts):
            if not isinstance(part, ToolCallPart) or part.tool_name != READ_TOOL:
                continue
            args = _args(part)
            if args is None or not isinstance(args.get("path"), str) or not args["path"].strip():
                continue
            offset = _as_int(args.get("offset"), 0)
            limit = _as_int(args.get("limit"), None)
            if offset is None or ("limit" in args and args["limit"] is not None and limit is None):
                continue  # arguments we cannot compare
            path = args["path"].strip()
            found.append(_Read((index, part_index), part.tool_call_id, _normal_path(path), path, offset, limit))
    return found


def _covers(later: _Read, earlier: _Read) -> bool:
    """Whether ``later`` read at least the lines ``earlier`` did (the default limit only matches itself)."""
    if later.path != earlier.path:
        return False
    if later.limit is None or earlier.limit is None:
        return later.limit is None and earlier.limit is None and later.offset == earlier.offset
    return later.offset <= earlier.offset and later.offset + later.limit >= earlier.offset + earlier.limit


def _results(messages: Sequence[ModelMessage]) -> dict[str, tuple[int, int]]:
    """tool_call_id → (message index, part index) of its plain tool result."""
    found: dict[str, tuple[int, int]] = {}
    for index, message in enumerate(messages):
        if not isinstance(message, ModelRequest):
            continue
        for part_index, part in enumerate(message.parts):
            if is_plain_tool_return(part):
                found.setdefault(part.tool_call_id, (index, part_index))
    return found


def _usable(messages: Sequence[ModelMessage], where: tuple[int, int] | None) -> bool:
    """A successful read result (an error or a denied read supersedes nothing)."""
    if where is None:
        return False
    part = messages[where[0]].parts[where[1]]
    if not is_plain_tool_return(part) or part.outcome != "success":
        return False
    return not content_text(part.content).lstrip().startswith("Error:")


def drop_superseded_reads(messages: Sequence[ModelMessage]) -> TierResult:
    """Copy of ``messages`` where a ``read_file`` result is a one-line pointer when the same path (and at
    least the same lines) was read again later with success. The input is never mutated."""
    reads = _reads(messages)
    results = _results(messages)
    replaced: dict[int, dict[int, str]] = {}
    for i, earlier in enumerate(reads):
        where = results.get(earlier.call_id)
        if where is None or not _usable(messages, where):
            continue
        if not any(
            _covers(later, earlier) and _usable(messages, results.get(later.call_id)) for later in reads[i + 1 :]
        ):
            continue
        part = messages[where[0]].parts[where[1]]
        pointer = SUPERSEDED_POINTER.format(tool=READ_TOOL, path=earlier.shown)
        if is_plain_tool_return(part) and len(pointer) < len(content_text(part.content)):
            replaced.setdefault(where[0], {})[where[1]] = pointer
    out = list(messages)
    changed = 0
    for index, by_part in replaced.items():
        message = messages[index]
        assert isinstance(message, ModelRequest)
        parts = list(message.parts)
        for part_index, pointer in by_part.items():
            part = parts[part_index]
            if is_plain_tool_return(part):
                parts[part_index] = replace(part, content=pointer)
                changed += 1
        out[index] = replace(message, parts=parts)
    return _result(messages, out, changed)


# --- 2. oversized parts -----------------------------------------------------------------------------------


def clamp_text(text: str, max_chars: int) -> str | None:
    """``text`` cut to at most ``max_chars`` characters as head + marker + tail, or None when it fits."""
    if len(text) <= max_chars:
        return None
    room = max_chars - len(CLAMP_MARKER.format(n=len(text)))
    if room < 2:
        return None
    head = room * 2 // 3
    tail = room - head
    omitted = len(text) - head - tail
    return text[:head] + CLAMP_MARKER.format(n=omitted) + (text[-tail:] if tail else "")


def _clamp_value(value: Any, max_chars: int) -> tuple[Any, int]:
    """A tool argument with every string inside it clamped; and how many strings were."""
    if isinstance(value, str):
        cut = clamp_text(value, max_chars)
        return (value, 0) if cut is None else (cut, 1)
    if isinstance(value, dict):
        changed = 0
        out: dict[Any, Any] = {}
        for key, item in value.items():
            out[key], n = _clamp_value(item, max_chars)
            changed += n
        return (out, changed) if changed else (value, 0)
    if isinstance(value, list):
        changed = 0
        items: list[Any] = []
        for item in value:
            new_item, n = _clamp_value(item, max_chars)
            items.append(new_item)
            changed += n
        return (items, changed) if changed else (value, 0)
    return value, 0


def _clamp_args(part: ToolCallPart, max_chars: int) -> ToolCallPart | None:
    args = part.args
    if isinstance(args, dict):
        new_args, changed = _clamp_value(args, max_chars)
        return replace(part, args=new_args) if changed else None
    if not isinstance(args, str) or len(args) <= max_chars:
        return None
    try:
        parsed = json.loads(args)
    except ValueError:
        cut = clamp_text(args, max_chars)  # not JSON anyway: cut it as text
        return None if cut is None else replace(part, args=cut)
    new_parsed, changed = _clamp_value(parsed, max_chars)
    return replace(part, args=json.dumps(new_parsed, ensure_ascii=False)) if changed else None


def _clamp_part(part: Any, max_chars: int) -> Any | None:
    """The part with its text clamped, or None when it is left as it is."""
    kind = part_kind(part)
    if kind in ("user", "text", "retry"):
        if not isinstance(part.content, str):
            return None
        cut = clamp_text(part.content, max_chars)
        return None if cut is None else replace(part, content=cut)
    if kind == "tool-call":
        return _clamp_args(part, max_chars)
    if kind == "tool-return" and is_plain_tool_return(part):
        cut = clamp_text(content_text(part.content), max_chars)
        return None if cut is None else replace(part, content=cut)
    return None  # thinking (may carry a provider signature), system prompts, provider-native parts


def clamp_oversized_parts(messages: Sequence[ModelMessage], max_chars: int) -> TierResult:
    """Copy of ``messages`` where every user prompt, answer text, tool argument string and tool result
    longer than ``max_chars`` is cut head + tail with a marker (result at most ``max_chars``). The user's
    current prompt and co's summaries are never cut; ``max_chars`` below ``MIN_CLAMP_CHARS`` does nothing.
    The input is never mutated."""
    out = list(messages)
    if max_chars < MIN_CLAMP_CHARS:
        return _result(messages, out, 0)
    protected = latest_user_prompt_index(messages)
    changed = 0
    for index, message in enumerate(messages):
        if is_summary(message):
            continue
        new_parts: list[Any] | None = None
        for part_index, part in enumerate(message.parts):
            if index == protected and part_kind(part) == "user":
                continue
            clamped = _clamp_part(part, max_chars)
            if clamped is None:
                continue
            if new_parts is None:
                new_parts = list(message.parts)
            new_parts[part_index] = clamped
            changed += 1
        if new_parts is None:
            continue
        if isinstance(message, ModelRequest):
            out[index] = replace(message, parts=new_parts)
        else:
            out[index] = replace(message, parts=new_parts)
    return _result(messages, out, changed)


# --- 3. old tool outputs ------------------------------------------------------------------------------


def trim_old_tool_outputs(messages: Sequence[ModelMessage], max_chars: int) -> TierResult:
    """``co_cli.context.trim.truncate_tool_returns`` as a pass: tool results before the current turn cut to
    ``max_chars`` (0 disables)."""
    out = truncate_tool_returns(messages, max_chars)
    changed = sum(
        1
        for before, after in zip(messages, out, strict=True)
        if before is not after
        for a, b in zip(before.parts, after.parts, strict=True)
        if a is not b
    )
    return _result(messages, out, changed)
