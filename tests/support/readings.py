"""Typed readings of user messages as a model answers memory extraction (``memory.extract.Reading``'s facts)."""

from __future__ import annotations

from typing import Any

from co_cli.memory import people, standing

WRITES_GO = {
    "text": "I write Go at work every day",
    "quote": "I write Go at work every day",
    "about": "user",
    "topic": "work_language",
    "kind": "lasting_fact",
    "replaces": None,
}
"""The reading of "I write Go at work every day, keep that in mind" as a model answers it."""

CONFIRMING = ((standing.INSTRUCTIONS, "rule"), (people.INSTRUCTIONS, "person"))
"""The short questions co asks about one part of a reading (``memory.standing``, ``memory.people``), each with the
answer that confirms the reading: a rule holds for every later answer, the one a fact is about is a person."""


def confirming_answer(system: str | None) -> dict[str, Any] | None:
    """The answer confirming the reading, when ``system`` (a request's instructions) is a short question's; else
    None."""
    for instructions, answer in CONFIRMING:
        if instructions in (system or ""):
            return {"answer": answer}
    return None

