"""Compaction: replace the middle (or all) of a history by a summary message."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models import Model

from co_cli.context.summarize import summarize_messages
from co_cli.context.tokens import content_text, estimate_messages_tokens
from co_cli.context.trim import is_plain_tool_return
from co_cli.context.window import (
    LATEST_REQUEST_HEADING,
    STATIC_MARKER,
    SUMMARY_PREFIX,
    current_turn_start,
    find_head_end,
    find_tail_start,
    is_summary_message,
    latest_request,
    summary_count,
    tail_boundaries,
)

__all__ = [
    "SUMMARY_PREFIX",
    "CompactionError",
    "CompactionResult",
    "compact_all",
    "compact_middle",
    "drop_tool_outputs",
    "plan_middle",
    "static_marker",
]

ACK_TEXT = "Understood. I have the summary of our earlier conversation and will continue from there."
INFLATION_RATIO = 0.9
"""A summary must be below this fraction of the tokens it replaces, or it is rejected."""
MIN_TAIL = 4


class CompactionError(Exception):
    """A manual compaction that cannot be applied; the history stays as it was."""


@dataclass
class CompactionResult:
    """A compaction: the new history is ``replacement + original[covered:]``."""

    messages: list[ModelMessage]
    covered: int
    """Index into the input list where the kept messages start."""
    replacement: list[ModelMessage]
    """The kept head, the summary message and (before a kept request) a short assistant acknowledgement."""
    summary: str
    """The summary message's full text (prefix included)."""
    tokens_before: int
    tokens_after: int
    used_fallback: bool
    error: str | None
    n_replaced: int


def static_marker(n: int) -> str:
    return STATIC_MARKER.format(n=n)


def summary_request(text: str) -> ModelRequest:
    now = datetime.now(UTC)
    return ModelRequest(parts=[UserPromptPart(text, timestamp=now)], timestamp=now)


def ack_response() -> ModelResponse:
    return ModelResponse(parts=[TextPart(ACK_TEXT)])


def _is_ack(msg: ModelMessage) -> bool:
    return isinstance(msg, ModelResponse) and len(msg.parts) == 1 and msg.parts[0] == TextPart(ACK_TEXT)


def describe_error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def covered_count(messages: Sequence[ModelMessage]) -> int:
    """Messages a stretch stands for: a summary counts as the messages it summarised, its
    acknowledgement as none."""
    total = 0
    for msg in messages:
        if _is_ack(msg):
            continue
        n = None
        if is_summary_message(msg):
            for part in msg.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    n = summary_count(part.content)
                    if n is not None:
                        break
        total += n if n is not None else 1
    return total


def _with_latest(text: str, latest: str | None) -> str:
    return f"{text}\n\n{LATEST_REQUEST_HEADING}\n{latest}" if latest else text


def _latest_prompt(messages: Sequence[ModelMessage], start: int, end: int) -> str | None:
    """The user's latest prompt when it lies in ``messages[start:end]`` (so it would be summarised away)."""
    found = latest_request(messages)
    if found is None or not start <= found[0] < end:
        return None
    return found[1]


def _suffix_tokens(messages: Sequence[ModelMessage]) -> list[int]:
    suffix = [0] * (len(messages) + 1)
    for i in range(len(messages) - 1, -1, -1):
        suffix[i] = suffix[i + 1] + estimate_messages_tokens([messages[i]])
    return suffix


def _choose_tail_start(
    messages: Sequence[ModelMessage], head_end: int, min_tail: int, max_tail_tokens: int | None
) -> int:
    tail = find_tail_start(messages, min_tail, head_end=head_end)
    if max_tail_tokens is None or tail == 0:
        return tail
    suffix = _suffix_tokens(messages)
    if suffix[tail] <= max_tail_tokens:
        return tail
    n = len(messages)
    user_starts, response_starts = tail_boundaries(messages, head_end)
    for candidates in (user_starts, response_starts):
        fitting = [i for i in candidates if n - i >= MIN_TAIL and suffix[i] <= max_tail_tokens]
        if fitting:
            return fitting[0]
    allowed = [i for i in (*user_starts, *response_starts) if n - i >= MIN_TAIL]
    return max(allowed, default=tail)


def plan_middle(
    messages: Sequence[ModelMessage], *, max_history_messages: int, max_tail_tokens: int | None = None
) -> tuple[int, int] | None:
    """(head_end, tail_start) of the middle to summarise, or None when there is nothing worth replacing.

    The tail keeps at least ``max(4, max_history_messages // 2)`` messages and starts at a user turn; when
    it would hold more than ``max_tail_tokens`` it shrinks to as few as 4 messages.
    """
    head_end = find_head_end(messages)
    min_tail = max(MIN_TAIL, max_history_messages // 2)
    tail_start = _choose_tail_start(messages, head_end, min_tail, max_tail_tokens)
    if tail_start <= head_end:
        return None
    if all(is_summary_message(msg) or _is_ack(msg) for msg in messages[head_end:tail_start]):
        return None  # only an earlier summary: summarising it again gains nothing
    return head_end, tail_start


def _replacement(messages: Sequence[ModelMessage], head_end: int, tail_start: int, text: str) -> list[ModelMessage]:
    replacement: list[ModelMessage] = [*messages[:head_end], summary_request(text)]
    if tail_start < len(messages) and isinstance(messages[tail_start], ModelRequest):
        # Two requests in a row would be merged by pydantic-ai at the next run start, shifting indices.
        replacement.append(ack_response())
    return replacement


async def compact_middle(
    messages: Sequence[ModelMessage],
    model: Model | str | None,
    *,
    max_history_messages: int,
    focus: str | None = None,
    max_input_tokens: int | None = None,
    max_tail_tokens: int | None = None,
) -> CompactionResult | None:
    """Keep the head and the tail, summarise the middle into one user-role message. None when there is
    no middle, or when even the static marker would not make the history smaller.

    ``model`` None skips the model and uses the static marker. A failed model call or a summary that is
    not clearly smaller than what it replaces falls back to the static marker (``used_fallback``,
    ``error``). The user's latest prompt, if it falls in the middle, is copied verbatim.
    """
    plan = plan_middle(messages, max_history_messages=max_history_messages, max_tail_tokens=max_tail_tokens)
    if plan is None:
        return None
    head_end, tail_start = plan
    middle = messages[head_end:tail_start]
    n = covered_count(middle)
    latest = _latest_prompt(messages, head_end, tail_start)
    middle_tokens = estimate_messages_tokens(middle)

    def added_tokens(replacement: list[ModelMessage]) -> int:
        return estimate_messages_tokens(replacement[head_end:])

    static_text = _with_latest(static_marker(n), latest)
    static_replacement = _replacement(messages, head_end, tail_start, static_text)
    if added_tokens(static_replacement) >= middle_tokens:
        return None

    text, replacement, error = static_text, static_replacement, None
    if model is not None:
        try:
            body = await summarize_messages(middle, model, focus=focus, max_input_tokens=max_input_tokens)
        except Exception as exc:  # any provider or network failure: keep the static marker
            error = describe_error(exc)
        else:
            candidate_text = _with_latest(f"{SUMMARY_PREFIX.format(n=n)}\n{body}", latest)
            candidate = _replacement(messages, head_end, tail_start, candidate_text)
            new_tokens = added_tokens(candidate)
            if new_tokens >= INFLATION_RATIO * middle_tokens:
                error = (
                    f"summary rejected: {new_tokens} tokens is not clearly smaller than the "
                    f"{middle_tokens} tokens it replaces"
                )
            else:
                text, replacement = candidate_text, candidate
    used_fallback = text is static_text
    new_messages = [*replacement, *messages[tail_start:]]
    return CompactionResult(
        messages=new_messages,
        covered=tail_start,
        replacement=replacement,
        summary=text,
        tokens_before=estimate_messages_tokens(messages),
        tokens_after=estimate_messages_tokens(new_messages),
        used_fallback=used_fallback,
        error=error,
        n_replaced=len(middle),
    )


async def compact_all(
    messages: Sequence[ModelMessage],
    model: Model | str,
    *,
    focus: str | None = None,
    max_input_tokens: int | None = None,
) -> CompactionResult:
    """Summarise the whole history (manual /compact) into a summary message and an acknowledgement.

    The user's latest prompt is appended verbatim. Raises on any model failure, and CompactionError when
    there is nothing to compact or the summary would not be smaller than the history.
    """
    if not messages:
        raise CompactionError("nothing to compact: the conversation is empty")
    body = await summarize_messages(messages, model, focus=focus, max_input_tokens=max_input_tokens)
    latest = _latest_prompt(messages, 0, len(messages))
    text = _with_latest(f"{SUMMARY_PREFIX.format(n=covered_count(messages))}\n{body}", latest)
    replacement: list[ModelMessage] = [summary_request(text), ack_response()]
    before = estimate_messages_tokens(messages)
    after = estimate_messages_tokens(replacement)
    if after >= before:
        raise CompactionError(
            f"the summary ({after} tokens) is not smaller than the conversation ({before} tokens); nothing changed"
        )
    return CompactionResult(
        messages=list(replacement),
        covered=len(messages),
        replacement=replacement,
        summary=text,
        tokens_before=before,
        tokens_after=after,
        used_fallback=False,
        error=None,
        n_replaced=len(messages),
    )


def drop_tool_outputs(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """Copy of ``messages`` where every tool result before the current turn is a one-line stub (used after
    a provider reports the context is too long). The input is never mutated."""
    boundary = current_turn_start(messages)
    result = list(messages)
    for index in range(boundary):
        msg = messages[index]
        if not isinstance(msg, ModelRequest):
            continue
        new_parts = None
        for part_index, part in enumerate(msg.parts):
            if not is_plain_tool_return(part):
                continue
            size = len(content_text(part.content))
            stub = f"[output of {part.tool_name} dropped to fit the context window ({size} chars)]"
            if len(stub) >= size:
                continue
            if new_parts is None:
                new_parts = list(msg.parts)
            new_parts[part_index] = replace(part, content=stub)
        if new_parts is not None:
            result[index] = replace(msg, parts=new_parts)
    return result
