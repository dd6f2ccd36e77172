"""co's own messages (summaries, trim markers, acknowledgements, interrupted notes), marked in metadata.

pydantic-ai's ``ModelRequest.metadata`` / ``ModelResponse.metadata`` are never sent to a model and
round-trip through ``ModelMessagesTypeAdapter``, so a mark survives saving and resuming. co tells its
messages from the user's by these marks only: a prompt that happens to start like a summary is the user's.

Sessions saved before the marks existed hold unmarked summaries inside their compaction records;
``upgrade_legacy`` recognises those by their wording, and is used only when reading such records.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Literal, TypeGuard, TypeVar

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

METADATA_KEY = "co_cli"

SyntheticKind = Literal["summary", "marker", "ack", "interrupted"]
"""summary: a compaction summary (a user-role request); marker: the static stand-in when no summary could be
made; ack: the assistant's acknowledgement after one; interrupted: an answer cut off (by the user or the
connection), its partial text kept."""

SUMMARY_PREFIX = "[Summary of {n} earlier messages]"
STATIC_MARKER = "[Earlier conversation trimmed — {n} messages removed to stay within context budget]"
LATEST_REQUEST_HEADING = "The user's latest request, verbatim:"
"""Ends a summary whose stretch held the user's latest prompt; the prompt follows verbatim."""
ACK_TEXT = "Understood. I have the summary of our earlier conversation and will continue from there."
INTERRUPTED_NOTE = "[interrupted by the user]"
CUT_OFF_NOTE = "[answer cut off: the connection closed before the answer was complete]"
LENGTH_NOTE = "[answer cut off: it reached the model's output limit]"

M = TypeVar("M", ModelRequest, ModelResponse)


def mark(message: M, kind: SyntheticKind, **info: Any) -> M:
    """A copy of ``message`` marked as co's own, with ``info`` kept beside the kind."""
    metadata = dict(message.metadata or {})
    metadata[METADATA_KEY] = {"kind": kind, **info}
    return replace(message, metadata=metadata)


def _mark_data(message: ModelMessage) -> dict[str, Any]:
    data = (message.metadata or {}).get(METADATA_KEY)
    return data if isinstance(data, dict) else {}


def synthetic_kind(message: ModelMessage) -> SyntheticKind | None:
    kind = _mark_data(message).get("kind")
    return kind if kind in ("summary", "marker", "ack", "interrupted") else None


def is_summary(message: ModelMessage) -> TypeGuard[ModelRequest]:
    """A request carrying a compaction summary or a static trim marker."""
    return isinstance(message, ModelRequest) and synthetic_kind(message) in ("summary", "marker")


def is_ack(message: ModelMessage) -> TypeGuard[ModelResponse]:
    return isinstance(message, ModelResponse) and synthetic_kind(message) == "ack"


def is_interrupted(message: ModelMessage) -> TypeGuard[ModelResponse]:
    return isinstance(message, ModelResponse) and synthetic_kind(message) == "interrupted"


def covers(message: ModelMessage) -> int | None:
    """How many messages a summary or marker stands for (None for any other message)."""
    if not is_summary(message):
        return None
    value = _mark_data(message).get("covers")
    return value if isinstance(value, int) else None


def carried_request(message: ModelMessage) -> str | None:
    """The user's latest prompt that a summary carries verbatim, or None."""
    if not is_summary(message):
        return None
    value = _mark_data(message).get("latest_request")
    return value if isinstance(value, str) else None


def carried_info(message: ModelMessage, key: str) -> Any:
    """What a summary carries beside its text under ``key`` (None for any other message, or when absent)."""
    return _mark_data(message).get(key) if is_summary(message) else None


def summary_text(n: int, body: str | None, latest: str | None) -> str:
    """The text of a summary (``body`` given) or a static marker (``body`` None) standing for ``n`` messages."""
    text = f"{SUMMARY_PREFIX.format(n=n)}\n{body}" if body is not None else STATIC_MARKER.format(n=n)
    return f"{text}\n\n{LATEST_REQUEST_HEADING}\n{latest}" if latest else text


def summary_request(
    n: int, body: str | None, latest: str | None = None, carried: dict[str, Any] | None = None
) -> ModelRequest:
    """The user-role message that replaces a stretch of history (a summary, or the static marker); ``carried``
    is kept beside its text (see ``carried_info``)."""
    text = summary_text(n, body, latest)
    info: dict[str, Any] = {**(carried or {}), "covers": n}
    if latest:
        info["latest_request"] = latest
    now = datetime.now(UTC)  # the token estimate tells later usage reports from earlier ones by this stamp
    request = ModelRequest(parts=[UserPromptPart(text, timestamp=now)], timestamp=now)
    return mark(request, "summary" if body is not None else "marker", **info)


def replace_summary_text(message: ModelMessage, text: str) -> ModelRequest:
    """A summary message with new text (the user edited it), keeping its mark."""
    assert isinstance(message, ModelRequest) and is_summary(message), "not a summary message"
    now = datetime.now(UTC)
    return replace(message, parts=[UserPromptPart(text, timestamp=now)])


def ack_response() -> ModelResponse:
    return mark(ModelResponse(parts=[TextPart(ACK_TEXT)]), "ack")


def interrupted_response(note: str = INTERRUPTED_NOTE) -> ModelResponse:
    """The whole answer of a turn cut off before the model said anything."""
    return mark(ModelResponse(parts=[TextPart(note)]), "interrupted")


def close_interrupted(response: ModelResponse, note: str = INTERRUPTED_NOTE) -> ModelResponse:
    """A partial answer, kept, with the note appended and the mark set."""
    return mark(replace(response, parts=[*response.parts, TextPart(f"\n\n{note}")]), "interrupted")


FAILURE_KEY = "co_cli_failure"
"""Where a failed turn's prompt keeps why it failed (beside the marks, not one: the prompt stays the user's)."""


def with_failure(messages: list[ModelMessage], prompt: str, error: str) -> list[ModelMessage]:
    """A failed turn's messages as saved: its prompt request (the one sent, or a plain one when none was) carries
    ``error``, the one line the user was told."""
    first = messages[0] if messages else None
    if isinstance(first, ModelRequest) and any(isinstance(p, UserPromptPart) for p in first.parts):
        rest = messages[1:]
    else:
        first, rest = ModelRequest(parts=[UserPromptPart(prompt)]), messages
    return [replace(first, metadata={**(first.metadata or {}), FAILURE_KEY: error}), *rest]


def failure_of(message: ModelMessage) -> str | None:
    """Why the turn this prompt began failed, as the user was told (None: it did not, or an older co saved it)."""
    error = (message.metadata or {}).get(FAILURE_KEY)
    return error if isinstance(error, str) else None


# --- sessions saved before the marks ---------------------------------------------------------------------

_LEGACY_SUMMARY_RE = re.compile(r"^\[Summary of (\d+) earlier messages\]")
_LEGACY_MARKER_RE = re.compile(r"^\[Earlier conversation trimmed — (\d+) messages removed")


def upgrade_legacy(message: ModelMessage) -> ModelMessage:
    """Mark a summary, marker or acknowledgement saved by an earlier co (recognised by its wording).

    Only for the replacement messages of stored compaction records: the transcript holds what the user
    typed, and is never read this way."""
    if message.metadata and METADATA_KEY in message.metadata:
        return message
    if isinstance(message, ModelResponse):
        if len(message.parts) == 1 and message.parts[0] == TextPart(ACK_TEXT):
            return mark(message, "ack")
        return message
    for part in message.parts:
        if not isinstance(part, UserPromptPart) or not isinstance(part.content, str):
            continue
        summary = _LEGACY_SUMMARY_RE.match(part.content)
        marker = _LEGACY_MARKER_RE.match(part.content)
        found = summary or marker
        if found is None:
            continue
        info: dict[str, Any] = {"covers": int(found.group(1))}
        _, sep, latest = part.content.rpartition(f"\n{LATEST_REQUEST_HEADING}\n")
        if sep:
            info["latest_request"] = latest
        return mark(message, "summary" if summary else "marker", **info)
    return message
