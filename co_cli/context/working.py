"""The working context: what the model is sent next, each message with its transcript seq.

The transcript (in the session store) is lossless; the working context is derived from it by compactions.
Keeping every working message beside its seq (``None`` for co's own messages: summaries, markers,
acknowledgements, closing notes) is what lets a compaction say which stretch of the transcript it replaced,
so a resumed session rebuilds exactly what the live one had.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from pydantic_ai.messages import ModelMessage, ModelRequest

from co_cli.context.compact import CompactionResult


@dataclass(frozen=True)
class CompactedSpan:
    """The transcript stretch a compaction replaced: ``from_seq`` (first summarised) to ``upto_seq`` (last
    covered, head included); -1 when no covered message is in the transcript."""

    from_seq: int
    upto_seq: int


@dataclass
class WorkingContext:
    messages: list[ModelMessage] = field(default_factory=list)
    seqs: list[int | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        if len(self.messages) != len(self.seqs):
            raise ValueError("every working message needs a seq (or None)")

    def __len__(self) -> int:
        return len(self.messages)

    def append(self, message: ModelMessage, seq: int | None) -> None:
        self.messages.append(message)
        self.seqs.append(seq)

    def extended(self, messages: Sequence[ModelMessage], seqs: Sequence[int | None]) -> WorkingContext:
        """A new working context: the first ``len(self)`` messages of ``messages`` are this one's (as the
        run saw them), the rest are new, with ``seqs`` (padded with None when fewer were saved). A request's
        instructions are left out, as the transcript leaves them out: they are made afresh for every request,
        so the live context and a resumed one hold the same messages."""
        new_count = len(messages) - len(self.seqs)
        new_seqs = [*seqs[:new_count], *[None] * max(0, new_count - len(seqs))]
        return WorkingContext([_without_instructions(m) for m in messages], [*self.seqs, *new_seqs])

    def span(self, result: CompactionResult) -> CompactedSpan:
        """Which transcript stretch ``result`` (relative to these messages) replaces."""
        covered_seqs = [s for s in self.seqs[: result.covered] if s is not None]
        upto = covered_seqs[-1] if covered_seqs else -1
        summarised = [s for s in self.seqs[result.head : result.covered] if s is not None]
        return CompactedSpan(from_seq=summarised[0] if summarised else upto, upto_seq=upto)

    def apply(self, result: CompactionResult) -> CompactedSpan:
        """Replace the covered stretch by the compaction's replacement; return the span it replaced."""
        span = self.span(result)
        self.messages = [*result.replacement, *self.messages[result.covered :]]
        self.seqs = [*[None] * len(result.replacement), *self.seqs[result.covered :]]
        return span


def _without_instructions(message: ModelMessage) -> ModelMessage:
    if isinstance(message, ModelRequest) and message.instructions is not None:
        return replace(message, instructions=None)
    return message
