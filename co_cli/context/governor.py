"""The capability that fits every model request into the context window.

It rewrites only what is sent (``request_context.messages``); the run's history (``ctx.messages``) stays the
lossless transcript, so ``result.new_messages()`` and ``all_messages()`` are untouched. A compaction is
cached as ``(covered, replacement)`` relative to the run's history, which only grows by appending, so later
requests of the run reuse it without another model call.

``before_model_request`` (once per request step) is the hook rather than ``prepare_model_request`` (once per
attempt): the summariser call must not repeat when a fallback or retry makes another attempt, and the window
comes from the constructor, not from the serving model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelRequest
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.tools import RunContext

from co_cli.config import Settings
from co_cli.context.compact import CompactionResult, compact_middle
from co_cli.context.offload import offload_large_outputs
from co_cli.context.repair import repair_orphans
from co_cli.context.tokens import TokenEstimate, estimate_history
from co_cli.context.trim import truncate_tool_returns
from co_cli.context.window import MessageMemo, is_summary_message

FALLBACK_COOLDOWN_REQUESTS = 3
"""After a static-marker fallback, this many requests compact without asking the summariser."""
MAX_CONSECUTIVE_FAILURES = 3
"""After this many fallbacks in a row the summariser is not called again until ``reset_failures()``."""
SUMMARIZER_INPUT_FRACTION = 0.5
"""The summariser gets chunks of at most this fraction of the window."""
TAIL_TOKEN_FRACTION = 0.3
"""A compaction's verbatim tail shrinks (down to 4 messages) to stay under this fraction of the window."""


CHARS_PER_TOKEN = 4
OFFLOAD_WINDOW_SHARE = 4  # an output may take at most 1/4 of the window


@dataclass
class GovernorEvent:
    """Something the REPL should know: a compaction happened, or a notice to print."""

    kind: Literal["compaction", "notice"]
    result: CompactionResult | None = None
    trigger: Literal["auto"] | None = None
    message: str | None = None


@dataclass
class _Cached:
    covered: int
    replacement: list[ModelMessage]
    last_covered: ModelMessage
    """The message just before ``covered``, to check by identity that the cache still fits the history."""
    result: CompactionResult


@dataclass(init=False, eq=False)
class ContextGovernor(AbstractCapability[Any]):
    """Offload, trim, repair and (past the threshold) compact the history before every model request.

    The ``on_event`` callback is stored as ``listener``: a field named ``on_event`` would shadow the
    capability hook of that name and make pydantic-ai treat every run as an event stream.
    """

    settings: Settings
    context_window: int
    summarizer: Model | str | None
    offload_dir: Callable[[], Path] | None
    overhead_tokens: int
    listener: Callable[[GovernorEvent], None] | None

    def __init__(
        self,
        settings: Settings,
        context_window: int,
        summarizer: Model | str | None = None,
        offload_dir: Callable[[], Path] | None = None,
        overhead_tokens: int = 0,
        on_event: Callable[[GovernorEvent], None] | None = None,
        *,
        listener: Callable[[GovernorEvent], None] | None = None,
        id: str | None = None,
        description: str | None = None,
        defer_loading: bool = False,
    ) -> None:
        self.settings = settings
        self.context_window = context_window
        self.summarizer = summarizer
        self.offload_dir = offload_dir
        self.overhead_tokens = overhead_tokens
        self.listener = on_event or listener
        self.id = id
        self.description = description
        self.defer_loading = defer_loading
        self._cache: _Cached | None = None
        self._run_id: str | None = None
        self._cooldown = 0
        self._failures = 0
        self._llm_disabled = False
        self._stuck_notice_sent = False
        self._last_estimate: TokenEstimate | None = None
        self._compactions = 0
        self._offload_memo = MessageMemo()
        self._trim_memo = MessageMemo()
        self._repair_memo = MessageMemo()

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds callables and session state

    # --- public state ---------------------------------------------------------------------------

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
        return int(self.settings.compact_threshold * self.context_window)

    @property
    def summarizer_disabled(self) -> bool:
        return self._llm_disabled

    @property
    def offload_threshold(self) -> int:
        """Characters past which a tool output goes to a file: the setting, but never more than a quarter of
        the window (about 4 characters a token), so one output cannot fill a small window by itself."""
        setting = self.settings.tool_output_offload_chars
        if setting <= 0 or self.context_window <= 0:
            return setting
        return min(setting, self.context_window * CHARS_PER_TOKEN // OFFLOAD_WINDOW_SHARE)

    def discard(self) -> None:
        """Forget a compaction made during a run that failed: the next run starts from the working context."""
        self._cache = None

    def reset_failures(self) -> None:
        """Let the summariser be called again (after a manual /compact)."""
        self._failures = 0
        self._cooldown = 0
        self._llm_disabled = False

    def adopt(self, all_messages: Sequence[ModelMessage]) -> tuple[list[ModelMessage], CompactionResult | None]:
        """The working context to keep after a run (cached compaction applied, nothing trimmed) and the
        compaction it contains relative to ``all_messages`` (None when there was none). Clears the cache."""
        cached, self._cache = self._cache, None
        if cached is None or not self._relocate(cached, all_messages):
            return list(all_messages), None
        working = [*cached.replacement, *all_messages[cached.covered :]]
        result = CompactionResult(
            messages=working,
            covered=cached.covered,
            replacement=list(cached.replacement),
            summary=cached.result.summary,
            tokens_before=cached.result.tokens_before,
            tokens_after=cached.result.tokens_after,
            used_fallback=cached.result.used_fallback,
            error=cached.result.error,
            n_replaced=cached.result.n_replaced,
        )
        return working, result

    # --- processing without the model -------------------------------------------------------------

    def apply_cached(self, messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        cached = self._cache
        if cached is None:
            return list(messages)
        return [*cached.replacement, *messages[cached.covered :]]

    def shrink(self, messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        """Offload, then trim (both keep one message per message)."""
        out = list(messages)
        threshold = self.offload_threshold
        if threshold > 0 and self.offload_dir is not None:
            out = offload_large_outputs(out, threshold, self.offload_dir(), memo=self._offload_memo)
        return truncate_tool_returns(out, self.settings.tool_output_trim_chars, memo=self._trim_memo)

    def process(
        self, messages: Sequence[ModelMessage]
    ) -> tuple[list[ModelMessage], list[ModelMessage], list[ModelMessage], TokenEstimate]:
        """(cache applied, shrunk, sendable, estimate) for the run's history; no model call."""
        applied = self.apply_cached(messages)
        shrunk = self.shrink(applied)
        final = repair_orphans(shrunk, memo=self._repair_memo)
        return applied, shrunk, final, estimate_history(final, overhead_tokens=self.overhead_tokens)

    def over_budget(self, estimate: TokenEstimate, message_count: int) -> bool:
        if self.context_window > 0 and estimate.total > self.threshold_tokens:
            return True
        limit = self.settings.max_history_messages
        return limit > 0 and message_count > limit

    # --- the hook ----------------------------------------------------------------------------------

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        base = list(request_context.messages)
        self._sync(ctx.run_id, base)
        use_llm = not self._llm_disabled and self._cooldown == 0
        if self._cooldown > 0:
            self._cooldown -= 1
        applied, shrunk, final, estimate = self.process(base)
        if self.over_budget(estimate, len(final)):
            model = (self.summarizer or request_context.model) if use_llm else None
            compacted = await self._compact(base, applied, shrunk, estimate, model)
            if compacted is not None:
                final, estimate = compacted
        if not final or not isinstance(final[-1], ModelRequest):
            final = repair_orphans(base)
            estimate = estimate_history(final, overhead_tokens=self.overhead_tokens)
        self._last_estimate = estimate
        request_context.messages = final
        return request_context

    # --- internals ---------------------------------------------------------------------------------

    def _emit(self, event: GovernorEvent) -> None:
        if self.listener is not None:
            self.listener(event)

    def _notice(self, message: str) -> None:
        self._emit(GovernorEvent(kind="notice", message=message))

    @staticmethod
    def _relocate(cached: _Cached, messages: Sequence[ModelMessage]) -> bool:
        """Point the cache at where its last covered message now sits; False when it is gone."""
        index = cached.covered - 1
        if 0 <= index < len(messages) and messages[index] is cached.last_covered:
            return True
        for i, msg in enumerate(messages):
            if msg is cached.last_covered:
                cached.covered = i + 1
                return True
        return False

    def _sync(self, run_id: str | None, base: Sequence[ModelMessage]) -> None:
        """Keep the cache only while it still describes this history."""
        cached = self._cache
        new_run = run_id != self._run_id
        self._run_id = run_id
        if cached is None:
            return
        if new_run:
            summary = next((m for m in cached.replacement if is_summary_message(m)), None)
            if summary is not None and any(m is summary for m in base):
                self._cache = None  # the caller already passed the compacted context back
                return
        if not self._relocate(cached, base):
            self._cache = None

    async def _compact(
        self,
        base: list[ModelMessage],
        applied: list[ModelMessage],
        shrunk: list[ModelMessage],
        estimate: TokenEstimate,
        model: Model | str | None,
    ) -> tuple[list[ModelMessage], TokenEstimate] | None:
        window = self.context_window
        result = await compact_middle(
            shrunk,
            model,
            max_history_messages=self.settings.max_history_messages,
            max_input_tokens=int(window * SUMMARIZER_INPUT_FRACTION) if window > 0 else None,
            max_tail_tokens=int(window * TAIL_TOKEN_FRACTION) if window > 0 else None,
        )
        if result is None:
            # Only the token budget is worth a notice: past the message count alone the context still fits.
            if estimate.total > self.threshold_tokens and not self._stuck_notice_sent:
                self._stuck_notice_sent = True
                self._notice(
                    f"Context is at ~{estimate.total} tokens (threshold {self.threshold_tokens}) and nothing "
                    "more can be summarised automatically; /compact or /new may help."
                )
            return None
        old = self._cache
        old_len = len(old.replacement) if old else 0
        if result.covered < old_len:
            return None
        covered = (old.covered if old else 0) + result.covered - old_len
        head_len = max(i for i, m in enumerate(result.replacement) if is_summary_message(m))
        replacement = [*applied[:head_len], *result.replacement[head_len:]]
        placeholder = CompactionResult(
            messages=[],
            covered=covered,
            replacement=replacement,
            summary=result.summary,
            tokens_before=estimate.total,
            tokens_after=0,
            used_fallback=result.used_fallback,
            error=result.error,
            n_replaced=result.n_replaced,
        )
        self._cache = _Cached(
            covered=covered, replacement=replacement, last_covered=base[covered - 1], result=placeholder
        )
        applied_after, _, final, after = self.process(base)
        placeholder.messages = applied_after
        placeholder.tokens_after = after.total
        self._compactions += 1
        self._stuck_notice_sent = False
        self._account(model, result)
        self._emit(GovernorEvent(kind="compaction", result=placeholder, trigger="auto"))
        return final, after

    def _account(self, model: Model | str | None, result: CompactionResult) -> None:
        """Track summariser failures: cool down after one, stop for the session after several in a row."""
        if model is None:
            return
        if not result.used_fallback:
            self._failures = 0
            return
        self._failures += 1
        self._cooldown = FALLBACK_COOLDOWN_REQUESTS
        self._notice(f"Summariser failed ({result.error}); kept a static marker instead.")
        if self._failures >= MAX_CONSECUTIVE_FAILURES:
            self._llm_disabled = True
            self._notice(
                f"Summariser failed {self._failures} times in a row; older messages will be trimmed with a "
                "static marker until /compact succeeds."
            )
