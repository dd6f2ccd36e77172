"""Typed readings of user messages as a model answers memory extraction (``memory.extract.Reading``'s facts)."""

from __future__ import annotations

WRITES_GO = {
    "text": "I write Go at work every day",
    "quote": "I write Go at work every day",
    "about": "user",
    "topic": "work_language",
    "kind": "lasting_fact",
    "replaces": None,
}
"""The reading of "I write Go at work every day, keep that in mind" as a model answers it."""
