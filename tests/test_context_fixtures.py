"""The message builders of ``tests/support/messages.py`` build what they say."""

from __future__ import annotations

from pydantic_ai.messages import (
    ModelRequest,
)

from tests.support.messages import (
    conversation,
    texts_of,
)


def test_conversation_shape() -> None:
    history = conversation(3)
    assert len(history) == 13
    assert isinstance(history[-1], ModelRequest)
    assert texts_of(history).count("question ") == 3
    assert texts_of(history).endswith("latest question")
