"""The capability that fits every model request into the context window.

It rewrites only what is sent (``request_context.messages``); the run's history (``ctx.messages``) stays the
lossless transcript, so ``result.new_messages()`` and ``all_messages()`` are untouched. Three parts, one
job each: ``SendPipeline`` (what is sent), ``CompactionPolicy`` (when to compact, and whether the summariser
may be asked) and ``CompactionCache`` (the compaction already made in this run, reused by later requests).

``before_model_request`` (once per request step) is the hook rather than ``prepare_model_request`` (once per
attempt): the summariser call must not repeat when a fallback or retry makes another attempt, and the window
comes from the constructor, not from the serving model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelRequest
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.tools import RunContext

from co_cli.context.compact import CompactionResult, Skipped, compact_middle
from co_cli.context.compaction_cache import CompactionCache
from co_cli.context.pipeline import Processed, SendPipeline
from co_cli.context.policy import CompactionPolicy, GovernorConfig
from co_cli.context.repair import repair_orphans
from co_cli.context.summarize import SummaryMode
from co_cli.context.tiers import MIN_CLAMP_CHARS, TierResult, clamp_oversized_parts, drop_superseded_reads
from co_cli.context.tokens import TokenEstimate
from co_cli.context.user_quotes import Said
from co_cli.models import summary_time_limits

SUMMARIZER_INPUT_FRACTION = 0.5
"""The summariser gets chunks of at most this fraction of the window."""
TAIL_TOKEN_FRACTION = 0.3
"""A compaction's verbatim tail shrinks (down to 4 messages) to stay under this fraction of the window."""
CLAMP_FALLBACK_CHARS = 40_000
"""A single part longer than this is clamped when nothing bounds outputs (offloading off, window unknown)."""


@dataclass
class GovernorEvent:
    """Something the REPL should know: a compaction starts or happened, or a notice to print."""

    kind: Literal["compacting", "compaction", "notice"]
    result: CompactionResult | None = None
    trigger: Literal["auto"] | None = None
    message: str | None = None


@dataclass(init=False, eq=False)
class ContextGovernor(AbstractCapability[Any]):
    """Offload, trim, repair and (past the threshold) compact the history before every model request.

    The ``on_event`` callback is stored as ``listener``: a field named ``on_event`` would shadow the
    capability hook of that name and make pydantic-ai treat every run as an event stream.
    """

    config: GovernorConfig
    summarizer: Model | str | None
    listener: Callable[[GovernorEvent], None] | None

    def __init__(
        self,
        config: GovernorConfig,
        summarizer: Model | str | None = None,
        offload_dir: Callable[[], Path] | None = None,
        overhead_tokens: int = 0,
        on_event: Callable[[GovernorEvent], None] | None = None,
        said: Callable[[], Said] | None = None,
    ) -> None:
        self.config = config
        self.said = said
        """What the model read in the user's messages one at a time (asked for when a compaction is made)."""
        self.summarizer = summarizer
        self.listener = on_event
        self.id = None
        self.description = None
        self.defer_loading = False
        self.pipeline = SendPipeline(config, offload_dir, overhead_tokens)
        self.policy = CompactionPolicy(config)
        self.cache = CompactionCache()
        self.summary_mode = SummaryMode()
        """How the summariser's typed answer is asked for (switched to prompted JSON by its first prose answer)."""
        self._last_estimate: TokenEstimate | None = None
        self._compactions = 0

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds callables and session state

    # --- public state ---------------------------------------------------------------------------

    @property
    def overhead_tokens(self) -> int:
        return self.pipeline.overhead_tokens

    @property
    def last_sent_estimate(self) -> TokenEstimate | None:
        """The token estimate of the last history sent to the model."""
        return self._last_estimate

    @property
    def compactions(self) -> int:
        """Automatic compactions made by this governor."""
        return self._compactions

    @property
    def threshold_tokens(self) -> int:
        return self.config.threshold_tokens

    @property
    def summarizer_disabled(self) -> bool:
        return self.policy.summarizer_disabled

    def discard(self) -> None:
        """Forget a compaction made during a run that failed: the next run starts from the working context."""
        self.cache.discard()

    def reset_failures(self) -> None:
        """Let the summariser be called again (after a manual /compact)."""
        self.policy.reset()

    def adopt(self, all_messages: Sequence[ModelMessage]) -> tuple[list[ModelMessage], CompactionResult | None]:
        """The working context to keep after a run (cached compaction applied, nothing trimmed) and the
        compaction it contains relative to ``all_messages`` (None when there was none). Clears the cache."""
        result = self.cache.adopt(all_messages)
        return (list(all_messages), None) if result is None else (result.messages, result)

    def process(self, messages: Sequence[ModelMessage]) -> Processed:
        """The run's history as it would be sent (cache applied, shrunk, repaired); no model call."""
        return self.pipeline.process(self.cache.apply(messages))

    # --- the hook ----------------------------------------------------------------------------------

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        base = list(request_context.messages)
        self.cache.sync(ctx.run_id, base)
        may_ask = self.policy.take_request()
        processed = self.process(base)
        if self.policy.over_budget(processed.estimate, len(processed.sendable)):
            processed = self.cheap_passes(processed)
        final, estimate = processed.sendable, processed.estimate
        if self.policy.over_budget(estimate, len(final)):
            must_fit = self.policy.must_fit(estimate)
            if self.config.auto_compact or must_fit:
                model = (self.summarizer or request_context.model) if may_ask else None
                compacted = await self._compact(base, processed, model, must_fit=must_fit)
                if compacted is not None:
                    final, estimate = compacted
        if not final or not isinstance(final[-1], ModelRequest):
            final = repair_orphans(base)
            estimate = self.pipeline.estimate(final)
        self._last_estimate = estimate
        request_context.messages = final
        return request_context

    def cheap_passes(self, processed: Processed) -> Processed:
        """Past the token threshold, the passes that cost no model call, in order, each only while the
        request is still over it: drop file reads that were read again later, then clamp single oversized
        parts. (Old tool outputs are already trimmed and huge ones offloaded on every request.)"""
        clamp_chars = max(MIN_CLAMP_CHARS, self.config.offload_threshold or CLAMP_FALLBACK_CHARS)
        passes: tuple[tuple[str, Callable[[list[ModelMessage]], TierResult]], ...] = (
            ("superseded reads", drop_superseded_reads),
            ("clamp", lambda messages: clamp_oversized_parts(messages, clamp_chars)),
        )
        for name, run in passes:
            if not self.policy.over_tokens(processed.estimate):
                break
            tier = run(processed.shrunk)
            if tier.changed:
                sendable = repair_orphans(tier.messages)
                processed = replace(
                    processed,
                    shrunk=tier.messages,
                    sendable=sendable,
                    estimate=self.pipeline.estimate(sendable),
                    tiers=(*processed.tiers, name),
                )
        return processed

    # --- internals ---------------------------------------------------------------------------------

    def _emit(self, event: GovernorEvent) -> None:
        if self.listener is not None:
            self.listener(event)

    def _notice(self, message: str) -> None:
        self._emit(GovernorEvent(kind="notice", message=message))

    def _trigger_detail(self, processed: Processed, must_fit: bool) -> str:
        window = self.config.context_window
        if must_fit and not self.config.auto_compact:
            return f"at {100 * processed.estimate.total / window:.0f}% of the window, auto_compact off"
        if self.policy.over_tokens(processed.estimate):
            return f"auto at {100 * processed.estimate.total / window:.0f}% of the window"
        return f"auto past {self.config.max_history_messages} messages"

    async def _compact_middle(
        self, processed: Processed, model: Model | str | None, *, must_fit: bool, whole: bool = False
    ) -> CompactionResult | Skipped | None:
        window = self.config.context_window
        return await compact_middle(
            processed.shrunk,
            model,
            max_history_messages=self.config.max_history_messages,
            max_input_tokens=int(window * SUMMARIZER_INPUT_FRACTION) if window > 0 else None,
            max_tail_tokens=int(window * TAIL_TOKEN_FRACTION) if window > 0 else None,
            min_span_tokens=0 if whole else self.policy.min_span_tokens,
            must_fit=must_fit,
            model_settings=summary_time_limits(model, self.config.request_timeout) if model is not None else None,
            user_words_tokens=self.config.user_words_budget,
            mode=self.summary_mode,
            whole=whole,
            said=self.said() if self.said is not None else None,
        )

    async def _compact(
        self, base: list[ModelMessage], processed: Processed, model: Model | str | None, *, must_fit: bool
    ) -> tuple[list[ModelMessage], TokenEstimate] | None:
        self._emit(GovernorEvent(kind="compacting"))
        result = await self._compact_middle(processed, model, must_fit=must_fit)
        if isinstance(result, Skipped):
            self.policy.skipped(result)
            result = None
        if result is None and self.policy.over_tokens(processed.estimate):
            # Past the token budget, do what a manual /compact would: everything before the current turn,
            # however few messages it holds and however small its span.
            whole = await self._compact_middle(processed, model, must_fit=must_fit, whole=True)
            result = whole if isinstance(whole, CompactionResult) else None
        if result is None:
            # Only the token budget is worth a notice: past the message count alone the context still fits.
            notice = self.policy.stuck(processed.estimate)
            if notice:
                self._notice(notice)
            return None
        old_len = self.cache.replacement_length
        if result.covered < old_len:
            return None
        # The result is relative to the shrunk history; the cache is kept relative to the run's own history,
        # with the head as it was before shrinking.
        covered = self.cache.entry_covered + result.covered - old_len
        replacement = [*processed.applied[: result.head], *result.replacement[result.head :]]
        relative = replace(
            result,
            covered=covered,
            replacement=replacement,
            tokens_before=processed.estimate.total,
            detail=self._trigger_detail(processed, must_fit),
            tiers=processed.tiers,
        )
        self.cache.store(base, relative)
        after = self.process(base)
        relative.messages = after.applied
        relative.tokens_after = after.estimate.total
        self._compactions += 1
        self.policy.compacted()
        if model is not None:
            for notice in self.policy.record(result.method, result.error, timed_out=result.timed_out):
                self._notice(notice)
        self._emit(GovernorEvent(kind="compaction", result=relative, trigger="auto"))
        return after.sendable, after.estimate
