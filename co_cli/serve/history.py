"""A client's conversation as co keeps it: which saved session a resent history continues, and the transcript a
new session starts with when the client brings earlier messages of its own.

What a client sees of a turn is its prompt and the text of the answer (co's tool calls run inside the turn), so
a transcript is compared as that: each user prompt, then the text of the responses that followed it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from co_cli.message_view import answer_text, user_text
from co_cli.session.recorder import Recorder, TurnRecord
from co_cli.store import SessionInfo, Store
from co_cli.synthetic import is_interrupted

Role = Literal["user", "assistant"]


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    text: str


def visible(messages: Sequence[ModelMessage]) -> list[ChatMessage]:
    """The transcript as a chat client saw it: prompts, and each turn's answer text joined."""
    seen: list[ChatMessage] = []
    for message in messages:
        prompt = user_text(message)
        if prompt is not None:
            seen.append(ChatMessage("user", prompt))
        elif isinstance(message, ModelResponse):
            # An answer cut off is saved with co's note after it (its last part), which the client never got.
            shown = replace(message, parts=message.parts[:-1]) if is_interrupted(message) else message
            text = answer_text(shown)
            if seen and seen[-1].role == "assistant":
                seen[-1] = ChatMessage("assistant", seen[-1].text + text)
            elif text:
                seen.append(ChatMessage("assistant", text))
    return seen


def same_conversation(a: Sequence[ChatMessage], b: Sequence[ChatMessage]) -> bool:
    return len(a) == len(b) and all(
        x.role == y.role and x.text.strip() == y.text.strip() for x, y in zip(a, b, strict=True)
    )


CANDIDATES = 20
"""Sessions compared at most: those holding the history's longest prompt (the likeliest to be its alone), most
recently updated first."""


def session_matching(store: Store, history: Sequence[ChatMessage]) -> SessionInfo | None:
    """The saved session whose transcript is exactly ``history`` (a client resending its conversation), or
    None. The newest of them when several are (two clients that said the same things)."""
    prompts = [message.text for message in history if message.role == "user"]
    if not prompts:
        return None
    needle = max(prompts, key=len)
    for session_id in store.search.sessions_with_prompt(needle, limit=CANDIDATES):
        info = store.sessions.get(session_id)
        if info.message_count < len(history):
            continue
        if same_conversation(visible(store.messages.messages(session_id)), history):
            return info
    return None


def seed_history(recorder: Recorder, history: Sequence[ChatMessage]) -> None:
    """Save the earlier messages a client brought as the new session's first turns (a prompt, then the
    answer it was given), so the session holds the whole conversation and the next request continues it."""
    for prompt, answer in _turns(history):
        seq = recorder.begin(prompt)
        messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(prompt)])]
        if answer:
            messages.append(ModelResponse(parts=[TextPart(answer)]))
        recorder.finish(TurnRecord(seq, messages, "ok"))


def _turns(history: Sequence[ChatMessage]) -> list[tuple[str, str]]:
    """(prompt, answer) pairs: consecutive messages of one role joined, an answer before any prompt given an
    empty one."""
    turns: list[tuple[str, str]] = []
    for message in history:
        if message.role == "user":
            if turns and not turns[-1][1]:
                turns[-1] = (f"{turns[-1][0]}\n\n{message.text}", "")
            else:
                turns.append((message.text, ""))
        elif turns:
            prompt, answer = turns[-1]
            turns[-1] = (prompt, f"{answer}\n\n{message.text}" if answer else message.text)
        else:
            turns.append(("", message.text))
    return turns
