"""The compaction a run has already made, kept so later requests of the run reuse it.

It is held as ``(covered, replacement)`` relative to the run's history, which only grows by appending:
the new history to send is ``replacement + history[covered:]``. The message just before ``covered`` is
kept too, to check by identity that the cache still describes the history it is applied to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from pydantic_ai.messages import ModelMessage

from co_cli.context.compact import CompactionResult
from co_cli.synthetic import is_summary


@dataclass
class _Entry:
    covered: int
    replacement: list[ModelMessage]
    last_covered: ModelMessage
    result: CompactionResult


class CompactionCache:
    def __init__(self) -> None:
        self._entry: _Entry | None = None
        self._run_id: str | None = None

    @property
    def entry_covered(self) -> int:
        return self._entry.covered if self._entry else 0

    @property
    def replacement_length(self) -> int:
        return len(self._entry.replacement) if self._entry else 0

    def store(self, history: Sequence[ModelMessage], result: CompactionResult) -> None:
        """Keep ``result`` (whose ``covered`` and ``replacement`` are relative to ``history``)."""
        self._entry = _Entry(result.covered, list(result.replacement), history[result.covered - 1], result)

    def discard(self) -> None:
        self._entry = None

    def apply(self, messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        entry = self._entry
        if entry is None:
            return list(messages)
        return [*entry.replacement, *messages[entry.covered :]]

    def sync(self, run_id: str | None, history: Sequence[ModelMessage]) -> None:
        """Keep the cache only while it still describes ``history``."""
        entry = self._entry
        new_run = run_id != self._run_id
        self._run_id = run_id
        if entry is None:
            return
        if new_run:
            summary = next((m for m in entry.replacement if is_summary(m)), None)
            if summary is not None and any(m is summary for m in history):
                self._entry = None  # the caller already passed the compacted context back
                return
        if not _relocate(entry, history):
            self._entry = None

    def adopt(self, all_messages: Sequence[ModelMessage]) -> CompactionResult | None:
        """The cached compaction relative to ``all_messages`` (None when there is none or it no longer
        fits); clears the cache."""
        entry, self._entry = self._entry, None
        if entry is None or not _relocate(entry, all_messages):
            return None
        working = [*entry.replacement, *all_messages[entry.covered :]]
        return replace(entry.result, messages=working, covered=entry.covered, replacement=list(entry.replacement))


def _relocate(entry: _Entry, messages: Sequence[ModelMessage]) -> bool:
    """Point the entry at where its last covered message now sits; False when it is gone."""
    index = entry.covered - 1
    if 0 <= index < len(messages) and messages[index] is entry.last_covered:
        return True
    for i, msg in enumerate(messages):
        if msg is entry.last_covered:
            entry.covered = i + 1
            return True
    return False
