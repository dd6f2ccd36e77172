"""Conversations of several prompts, each answered at length: what the summariser sees of a long session."""

from __future__ import annotations

from pydantic_ai.messages import ModelMessage

from tests.support.messages import reply, user

FILLER = " ".join(["The assistant explains the general idea at some length here."] * 12)


def chatty(prompts: list[str]) -> list[ModelMessage]:
    """A first exchange (the kept head), one exchange per prompt (the assistant's answers are long and never
    repeat the user's words), then two more for the kept tail, and a last prompt. With max_history_messages=4
    the middle is exactly the exchanges of ``prompts``."""
    messages: list[ModelMessage] = [user("Hello."), reply("Hello!")]
    for prompt in [*prompts, "Tail one?", "Tail two?"]:
        messages += [user(prompt), reply(FILLER)]
    messages.append(user("What next?"))
    return messages
