"""Typed readings of user messages as a model answers memory extraction (``memory.extract.Reading``'s facts)."""

from __future__ import annotations

from typing import Any

from co_cli.memory import people, standing, tells
from tests.support.scripted_server import JSON, Reply, ToolCalls, message_text

WRITES_GO = {
    "text": "I write Go at work every day",
    "quote": "I write Go at work every day",
    "about": "user",
    "topic": "work_language",
    "kind": "lasting_fact",
    "replaces": None,
}
"""The reading of "I write Go at work every day, keep that in mind" as a model answers it."""

CONFIRMING = ((standing.INSTRUCTIONS, "rule"), (tells.INSTRUCTIONS, "fact"), (people.INSTRUCTIONS, "person"))
"""The short questions co asks about one part of a reading (``memory.standing``, ``memory.tells``,
``memory.people``), each with the answer that confirms the reading: a rule holds for every later answer, a lasting
fact tells one, the one a fact is about is a person."""


def confirming_answer(system: str | None) -> dict[str, Any] | None:
    """The answer confirming the reading, when ``system`` (a request's instructions) is a short question's; else
    None."""
    for instructions, answer in CONFIRMING:
        if instructions in (system or ""):
            return {"answer": answer}
    return None


def confirming_replies(request: JSON) -> Reply | None:
    """A ``ScriptedServer.responder`` that answers each short question with its confirming answer (the forced
    tool's call), and leaves every other request to the script."""
    system = " ".join(message_text(m) for m in request.get("messages", []) if m.get("role") == "system")
    answer = confirming_answer(system)
    return None if answer is None else ToolCalls([("final_result", answer)])
