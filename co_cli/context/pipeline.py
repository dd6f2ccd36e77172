"""What is sent: the history with the cached compaction applied, huge outputs offloaded, old outputs
trimmed and orphaned tool calls repaired. No model call here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic_ai.messages import ModelMessage

from co_cli.context.memo import MessageMemo
from co_cli.context.offload import offload_large_outputs
from co_cli.context.policy import GovernorConfig
from co_cli.context.repair import repair_orphans
from co_cli.context.tokens import TokenEstimate, estimate_history
from co_cli.context.trim import truncate_tool_returns


@dataclass
class Processed:
    applied: list[ModelMessage]
    """The history with the cached compaction applied (nothing trimmed)."""
    shrunk: list[ModelMessage]
    """``applied`` offloaded and trimmed (one message per message)."""
    sendable: list[ModelMessage]
    """``shrunk`` repaired: what the model is sent."""
    estimate: TokenEstimate
    tiers: tuple[str, ...] = ()
    """The passes that changed something in ``shrunk`` (for the compaction record)."""


class SendPipeline:
    """Offload, trim and repair, with per-message memos so a growing history is processed incrementally."""

    def __init__(self, config: GovernorConfig, offload_dir: Callable[[], Path] | None, overhead_tokens: int) -> None:
        self.config = config
        self.offload_dir = offload_dir
        self.overhead_tokens = overhead_tokens
        self._offload_memo = MessageMemo()
        self._trim_memo = MessageMemo()
        self._repair_memo = MessageMemo()

    def shrink(self, messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        """Offload, then trim (both keep one message per message)."""
        out = list(messages)
        threshold = self.config.offload_threshold
        if threshold > 0 and self.offload_dir is not None:
            out = offload_large_outputs(out, threshold, self.offload_dir(), memo=self._offload_memo)
        return truncate_tool_returns(out, self.config.tool_output_trim_chars, memo=self._trim_memo)

    def estimate(self, messages: Sequence[ModelMessage]) -> TokenEstimate:
        return estimate_history(messages, overhead_tokens=self.overhead_tokens)

    def process(self, applied: Sequence[ModelMessage]) -> Processed:
        shrunk = self.shrink(applied)
        sendable = repair_orphans(shrunk, memo=self._repair_memo)
        changed = ("offload, trim",) if any(a is not b for a, b in zip(applied, shrunk, strict=True)) else ()
        return Processed(list(applied), shrunk, sendable, self.estimate(sendable), changed)
