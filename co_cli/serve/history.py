"""A client's conversation as co keeps it: which saved session a resent history continues, and the transcript a
new session starts with when the client brings earlier messages of its own.

What a client sees of a turn is its prompt and the text of the answer (co's tool calls run inside the turn), so
a transcript is compared as that: each user prompt, then the text of the responses that followed it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from pydantic_ai.messages import ModelResponse

from co_cli.message_view import answer_text, user_text
from co_cli.store import SessionInfo, Store, StoredMessage
from co_cli.synthetic import is_interrupted

Role = Literal["user", "assistant"]


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    text: str


@dataclass(frozen=True)
class _Turn:
    prompt: str | None
    """None: responses before any prompt."""
    answer: str
    status: str
    """The prompt's status: ok, or how the turn ended otherwise (failed, cancelled)."""


def _turns_of(stored: Sequence[StoredMessage]) -> list[_Turn]:
    """Each prompt with the text of the responses that followed it (an answer before any prompt: an empty one)."""
    turns: list[_Turn] = []
    for message in stored:
        prompt = user_text(message.message)
        if prompt is not None:
            turns.append(_Turn(prompt, "", message.status))
        elif isinstance(message.message, ModelResponse):
            # An answer cut off is saved with co's note after it (its last part), which the client never got.
            response = message.message
            shown = replace(response, parts=response.parts[:-1]) if is_interrupted(response) else response
            if not turns:
                turns.append(_Turn(None, "", "ok"))
            last = turns[-1]
            turns[-1] = replace(last, answer=last.answer + answer_text(shown))
    return turns


def _retried(turn: _Turn, following: _Turn | None) -> bool:
    """A turn that did not end well and was asked again at once (a client retrying its request)."""
    if turn.status == "ok" or turn.prompt is None or following is None or following.prompt is None:
        return False
    return following.prompt.strip() == turn.prompt.strip()


def _shown(turns: list[_Turn]) -> list[_Turn]:
    """The turns a client's conversation holds: a turn that failed or was cut off and then asked again at once
    (a client retrying its request) is left out, so the client's conversation holds it once."""
    return [turn for turn, following in zip(turns, [*turns[1:], None], strict=True) if not _retried(turn, following)]


def _messages(turns: list[_Turn]) -> list[ChatMessage]:
    seen: list[ChatMessage] = []
    for turn in turns:
        if turn.prompt is not None:
            seen.append(ChatMessage("user", turn.prompt))
        if turn.answer:
            seen.append(ChatMessage("assistant", turn.answer))
    return seen


def visible(stored: Sequence[StoredMessage]) -> list[ChatMessage]:
    """The transcript as a chat client saw it: prompts, and each turn's answer text joined; a request retried
    after it failed once."""
    return _messages(_shown(_turns_of(stored)))


def same_conversation(a: Sequence[ChatMessage], b: Sequence[ChatMessage]) -> bool:
    return len(a) == len(b) and all(
        x.role == y.role and x.text.strip() == y.text.strip() for x, y in zip(a, b, strict=True)
    )


CANDIDATES = 20
"""Sessions compared at most: those holding the history's longest prompt (the likeliest to be its alone), most
recently updated first."""

RETRY_WINDOW = 600.0
"""Seconds after a turn failed (or was cut off) during which the same request again is its retry: it continues
that session. A client's own retries come within seconds; a person asking again soon is retrying too."""


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
        if same_conversation(visible(store.messages.transcript(session_id)), history):
            return info
    return None


def session_retried(
    store: Store, history: Sequence[ChatMessage], prompt: str, now: float | None = None
) -> SessionInfo | None:
    """The session a request is the retry of, or None: its last turn asked ``prompt`` after exactly ``history``,
    did not end well (failed, or cut off when its client went away), and ended at most ``RETRY_WINDOW`` seconds
    ago. The newest of them when several are."""
    now = time.time() if now is None else now
    for session_id in store.search.sessions_with_prompt(prompt, limit=CANDIDATES):
        info = store.sessions.get(session_id)
        if info.updated_at < now - RETRY_WINDOW:
            break  # newest first: the rest are older still
        turns = _shown(_turns_of(store.messages.transcript(session_id)))
        last = turns[-1] if turns else None
        if last is None or last.status == "ok" or (last.prompt or "").strip() != prompt.strip():
            continue
        if same_conversation(_messages(turns[:-1]), history):
            return info
    return None


def client_turns(history: Sequence[ChatMessage]) -> list[tuple[str, str]]:
    """The client's earlier messages as the (prompt, answer) turns a new session starts with: consecutive
    messages of one role joined, an answer before any prompt given an empty one."""
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
