"""A chat of three long turns, ready for /compact and /uncompact."""

from __future__ import annotations

from tests.support.chat_app import ChatRun
from tests.support.turn_core import Core, long_echo, streaming_model, summarizer

TURNS = [f"turn {i} " + "with padding words " * 10 for i in range(3)]


def three_turns(core: Core) -> tuple[ChatRun, str]:
    chat = ChatRun(core, streaming_model(long_echo), summarizer=summarizer())
    assert chat.send(*TURNS).code == 0
    assert chat.conv.session is not None
    return chat, chat.conv.session.id
