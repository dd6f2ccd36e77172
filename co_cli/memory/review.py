"""Reviewing proposals (``/memory review`` and ``co memory review``): what each one shows, what each answer does."""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable
from typing import Protocol

from co_cli.errors import CoError
from co_cli.store import Memories, Memory

QUESTION = "[a]ccept, [e]dit, [r]eject, [s]kip, [q]uit? "


class Ask(Protocol):
    """One line of answer to ``question`` (starting from ``default``), or None at the end of input."""

    def __call__(self, question: str, default: str = "") -> Awaitable[str | None]: ...


SOURCE_CHARS = 300


def describe(store: Memories, proposal: Memory) -> list[str]:
    """The proposal, what it changes, and the message it came from; a suggestion of word cues says so, with the
    command that would apply it."""
    what = {"update": "update", "delete": "forget"}.get(proposal.proposal or "add", "remember")
    if proposal.cue is not None:
        what = "suggestion: remember"
    details = [proposal.scope, proposal.kind] + ([f"topic {proposal.topic}"] if proposal.topic else [])
    whose = f"({proposal.whose}) " if proposal.whose else ""
    lines = [f"{proposal.ref}: {what} [{', '.join(details)}] {whose}{proposal.text}"]
    if proposal.cue is not None:
        lines.append(
            f"  suggested by word cues ({proposal.cue}) because the model's answer could not be read; never applied "
            f"on its own: accept it here, or `{apply_command(proposal)}`"
        )
    if proposal.target_id:
        try:
            target = store.get(proposal.target_id)
            lines.append(f"  {'replaces' if what == 'update' else 'forgets'} m{target.id}: {target.text}")
        except CoError:
            pass
    source = store.source(proposal)
    if source is not None:
        flat = " ".join(source.text.split())
        if len(flat) > SOURCE_CHARS:
            flat = flat[: SOURCE_CHARS - 1] + "…"
        lines.append(f"  from your message (session {source.session} #{source.seq}): {flat}")
    return lines


def apply_command(proposal: Memory) -> str:
    """The command that keeps what ``proposal`` says (``co memory add …``)."""
    kind = f" --kind {proposal.kind}" if proposal.kind != "fact" else ""
    scope = " --project" if proposal.scope == "project" else ""
    return f"co memory add{scope}{kind} {shlex.quote(proposal.text)}"


async def review(
    store: Memories,
    proposals: list[Memory],
    ask: Ask,
    say: Callable[[str], None],
) -> tuple[int, int, int]:
    """Ask about each proposal; returns (accepted, rejected, skipped). ``ask`` returns None at end of input."""
    accepted = rejected = skipped = 0
    for index, proposal in enumerate(proposals):
        for line in describe(store, proposal):
            say(line)
        while True:
            answer = await ask(QUESTION)
            choice = (answer or "q").strip().lower()[:1]
            try:
                if choice == "a":
                    store.review.accept(proposal.id)
                    accepted += 1
                elif choice == "e":
                    text = await ask("new text: ", proposal.text)  # the edit starts from the proposed text
                    if not text or not text.strip():
                        say("  nothing entered; still to review")
                        continue
                    store.review.accept(proposal.id, text=text)
                    accepted += 1
                elif choice == "r":
                    store.review.reject(proposal.id)
                    rejected += 1
                elif choice == "s":
                    skipped += 1
                elif choice == "q":
                    return accepted, rejected, skipped + len(proposals) - index
                else:
                    continue
            except CoError as exc:
                say(f"  {exc.message}")
                continue
            break
    return accepted, rejected, skipped
