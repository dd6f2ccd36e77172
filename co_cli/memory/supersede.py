"""Which memory a stated change makes out of date, asked as one focused question.

Memory extraction's reading says when a part of the message is a change ("Relocated to Turin", "dropped X for
Y"), and names the memory it replaces when it sees one, or gives the same topic key; a small model often does
neither. For such a change co asks apart: shown the user's words and the memories it could be about (the
nearest by the change's own words and those sharing its topic key), which one it makes
out of date, answered as one of the ids shown or "none" (the answer's schema allows nothing else). Nothing here
reads the words: the model decides, co checks that the answer is a memory it was shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, create_model

from co_cli.memory.grounding import shares_a_word
from co_cli.memory.retrieval import query_terms
from co_cli.models.structured_answer import ask
from co_cli.store import Memories, Memory

if TYPE_CHECKING:
    from pydantic_ai.models import Model

NEAREST = 5
SHOWN = 8
NONE = "none"

INSTRUCTIONS = """The user told an assistant that something changed. You see the user's words and memories the
assistant keeps. Which memory does the change make out of date: the same thing (the same person's home, job,
tool, reviewer, date or plan) that now has another value? Answer that memory's id, or "none" when no memory is
about the same thing.

Examples:
Said: "Wir sitzen jetzt in Halle 3." Memories: m2 | Ich trinke Tee; m7 | Unser Team sitzt in Halle 1
-> {"replaces": "m7"}
Said: "Ahora uso Neovim." Memories: m1 | Vivo en Cádiz; m4 | Mi perro se llama Toby -> {"replaces": "none"}"""


def candidates(store: Memories, words: str, topic: str | None, project: str, taken: Sequence[int]) -> list[Memory]:
    """The memories a change in ``words`` may make out of date: the nearest by its words (a word shared as
    characters: ``grounding.shares_a_word``) and those with its topic key, at most SHOWN, none of ``taken``.
    (Shown the newest memories when none shared a word or the key, the 1.5B model named unrelated ones: a
    project's deadline for a colleague's leave, that for "Cheers".)"""
    terms = query_terms(words)
    hits = store.search(terms, project=project, limit=NEAREST) if terms else []
    near = [c.memory for c in hits if shares_a_word(terms, c.memory.text)]
    same = store.with_topics([topic], project) if topic else []
    found: dict[int, Memory] = {}
    for memory in [*near, *same]:
        if memory.id not in taken and memory.kind == "fact":
            found.setdefault(memory.id, memory)
    return list(found.values())[:SHOWN]


def question(said: str, shown: Sequence[Memory]) -> str:
    lines = [f'Said: "{said}"', "Memories:"]
    lines += [f"- {m.ref} | {m.text}" for m in shown]
    return "\n".join(lines)


def answer_type(shown: Sequence[Memory]) -> type[BaseModel]:
    """The answer: one of the ids shown, or "none"."""
    ids = tuple(m.ref for m in shown) + (NONE,)
    return create_model("Superseded", replaces=(Literal[ids], ...))  # type: ignore[arg-type]


async def superseded(model: Model, said: str, shown: Sequence[Memory], *, prompted: bool = False) -> Memory | None:
    """The memory of ``shown`` that the change ``said`` makes out of date, as the model answers; None for "none"
    (or when nothing is shown)."""
    if not shown:
        return None
    answer = await ask(model, answer_type(shown), INSTRUCTIONS, question(said, shown), prompted=prompted)
    ref = getattr(answer, "replaces", NONE)
    return next((m for m in shown if m.ref == ref), None)
