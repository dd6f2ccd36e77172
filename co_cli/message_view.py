"""One view of pydantic-ai messages: every part reduced to (role, kind, text, tool name).

Everything in co that walks message parts (token estimates, /context, the summariser's transcript, the
session store's text column, exports, the resume preview) reads them through ``view_part`` and
``message_kind``, so a new pydantic-ai part type is handled here once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    RetryPromptPart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    UserPromptPart,
)
from pydantic_core import to_json

from co_cli.synthetic import is_summary

Role = Literal["user", "assistant"]
PartKind = Literal["system", "user", "tool-return", "retry", "text", "thinking", "tool-call", "compaction", "other"]
MessageKind = Literal["user", "tool-return", "system", "summary", "assistant", "tool-call"]


@dataclass(frozen=True)
class PartView:
    """What co needs to know of one part."""

    role: Role
    kind: PartKind
    text: str
    """The part's text as a provider would send it (tool arguments and structured results as JSON)."""
    tool_name: str | None = None
    tool_call_id: str | None = None
    outcome: str | None = None
    """A tool result's outcome ("success", "failed", "denied", "interrupted"); None for other parts."""


def content_text(content: Any) -> str:
    """A tool result or call argument as the text a provider would send (dicts and lists as JSON)."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    try:
        return to_json(content, fallback=str, bytes_mode="base64").decode("utf-8", "replace")
    except (TypeError, ValueError):
        return str(content)


def prompt_content_text(content: str | Sequence[Any]) -> str:
    """Text of a user prompt's content: strings as they are, other items as a short ``[kind]`` marker."""
    if isinstance(content, str):
        return content
    pieces: list[str] = []
    for item in content:
        if isinstance(item, str):
            pieces.append(item)
        elif isinstance(item, TextContent):
            pieces.append(item.content)
        else:
            label = getattr(item, "url", None) or getattr(item, "media_type", None) or ""
            pieces.append(f"[{getattr(item, 'kind', type(item).__name__)}{': ' + label if label else ''}]")
    return "\n".join(pieces)


def part_kind(part: Any) -> PartKind:
    """The one place that tells pydantic-ai's part types apart (cheap: no text is extracted)."""
    if isinstance(part, UserPromptPart):
        return "user"
    if isinstance(part, SystemPromptPart):
        return "system"
    if isinstance(part, BaseToolReturnPart):
        return "tool-return"
    if isinstance(part, RetryPromptPart | RetryFeedbackPart):
        return "retry"
    if isinstance(part, TextPart):
        return "text"
    if isinstance(part, ThinkingPart):
        return "thinking"
    if isinstance(part, BaseToolCallPart):
        return "tool-call"
    if isinstance(part, CompactionPart):
        return "compaction"
    return "other"


_USER_ROLE_KINDS = frozenset({"user", "system", "tool-return", "retry"})


def part_text(part: Any, kind: PartKind | None = None) -> str:
    """The part's text as a provider would send it (tool arguments and structured results as JSON)."""
    kind = kind or part_kind(part)
    if kind == "user":
        return prompt_content_text(part.content)
    if kind in ("tool-return", "retry"):
        return content_text(part.content)
    if kind == "tool-call":
        return part.args if isinstance(part.args, str) else content_text(part.args)
    content = getattr(part, "content", None)
    return content if isinstance(content, str) else ""


def view_part(part: Any) -> PartView:
    kind = part_kind(part)
    role: Role = "user" if kind in _USER_ROLE_KINDS else "assistant"
    return PartView(
        role,
        kind,
        part_text(part, kind),
        getattr(part, "tool_name", None),
        getattr(part, "tool_call_id", None),
        getattr(part, "outcome", None) if kind == "tool-return" else None,
    )


def pretty_args(view: PartView) -> str:
    """A tool call's arguments as indented JSON (as they came when they are not JSON)."""
    import json

    try:
        return json.dumps(json.loads(view.text or "{}"), indent=2, ensure_ascii=False)
    except ValueError:
        return view.text


def kinds(message: ModelMessage) -> set[PartKind]:
    return {part_kind(part) for part in message.parts}


def views(message: ModelMessage) -> Iterator[PartView]:
    for part in message.parts:
        yield view_part(part)


def message_kind(message: ModelMessage) -> MessageKind:
    """What a message is, for listing and search: a co summary, a user prompt, tool results, or the model's
    answer or tool calls."""
    found = kinds(message)
    if isinstance(message, ModelRequest):
        if is_summary(message) or "compaction" in found:
            return "summary"
        if "tool-return" in found:
            return "tool-return"
        if "user" in found:
            return "user"
        return "system"
    return "tool-call" if "tool-call" in found else "assistant"


def user_text(message: ModelMessage) -> str | None:
    """The text the user typed in this request, or None (responses, tool results alone, co's summaries)."""
    if not isinstance(message, ModelRequest) or is_summary(message):
        return None
    texts = [part_text(part, "user") for part in message.parts if part_kind(part) == "user"]
    return "\n".join(texts) if texts else None


def answer_text(message: ModelMessage) -> str:
    """The text of a response (its text parts joined); empty for requests."""
    if not isinstance(message, ModelResponse):
        return ""
    return "".join(part.content for part in message.parts if isinstance(part, TextPart))


def has_tool_result(message: ModelMessage) -> bool:
    """A request answering a tool call (a tool return, or a retry prompt bound to a tool)."""
    return isinstance(message, ModelRequest) and any(
        (kind := part_kind(part)) == "tool-return" or (kind == "retry" and getattr(part, "tool_name", None) is not None)
        for part in message.parts
    )
