"""Compaction of the live session's working context: on demand (``/compact``, with preview and edit), after
the provider said the context is too long, and undone (``/uncompact``). Every compaction is saved as an event,
so a resumed session sends exactly what the live one would have sent."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pydantic_ai.settings import ModelSettings

from co_cli.context.compact import (
    CompactionResult,
    NothingToCompact,
    compact_all,
    compact_middle,
    drop_tool_outputs,
    edited_check,
    is_timeout,
)
from co_cli.context.policy import SLOW_SUMMARISER_HINT, user_words_budget
from co_cli.context.tokens import estimate_history
from co_cli.context.user_quotes import Suggestion, carried_suggestions
from co_cli.context.working import CompactedSpan, WorkingContext
from co_cli.deps import Pin, PinSource, SessionState
from co_cli.failure_text import describe_provider_error
from co_cli.message_view import views
from co_cli.models import summary_time_limits
from co_cli.session.engine import Engine
from co_cli.session.pins import Pins
from co_cli.session.recorder import Recorder
from co_cli.store import CompactionRecord
from co_cli.synthetic import is_summary, replace_summary_text
from co_cli.vocabulary import CompactionTrigger


def compaction_record(
    result: CompactionResult, span: CompactedSpan, *, trigger: CompactionTrigger, focus: str, model: str
) -> CompactionRecord:
    """What is saved of a compaction that replaced ``span`` of the transcript."""
    return CompactionRecord(
        from_seq=span.from_seq,
        upto_seq=span.upto_seq,
        summary=result.summary,
        focus=focus,
        trigger=trigger,
        tokens_before=result.tokens_before,
        tokens_after=result.tokens_after,
        model=model,
        replacement=result.replacement,
        method=result.method,
        detail=result.detail or trigger,
        ledger=result.check,
        tiers=", ".join(result.tiers),
    )


class Compactions:
    def __init__(
        self,
        state: SessionState,
        engine: Engine,
        recorder: Recorder,
        pins: Pins,
        rebuild: Callable[[], WorkingContext],
    ) -> None:
        self.state = state
        self.engine = engine
        self.recorder = recorder
        self.pins = pins
        self.rebuild = rebuild
        """The working context rebuilt from the store (after an undo)."""
        self.offered: list[Pin] = []
        """The pins the latest manual compaction found in the user's messages."""

    def record(
        self, result: CompactionResult, context: WorkingContext, *, trigger: CompactionTrigger, focus: str
    ) -> CompactionRecord:
        """The record of ``result``, a compaction of ``context``."""
        return compaction_record(
            result, context.span(result), trigger=trigger, focus=focus, model=self.engine.summary_model_name
        )

    def found_pins(self, result: CompactionResult) -> list[tuple[str, PinSource]]:
        """Standing instructions the user stated in the compacted messages (named by the summariser's typed
        answer and found in the user's messages): they hold from now on as pins, outside the history, so no
        later compaction can drop them."""
        return self.pins.new_ones(result.standing_instructions, "summary")

    async def preview(self, focus: str | None) -> CompactionResult:
        """A summary of the whole working context, not applied (``/compact preview``).

        Raises ``NothingToCompact`` when there is nothing (new) worth summarising."""
        messages = self.state.context.messages
        if not messages:
            raise NothingToCompact("nothing to compact yet")
        result = await compact_all(
            messages,
            self.engine.summary_model,
            focus=focus or None,
            max_input_tokens=self.engine.resolved.context_window // 2,
            model_settings=self._time_limits(),
            user_words_tokens=self._user_words_budget(),
            mode=self.engine.governor.summary_mode,
            said=self.engine.said(),
        )
        return replace(result, detail="manual")

    def apply(self, result: CompactionResult, focus: str | None) -> None:
        """Make ``result`` the working context (a manual compaction): saved with the pins it found and what
        the summariser spent."""
        self._apply(result, trigger="manual", focus=focus or "", usage=True)
        self.engine.governor.reset_failures()

    async def compact(self, focus: str | None) -> CompactionResult:
        """Summarise the whole working context now (``/compact``); the history is unchanged on failure."""
        result = await self.preview(focus)
        self.apply(result, focus)
        return result

    def _apply(self, result: CompactionResult, *, trigger: CompactionTrigger, focus: str, usage: bool) -> None:
        context = self.state.context
        found = self.found_pins(result)
        spent = self.engine.drain_summary_usage() if usage else None
        ids = self.recorder.compaction(self.record(result, context, trigger=trigger, focus=focus), found, spent)
        self.offered = self.pins.adopt(found, ids)
        context.apply(result)

    def undo(self) -> int | None:
        """Restore the working context as it was before the latest compaction in force (the transcript is
        lossless, so this is exact); recorded, so a resumed session does the same. Returns how many
        messages the working context now holds, or None when there is no compaction to undo."""
        if self.state.info is None or self.recorder.undo_compaction() is None:
            return None
        self.state.context = self.rebuild()
        self.engine.governor.discard()
        return len(self.state.context)

    def with_summary_text(self, result: CompactionResult, text: str) -> CompactionResult:
        """``result`` with its summary replaced by the user's edit of it."""
        summary = replace_summary_text(result.replacement[result.head], text)
        replacement = [*result.replacement[: result.head], summary, *result.replacement[result.head + 1 :]]
        messages = [*replacement, *result.messages[len(result.replacement) :]]
        return replace(
            result,
            replacement=replacement,
            messages=messages,
            summary=text,
            tokens_after=estimate_history(messages).total,
            check=edited_check(text, self.state.context.messages[result.head : result.covered]),
        )

    def current_summary(self) -> str | None:
        """The text of the summary (or digest, or marker) the working context starts from, if any."""
        for message in self.state.context.messages:
            if is_summary(message):
                return "\n".join(view.text for view in views(message) if view.kind == "user")
        return None

    def current_suggestions(self) -> list[Suggestion]:
        """What word cues suggested when the summary in force was made without a typed answer, less what is
        pinned already (nothing of it was applied)."""
        for message in self.state.context.messages:
            if is_summary(message):
                return [s for s in carried_suggestions(message) if s.kind == "next step" or self.pins.is_new(s.text)]
        return []

    async def compact_harder(self, notice: Callable[[str], None]) -> bool:
        """After the provider said the context is too long: summarise the middle without tool outputs so it
        surely fits (or at least drop the tool outputs); False when nothing could be made smaller."""
        messages = self.state.context.messages
        lean = drop_tool_outputs(messages)
        try:
            result = await compact_middle(
                lean,
                self.engine.summary_model,
                max_history_messages=max(4, self.engine.deps.settings.max_history_messages or 8),
                max_input_tokens=self.engine.resolved.context_window // 2,
                must_fit=True,
                model_settings=self._time_limits(),
                user_words_tokens=self._user_words_budget(),
                mode=self.engine.governor.summary_mode,
                said=self.engine.said(),
            )
        except Exception as exc:
            notice(f"Compaction failed: {describe_provider_error(exc)}")
            result = None
        if not isinstance(result, CompactionResult):
            if lean == messages:
                return False
            # Dropping the tool outputs is the compaction: record it, so a resumed session sends the same.
            result = CompactionResult(
                messages=lean,
                covered=len(lean),
                replacement=lean,
                head=0,
                summary="[tool outputs dropped to fit the context window]",
                tokens_before=estimate_history(messages).total,
                tokens_after=estimate_history(lean).total,
                used_fallback=True,
                error=None,
                n_replaced=len(lean),
                method="tools-dropped",
            )
        self._apply(replace(result, detail="overflow"), trigger="auto", focus="", usage=False)
        return True

    def failure_text(self, exc: BaseException) -> str:
        """Why a manual compaction failed, in one line; a summariser that timed out is named with the setting
        that gives it longer."""
        if is_timeout(exc):
            timeout = self.engine.deps.settings.request_timeout
            return f"the summariser sent nothing for {timeout:g} s. {SLOW_SUMMARISER_HINT}"
        return describe_provider_error(exc)

    def _time_limits(self) -> ModelSettings:
        return summary_time_limits(self.engine.summary_model, self.engine.deps.settings.request_timeout)

    def _user_words_budget(self) -> int:
        settings = self.engine.deps.settings
        return user_words_budget(settings.compact_user_words_tokens, self.engine.resolved.context_window)
