"""Rebuild a session's working context from its transcript and compactions, at its end or at any message.

The transcript is lossless; the working context is the latest compaction that applies (its replacement)
followed by the messages after what it covered. At an earlier point ``n`` a compaction applies when it had
happened by then: it covers only messages up to ``n`` and was made before message ``n + 1`` was saved.
Later compactions do not apply there, so a fork at ``n`` continues from what the live session had at ``n``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pydantic_ai.messages import ModelMessage, ModelRequest

from co_cli.context.boundaries import is_user_turn_start
from co_cli.context.working import WorkingContext
from co_cli.errors import CoError
from co_cli.synthetic import interrupted_response, upgrade_legacy

if TYPE_CHECKING:
    from co_cli.session.recorder import Recorder
    from co_cli.store import Store
    from co_cli.store.compactions import CompactionRecord


@dataclass
class Rebuilt:
    context: WorkingContext
    open_turn: bool
    """The context ends with a request nobody answered (a turn cut off by a crash)."""


def applies_at(record: CompactionRecord, upto_seq: int, next_created_at: float | None) -> bool:
    """Whether a compaction had happened by message ``upto_seq`` (``next_created_at``: when message
    ``upto_seq + 1`` was saved, None at the end of the transcript)."""
    return record.upto_seq <= upto_seq and (next_created_at is None or record.created_at < next_created_at)


def rebuild_context(store: Store, session_id: str, upto_seq: int | None = None) -> Rebuilt:
    """The working context as the live session had it after message ``upto_seq`` (default: the end).

    Pure: nothing is written. Failed turns are left out; a prompt left unanswered by an earlier crash is
    closed with the "interrupted" note; an unanswered prompt at the very end is reported as ``open_turn``."""
    if upto_seq is None:
        latest = store.compactions.latest(session_id)
        after = latest.upto_seq if latest else -1
        stored = store.messages.transcript(session_id, after_seq=after)
    else:
        following = store.messages.saved_at(session_id, upto_seq + 1)
        applicable = [
            c
            for c in store.compactions.list(session_id)
            if applies_at(c, upto_seq, following) and not undone_by(c, following)
        ]
        latest = applicable[-1] if applicable else None
        after = latest.upto_seq if latest else -1
        stored = store.messages.transcript(session_id, after_seq=after, upto_seq=upto_seq)
    replacement = [upgrade_legacy(m) for m in latest.replacement] if latest else []
    context = WorkingContext(replacement, [None] * len(replacement))
    for m in stored:
        if m.status == "failed":
            continue
        # A turn cut off by a crash in an earlier session left its prompt unanswered: close it.
        if is_user_turn_start(m.message) and context.messages and _open_turn(context.messages[-1]):
            context.append(interrupted_response(), None)
        context.append(m.message, m.seq)
    return Rebuilt(context, bool(context.messages) and _open_turn(context.messages[-1]))


def undone_by(record: CompactionRecord, following: float | None) -> bool:
    """Whether ``/uncompact`` had taken the compaction back before the message after the point was saved
    (``following``; None: the point is the end, so any undo counts)."""
    if record.undone_at is None:
        return False
    return following is None or record.undone_at <= following


def _open_turn(message: ModelMessage) -> bool:
    """A request waiting for an answer (its turn never finished)."""
    return isinstance(message, ModelRequest)


# ----- where a fork may start ----------------------------------------------------------------------


class Outlined(Protocol):
    """A saved message as far as fork points go (``StoredMessage`` or the lighter ``MessageOutline``)."""

    @property
    def seq(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def status(self) -> str: ...


def is_safe_point(message: Outlined) -> bool:
    """A point a conversation can continue from: an answer that finished (a response without a tool call:
    the store's kind "assistant"), in a turn that did not fail."""
    return message.status != "failed" and message.kind == "assistant"


def safe_points(transcript: Sequence[Outlined]) -> list[int]:
    """Every seq a fork may start after (-1: before the first message)."""
    return [-1, *(m.seq for m in transcript if is_safe_point(m))]


def check_fork_point(transcript: Sequence[Outlined], upto_seq: int) -> None:
    """CoError unless ``upto_seq`` is a safe point; the message names the nearest safe points around it."""
    last = transcript[-1].seq if transcript else -1
    if not -1 <= upto_seq <= last:
        raise CoError(f"there is no message #{upto_seq}: the session has messages #0..#{last}")
    points = safe_points(transcript)
    if upto_seq in points:
        return
    before = max(p for p in points if p < upto_seq)
    after = [p for p in points if p > upto_seq]
    message = next(m for m in transcript if m.seq == upto_seq)
    what = "is in a failed turn" if message.status == "failed" else UNSAFE_POINTS.get(message.kind, "is mid-turn")
    choices = f"#{before} (before that turn)" if before >= 0 else "-1 (an empty conversation)"
    if after:
        choices += f" or #{after[0]} (the end of that turn)"
    raise CoError(f"message #{upto_seq} {what}; a fork continues after an answer: fork at {choices}")


UNSAFE_POINTS = {
    "user": "is a prompt whose answer follows it",
    "tool-call": "is a tool call whose result follows it",
    "tool-return": "is a tool's result, before the answer that uses it",
}
"""Why a fork cannot end at a message of this kind (the store's kinds)."""


def rewind_point(transcript: Sequence[Outlined], upto_seq: int | None = None) -> int:
    """Where ``/rewind`` goes: the safe point ``upto_seq`` (checked), or by default the last safe point before
    the last user prompt that was answered or cancelled."""
    if upto_seq is not None:
        check_fork_point(transcript, upto_seq)
        return upto_seq
    prompts = [m.seq for m in transcript if m.status != "failed" and m.kind == "user"]
    if not prompts:
        raise CoError("nothing to rewind: this conversation has no prompt yet")
    return max(p for p in safe_points(transcript) if p < prompts[-1])


def live_context(store: Store, recorder: Recorder, session_id: str) -> WorkingContext:
    """The working context to continue ``session_id`` with: rebuilt, and a turn a crash cut off closed with
    its note, saved, so every later reader agrees."""
    rebuilt = rebuild_context(store, session_id)
    context = rebuilt.context
    last_seq = context.seqs[-1] if context.seqs else None
    if rebuilt.open_turn and last_seq is not None:
        note = interrupted_response()
        context.append(note, recorder.close_open_turn(note, last_seq))
    return context
