"""Messages as the database keeps them: pydantic-ai's JSON (one message per row) plus the kind and plain text
that listings and the search index read, and text made valid UTF-8 before it is saved.

pydantic-ai is imported lazily, only by the functions that (de)serialise messages, so listing, renaming,
deleting and searching sessions stay fast.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from co_cli.errors import StoreError
from co_cli.store.redact import as_saved

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage


def valid_utf8(text: str) -> str:
    """The text with lone surrogates (undecodable bytes from a terminal or a pipe) replaced by '?'."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def message_kind_and_text(message: ModelMessage) -> tuple[str, str]:
    """Classify a message (user/assistant/tool-call/tool-return/summary/system) and extract its plain text
    (what the search index and the listings read)."""
    from co_cli.message_view import message_kind, views

    kind = message_kind(message)
    texts: list[str] = []
    for view in views(message):
        if view.kind == "system":
            if kind == "system":
                texts.append(view.text)
        elif view.kind in ("user", "text", "retry", "compaction"):
            texts.append(view.text)
        elif view.kind == "tool-return":
            texts.append(f"{view.tool_name}: {view.text}")
        elif view.kind == "tool-call":
            texts.append(f"{view.tool_name}({view.text or '{}'})")
    return kind, valid_utf8("\n".join(t for t in texts if t))


def dump_messages(messages: Sequence[ModelMessage]) -> str:
    """Messages as pydantic-ai's JSON; undecodable bytes in a tool output are saved as '?', credentials in a
    response's provider URL are left out."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter
    from pydantic_core import PydanticSerializationError

    messages = as_saved(messages)
    try:
        return ModelMessagesTypeAdapter.dump_json(list(messages)).decode()
    except PydanticSerializationError:
        data = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
        return valid_utf8(json.dumps(data, ensure_ascii=False, separators=(",", ":")))


def load_messages(json_lists: Iterable[str], where: str) -> list[ModelMessage]:
    """Validate many stored one-message JSON lists in a single call (much faster than one call each)."""
    from pydantic import ValidationError
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    joined = "[" + ",".join(j[1:-1] for j in json_lists) + "]"
    try:
        return ModelMessagesTypeAdapter.validate_json(joined)
    except ValidationError as exc:
        raise StoreError(f"{where} holds a message this co cannot read ({exc.error_count()} errors)") from None


def is_prompt_request(message: ModelMessage) -> bool:
    """A request holding a user prompt (what a turn's first saved message replaces the prompt row with)."""
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    return isinstance(message, ModelRequest) and any(isinstance(p, UserPromptPart) for p in message.parts)
