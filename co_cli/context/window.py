"""Boundaries of a history: the head (first run), turn starts, the tail, and summary messages."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

SUMMARY_PREFIX = "[Summary of {n} earlier messages]"
STATIC_MARKER = "[Earlier conversation trimmed — {n} messages removed to stay within context budget]"
LATEST_REQUEST_HEADING = "The user's latest request, verbatim:"
"""Ends a summary whose stretch held the user's latest prompt; the prompt follows verbatim."""

_SUMMARY_RE = re.compile(r"^\[Summary of (\d+) earlier messages\]")
_MARKER_RE = re.compile(r"^\[Earlier conversation trimmed — (\d+) messages removed")


def summary_count(text: str) -> int | None:
    """The N of a summary or static-marker text, or None when the text is neither."""
    match = _SUMMARY_RE.match(text) or _MARKER_RE.match(text)
    return int(match.group(1)) if match else None


_SUMMARY_STARTS = ("[Summary of ", "[Earlier conversation trimmed")


def is_summary_text(text: str) -> bool:
    return text.startswith(_SUMMARY_STARTS) and summary_count(text) is not None


def is_summary_message(msg: ModelMessage) -> bool:
    """A request carrying a compaction summary or a static trim marker."""
    if not isinstance(msg, ModelRequest):
        return False
    for part in msg.parts:
        if isinstance(part, UserPromptPart) and isinstance(part.content, str) and is_summary_text(part.content):
            return True
    return False


def user_prompt_text(msg: ModelMessage) -> str | None:
    """The text the user typed in this request (summary parts excluded), or None if there is none."""
    if not isinstance(msg, ModelRequest):
        return None
    texts: list[str] = []
    for part in msg.parts:
        if not isinstance(part, UserPromptPart):
            continue
        if isinstance(part.content, str):
            if not is_summary_text(part.content):
                texts.append(part.content)
        else:
            texts.append("\n".join(item for item in part.content if isinstance(item, str)))
    return "\n".join(texts) if texts else None


def _has_tool_result(msg: ModelRequest) -> bool:
    return any(
        isinstance(part, ToolReturnPart) or (isinstance(part, RetryPromptPart) and part.tool_name is not None)
        for part in msg.parts
    )


def is_user_turn_start(msg: ModelMessage) -> bool:
    """A request the user wrote (not a summary) that answers no tool call, so a history may start there."""
    return isinstance(msg, ModelRequest) and user_prompt_text(msg) is not None and not _has_tool_result(msg)


def carried_request(msg: ModelMessage) -> str | None:
    """The user's latest prompt copied verbatim into a summary message, or None."""
    if not isinstance(msg, ModelRequest):
        return None
    for part in msg.parts:
        if isinstance(part, UserPromptPart) and isinstance(part.content, str) and is_summary_text(part.content):
            _, sep, carried = part.content.rpartition(f"\n{LATEST_REQUEST_HEADING}\n")
            if sep:
                return carried
    return None


def latest_request(messages: Sequence[ModelMessage]) -> tuple[int, str] | None:
    """(index, text) of the user's latest prompt: typed in a request, or carried by a summary message."""
    for i in range(len(messages) - 1, -1, -1):
        text = user_prompt_text(messages[i])
        if text is None:
            text = carried_request(messages[i])
        if text is not None:
            return i, text
    return None


def latest_user_prompt_index(messages: Sequence[ModelMessage]) -> int | None:
    """Index of the last request holding text the user typed, or None."""
    for i in range(len(messages) - 1, -1, -1):
        if user_prompt_text(messages[i]) is not None:
            return i
    return None


def current_turn_start(messages: Sequence[ModelMessage]) -> int:
    """Start of the current turn: the last request with a user prompt, or the last summary when it comes
    later (it carries the latest request once that was summarised); 0 when there is neither."""
    latest = latest_user_prompt_index(messages)
    start = latest if latest is not None else 0
    for i in range(len(messages) - 1, start, -1):
        if is_summary_message(messages[i]):
            return i
    return start


def find_head_end(messages: Sequence[ModelMessage]) -> int:
    """End (exclusive) of the first run: just after the first response that answers with text and calls
    no tool; 0 if there is none. Stopping at a response that also calls tools would split the calls from
    their returns."""
    for i, msg in enumerate(messages):
        if (
            isinstance(msg, ModelResponse)
            and any(isinstance(p, TextPart) for p in msg.parts)
            and not any(isinstance(p, ToolCallPart) for p in msg.parts)
        ):
            return i + 1
    return 0


def tail_boundaries(messages: Sequence[ModelMessage], head_end: int = 0) -> tuple[list[int], list[int]]:
    """Indices after ``head_end`` where a tail may start without splitting a tool call from its return:
    user-turn starts (preferred) and responses (inside one long tool-using turn)."""
    user_starts: list[int] = []
    response_starts: list[int] = []
    for i in range(head_end + 1, len(messages)):
        msg = messages[i]
        if isinstance(msg, ModelResponse):
            response_starts.append(i)
        elif is_user_turn_start(msg):
            user_starts.append(i)
    return user_starts, response_starts


def find_tail_start(messages: Sequence[ModelMessage], min_tail: int, *, head_end: int = 0) -> int:
    """Start of the shortest tail of at least ``min_tail`` messages that begins at a user turn after the
    head; inside one long tool-using turn, at a response instead. 0 when no such tail leaves a middle."""
    n = len(messages)
    user_starts, response_starts = tail_boundaries(messages, head_end)
    for candidates in (user_starts, response_starts):
        fitting = [i for i in candidates if n - i >= min_tail]
        if fitting:
            return fitting[-1]
    return 0


MISS: Final = object()


class MessageMemo:
    """Per-message results kept between calls on the same growing history, so unchanged messages are not
    processed again. Entries hold the input message (so its id cannot be reused), its parts list (a message
    whose parts were reassigned is processed again) and an optional context object compared by identity;
    ``bind`` drops everything when the settings the results depend on change."""

    def __init__(self) -> None:
        self._key: object = None
        self._entries: dict[int, tuple[ModelMessage, object, Any, object]] = {}

    def bind(self, key: object) -> None:
        if key != self._key:
            self._key = key
            self._entries = {}

    def get(self, msg: ModelMessage, context: object = None) -> Any:
        entry = self._entries.get(id(msg))
        if entry is not None and entry[0] is msg and entry[1] is context and entry[3] is msg.parts:
            return entry[2]
        return MISS

    def put(self, msg: ModelMessage, result: Any, context: object = None) -> None:
        self._entries[id(msg)] = (msg, context, result, msg.parts)

    def prune(self, messages: Sequence[ModelMessage]) -> None:
        """Forget messages no longer in the history (only once the memo has grown well past it)."""
        if len(self._entries) > 2 * len(messages) + 64:
            live = {id(msg) for msg in messages}
            self._entries = {key: value for key, value in self._entries.items() if key in live}

    def __len__(self) -> int:
        return len(self._entries)
