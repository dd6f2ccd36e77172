"""A per-message memo: results kept between calls on the same growing history."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from pydantic_ai.messages import ModelMessage

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
