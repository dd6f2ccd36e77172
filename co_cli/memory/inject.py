"""Which memories a request gets, and the ``## Memory`` section of the instructions that shows them."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args

from co_cli.memory.expansion import EXPANDED_WEIGHT, search_with_topics
from co_cli.memory.retrieval import Scored, query_terms, rank, select, users_first

if TYPE_CHECKING:
    from co_cli.store import Candidate, Memories

HEADING = "## Memory"
CANDIDATES = 50
RECENT = 20
"""After the memories that match a prompt, at most this many of the newest others, as the budget allows."""
INTRO = (
    "What you remember from earlier sessions (the user reviews these; ids in brackets). Each is in the user's own "
    "words: I and my are the user. Use what is relevant; follow the instructions. Save new durable facts with "
    "remember, drop wrong ones with forget."
)
PLAIN_INTRO = "What you remember about the user:"

MemoryForm = Literal["section", "plain"]
"""How the chosen memories are written: ``section``, the ``## Memory`` section (INTRO, each line with its id and
label); ``plain``, PLAIN_INTRO and the texts alone."""
MEMORY_FORMS: tuple[MemoryForm, ...] = get_args(MemoryForm)
FORM: MemoryForm = "section"
"""The form the instructions' memories are written in (the memory bench compares the forms by setting it)."""


def prompt_text(prompt: str | Sequence[Any] | None) -> str:
    if prompt is None:
        return ""
    if isinstance(prompt, str):
        return prompt
    return " ".join(item for item in prompt if isinstance(item, str))


def relevant_memories(store: Memories, prompt: str, project: str, budget_tokens: int, now: float) -> list[Scored]:
    """The memories for a request about ``prompt``: instructions first, then the best matches, then the RECENT
    newest of the rest, within budget."""
    if budget_tokens <= 0:
        return []
    instructions = [Scored(m.id, m.text, m.kind, 1.0, m.about, m.person) for m in store.instructions(project)]
    candidates, more = search_with_topics(store, query_terms(prompt), project, CANDIDATES)
    ranked = _ranked(candidates, now)
    # what only the topic's other words find: ranked apart, below every direct match
    ranked += [dataclasses.replace(s, score=s.score * EXPANDED_WEIGHT) for s in _ranked(more, now)]
    # then, as room allows, the newest of the rest: a question in other words or another language than the
    # memory that answers it shares no word with it
    # (after every match, whoever the match is about)
    found = {s.id for s in ranked}
    fill = [
        Scored(m.id, m.text, m.kind, 0.0, m.about, m.person) for m in store.recent(project, RECENT) if m.id not in found
    ]
    return select(instructions, users_first(ranked, prompt) + fill, budget_tokens)


def _ranked(candidates: Sequence[Candidate], now: float) -> list[Scored]:
    """The candidates best first, each with whom it is about."""
    by_id = {c.memory.id: c.memory for c in candidates}
    ranked = rank(((c.memory.id, c.memory.text, c.memory.kind, c.bm25, c.memory.updated_at) for c in candidates), now)
    return [dataclasses.replace(s, about=by_id[s.id].about, person=by_id[s.id].person) for s in ranked]


def render_memory_section(chosen: Sequence[Scored], form: MemoryForm | None = None) -> str:
    """The chosen memories as the instructions show them, in ``form`` (by default ``FORM``)."""
    if not chosen:
        return ""
    if (form or FORM) == "plain":
        return "\n".join([PLAIN_INTRO, *(f"- {item.text}" for item in chosen)])
    lines = [HEADING, INTRO]
    for item in chosen:
        label = f" {item.label}" if item.label else ""
        lines.append(f"- [m{item.id}]{label} {item.text}")
    return "\n".join(lines)
