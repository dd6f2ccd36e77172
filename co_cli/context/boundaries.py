"""The shape of a history: where the first run ends, where turns start, where a tail may begin.

co's own summaries are recognised by their metadata marks (``co_cli.synthetic``), never by their wording.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai.messages import ModelMessage, ModelResponse

from co_cli.message_view import has_tool_result, kinds, user_text
from co_cli.synthetic import carried_request, is_summary


def is_user_turn_start(msg: ModelMessage) -> bool:
    """A request the user wrote (not a summary) that answers no tool call, so a history may start there."""
    return user_text(msg) is not None and not has_tool_result(msg)


def latest_request(messages: Sequence[ModelMessage]) -> tuple[int, str] | None:
    """(index, text) of the user's latest prompt: typed in a request, or carried by a summary message."""
    for i in range(len(messages) - 1, -1, -1):
        text = user_text(messages[i])
        if text is None:
            text = carried_request(messages[i])
        if text is not None:
            return i, text
    return None


def latest_user_prompt_index(messages: Sequence[ModelMessage]) -> int | None:
    """Index of the last request holding text the user typed, or None."""
    for i in range(len(messages) - 1, -1, -1):
        if user_text(messages[i]) is not None:
            return i
    return None


def current_turn_start(messages: Sequence[ModelMessage]) -> int:
    """Start of the current turn: the last request with a user prompt, or the last summary when it comes
    later (it carries the latest request once that was summarised); 0 when there is neither."""
    latest = latest_user_prompt_index(messages)
    start = latest if latest is not None else 0
    for i in range(len(messages) - 1, start, -1):
        if is_summary(messages[i]):
            return i
    return start


def find_head_end(messages: Sequence[ModelMessage]) -> int:
    """End (exclusive) of the first run: just after the first response that answers with text and calls
    no tool; 0 if there is none. Stopping at a response that also calls tools would split the calls from
    their returns."""
    for i, msg in enumerate(messages):
        found = kinds(msg)
        if isinstance(msg, ModelResponse) and "text" in found and "tool-call" not in found:
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
