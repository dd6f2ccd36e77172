"""The turn core: one conversation's working context, its saved transcript and the agent runs over it.

No terminal I/O here: the caller passes a ``TurnView`` that receives what happens during a turn, and an
approval prompter that asks the user. The REPL, ``-p`` and piped mode all drive this same class.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic_ai import Agent, CancellationToken, capture_run_messages
from pydantic_ai.capabilities import HandleDeferredToolCalls
from pydantic_ai.exceptions import RunCancelled
from pydantic_ai.messages import (
    AgentStreamEvent,
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.run import AgentRunResultEvent

from co_cli.agent import build_agent, instructions_text
from co_cli.config import Paths, Settings
from co_cli.context.boundaries import latest_request
from co_cli.context.compact import (
    CompactionResult,
    NothingToCompact,
    compact_all,
    compact_middle,
    compaction_line,
    drop_tool_outputs,
)
from co_cli.context.governor import ContextGovernor, GovernorEvent
from co_cli.context.policy import GovernorConfig
from co_cli.context.repair import repair_orphans
from co_cli.context.report import ContextReport, context_report
from co_cli.context.tokens import TokenEstimate, estimate_history, estimate_overhead
from co_cli.context.working import WorkingContext
from co_cli.deps import CoDeps
from co_cli.errors import CoError
from co_cli.failure_text import describe_provider_error, is_context_overflow
from co_cli.memory.inject import memory_report_tokens
from co_cli.message_view import kinds, views
from co_cli.models import ResolvedModel, request_time_limits
from co_cli.resume import check_fork_point, rebuild_context, rewind_point
from co_cli.synthetic import (
    CUT_OFF_NOTE,
    close_interrupted,
    interrupted_response,
    is_summary,
    replace_summary_text,
)
from co_cli.tools.approval import ApprovalPrompt, make_approval_handler
from co_cli.usage import UsageMeter, run_usage
from co_cli.vocabulary import CompactionTrigger, MessageStatus

if TYPE_CHECKING:
    from co_cli.memory.extract import ExtractionWorker
    from co_cli.store import SessionInfo, Store
    from co_cli.store.usage import TurnUsage

TurnStatus = Literal["ok", "cancelled", "cut-off", "failed"]
PinSource = Literal["user", "summary"]


@dataclass(frozen=True)
class Pin:
    """A standing instruction, kept verbatim in the instructions of every request of the session."""

    id: int
    text: str
    source: PinSource


"""ok: answered; cancelled: the user stopped it; cut-off: the stream ended before the answer was complete;
failed: the provider or the network failed (the prompt is kept for /retry)."""


class TurnView(Protocol):
    """What the terminal shows during a turn."""

    def text(self, delta: str) -> None: ...
    def tool_call(self, name: str, args: Any) -> None: ...
    def tool_result(self, name: str, content: Any) -> None: ...
    def notice(self, message: str) -> None: ...
    def end(self, interrupted: bool = False) -> None: ...


@dataclass
class TurnOutcome:
    status: TurnStatus
    output: str = ""
    error: str | None = None


@dataclass
class _Run:
    """How one agent run ended."""

    result: Any = None
    cancelled: RunCancelled | None = None
    failure: Exception | None = None
    partial: list[ModelMessage] = field(default_factory=list)
    """Messages the run added before it failed (captured)."""


@dataclass
class Conversation:
    resolved: ResolvedModel
    deps: CoDeps
    store: Store | None
    ask_approval: ApprovalPrompt | None = None
    approve_all: bool = False
    context: WorkingContext = field(default_factory=WorkingContext)
    session: SessionInfo | None = None
    last_prompt: str | None = None
    pins: list[Pin] = field(default_factory=list)
    _undo: list[WorkingContext] = field(default_factory=list)
    """Working contexts before each compaction, for /uncompact when nothing is saved (--no-save)."""
    last_usage: TurnUsage | None = None
    """The usage of the last finished turn (for ``/usage``)."""
    _meter: UsageMeter | None = None
    _background: set[Any] = field(default_factory=set)
    _notices: list[str] = field(default_factory=list)
    _compactions: list[CompactionResult] = field(default_factory=list)
    _percent_cache: tuple[tuple[int, int, int], float] | None = None
    after_turn: list[Callable[[str, str, int], None]] = field(default_factory=list)
    """Called with (prompt, session id, prompt seq) after each answered turn (e.g. memory extraction)."""
    memory_worker: ExtractionWorker | None = None

    def __post_init__(self) -> None:
        self._build()

    @property
    def working(self) -> list[ModelMessage]:
        """What the model is sent next (before trimming)."""
        return self.context.messages

    # ----- model and agent -------------------------------------------------------------------------
    def _build(self) -> None:
        settings = self.deps.settings
        self.summarizer = summarizer_model(settings, self.deps.paths)
        self.governor = ContextGovernor(
            GovernorConfig.from_settings(settings, self.resolved.context_window),
            summarizer=self.summary_model,
            offload_dir=lambda: self.deps.tool_output_dir,
            overhead_tokens=self.overhead_tokens(),
            on_event=self._on_governor_event,
        )
        handler = make_approval_handler(self.ask_approval, approve_all=self.approve_all, deps_getter=lambda: self.deps)
        self.agent: Agent[CoDeps, str] = build_agent(
            self.resolved.model,
            capabilities=[self.governor, HandleDeferredToolCalls(handler=handler)],
            request_timeout=settings.request_timeout,
        )

    def overhead_tokens(self) -> int:
        return estimate_overhead(instructions_text(self.deps), []) + tool_defs_tokens()

    def switch_model(self, resolved: ResolvedModel) -> None:
        self.resolved = resolved
        self._build()
        if self.store and self.session:
            self.store.sessions.set_model(self.session.id, resolved.label)

    @property
    def summary_model(self) -> Model:
        """The summariser (``summarization_model``, else the chat model), metered: its spend is saved apart."""
        model = self.summarizer or self.resolved.model
        if self._meter is None:
            self._meter = UsageMeter(model, "summary")
        self._meter.wrapped = model
        return self._meter

    def _save_summary_usage(self) -> None:
        usage = self._meter.drain() if self._meter else None
        if usage is not None and self.store and self.session:
            self.store.usage.record(self.session.id, usage)

    # ----- sessions --------------------------------------------------------------------------------
    @property
    def session_id(self) -> str | None:
        return self.session.id if self.session else None

    def new(self) -> None:
        self.release()
        self.session = None
        self.deps.session_id = None
        self.context = WorkingContext()
        self._undo.clear()
        self.deps.approved_commands.clear()
        self._set_pins([], recount=False)
        self._build()

    def load(self, session: SessionInfo) -> None:
        """Continue a saved session: rebuild its working context exactly as the live session had it."""
        assert self.store is not None
        self.store.locks.acquire(session.id)
        self.release()
        self.session = session
        self.deps.session_id = session.id
        self.deps.approved_commands.clear()  # "always" was said for the other session
        self.context = self._rebuild(session.id)
        self._undo.clear()
        stored_pins = self.store.pins.active(session.id)
        self._set_pins(
            [Pin(p.id, p.text, "summary" if p.source == "summary" else "user") for p in stored_pins],
            recount=False,
        )
        self._build()

    def _rebuild(self, session_id: str) -> WorkingContext:
        assert self.store is not None
        rebuilt = rebuild_context(self.store, session_id)
        context = rebuilt.context
        last_seq = context.seqs[-1] if context.seqs else None
        if rebuilt.open_turn and last_seq is not None:
            # The latest turn was cut off by a crash: save its closing note, so every later reader agrees.
            note = interrupted_response()
            saved = self.store.messages.finish_turn(session_id, last_seq, [note], status="cancelled")
            context.append(note, saved[0] if saved else None)
        return context

    def fork(self, upto_seq: int | None = None) -> SessionInfo | None:
        """Continue in a copy of the current session (up to message ``upto_seq``, which must be a point where
        the conversation can go on: CoError otherwise); the original stays as it is."""
        if not self.store or not self.session:
            return None
        if upto_seq is not None:
            check_fork_point(self.store.messages.outline(self.session.id), upto_seq)
        forked = self.store.fork(self.session.id, upto_seq)
        self.load(forked)
        return forked

    def rewind(self, upto_seq: int | None = None) -> SessionInfo | None:
        """Go back to message ``upto_seq`` (default: before the last prompt) in a fork; the original stays."""
        if not self.store or not self.session:
            return None
        point = rewind_point(self.store.messages.outline(self.session.id), upto_seq)
        forked = self.store.fork(self.session.id, point)
        self.load(forked)
        return forked

    def release(self) -> None:
        if self.store and self.session:
            self.store.locks.release(self.session.id)

    def _ensure_session(self, prompt: str) -> None:
        if self.store is None or self.session is not None:
            return
        self.session = self.store.sessions.create(model=self.resolved.label, cwd=str(self.deps.cwd), title=prompt)
        self.store.locks.acquire(self.session.id)
        self.deps.session_id = self.session.id

    # ----- turns -----------------------------------------------------------------------------------
    async def run_turn(self, prompt: str, view: TurnView, token: CancellationToken) -> TurnOutcome:
        # Text that is not valid UTF-8 (e.g. stray bytes from a pipe) is sent and saved with U+FFFD instead.
        prompt = prompt.encode("utf-8", "replace").decode("utf-8")
        self.last_prompt = prompt
        self._ensure_session(prompt)
        prompt_seq = self.store.messages.begin_turn(self.session.id, prompt) if self.store and self.session else None
        self.deps.turn_seq = prompt_seq
        outcome = await self._turn(prompt, view, token, prompt_seq, retry_on_overflow=True)
        if outcome.status == "ok" and self.session is not None and prompt_seq is not None:
            for hook in self.after_turn:
                hook(prompt, self.session.id, prompt_seq)
        if outcome.status == "ok" and prompt_seq == 0:
            self._start_title(prompt, outcome.output)
        return outcome

    # ----- background work: never on the prompt's critical path, awaited at exit ---------------------
    def _start_title(self, prompt: str, answer: str) -> None:
        """Title the session from its first exchange in the background (``auto_title``). Skipped with the
        embedded local model as summariser: the next answer would wait for it."""
        model = self.summarizer or self.resolved.model
        if not self.deps.settings.auto_title or not self.store or not self.session:
            return
        if type(model).__name__ == "LocalModel":
            return
        import asyncio

        from co_cli.titles import write_title

        session = self.session
        task = asyncio.ensure_future(write_title(self.store, session.id, session.title, model, prompt, answer))

        def done(finished: asyncio.Task[str | None]) -> None:
            self._background.discard(finished)
            title = None if finished.cancelled() or finished.exception() else finished.result()
            if title and self.session is session:
                session.title = title

        task.add_done_callback(done)
        self._background.add(task)

    async def finish_background(self, timeout: float = 15.0) -> None:
        """Let background work (titles) finish, at most ``timeout`` seconds; what is left is cancelled."""
        import asyncio

        pending = set(self._background)
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=timeout)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late)

    async def _turn(
        self,
        prompt: str,
        view: TurnView,
        token: CancellationToken,
        prompt_seq: int | None,
        *,
        retry_on_overflow: bool,
    ) -> TurnOutcome:
        base = list(self.context.messages)
        self._notices.clear()
        self._compactions.clear()
        run = await self._run_agent(prompt, base, view, token)
        self._flush_notices(view)
        cut_off = run.result is not None and _cut_off(run.result.new_messages(), self.resolved.model)
        view.end(interrupted=run.cancelled is not None or cut_off)
        if run.cancelled is not None:
            new = close_cancelled(run.cancelled.new_messages(), prompt)
            self._finish(base + new, new, prompt_seq, "cancelled", run.cancelled.usage)
            return TurnOutcome("cancelled")
        if run.result is not None and cut_off:
            new = close_cut_off(run.result.new_messages())
            self._finish(base + new, new, prompt_seq, "cancelled", run.result.usage)
            view.notice("The connection closed before the answer was complete; what arrived is kept.")
            return TurnOutcome("cut-off", output=run.result.output, error="the answer was cut off")
        if run.result is not None:
            result = run.result
            self._finish(result.all_messages(), result.new_messages(), prompt_seq, "ok", result.usage)
            return TurnOutcome("ok", output=result.output)
        failure = run.failure or RuntimeError("the run ended without a result")
        self.governor.discard()  # a compaction made during the failed run is not adopted
        tools_ran = any("tool-return" in kinds(m) for m in run.partial)
        # Retrying re-runs the turn: only when no tool has run yet (a command must not run twice).
        if retry_on_overflow and is_context_overflow(failure) and not tools_ran:
            view.notice("The provider says the context is too long: compacting harder and retrying once.")
            if await self._compact_harder(view):
                return await self._turn(prompt, view, token, prompt_seq, retry_on_overflow=False)
        if self.store and self.session and prompt_seq is not None:
            # Keep what the failed run did (tool calls that ran, their results) in the transcript; the
            # working context stays as it was, so /retry sends the prompt again.
            self.store.messages.finish_turn(self.session.id, prompt_seq, repair_orphans(run.partial), status="failed")
        return TurnOutcome("failed", error=describe_provider_error(failure))

    async def _run_agent(self, prompt: str, base: list[ModelMessage], view: TurnView, token: CancellationToken) -> _Run:
        run = _Run()
        with capture_run_messages() as captured:
            try:
                async with self.agent.run_stream_events(
                    prompt, message_history=base, deps=self.deps, cancellation_token=token
                ) as events:
                    run.result = await self._show_events(events, view)
            except RunCancelled as exc:
                run.cancelled = exc
            except Exception as exc:  # provider failures: one clear line, nothing lost
                run.failure = exc
        if run.result is None:
            run.partial = [m for m in captured[len(base) :] if m.parts]  # a failed stream leaves an empty response
        return run

    async def _show_events(self, events: AsyncIterator[Any], view: TurnView) -> Any:
        """Pass a run's events to the view; return the run's result."""
        tool_names: dict[str, str] = {}
        result = None
        async for event in events:
            self._flush_notices(view)
            if isinstance(event, AgentRunResultEvent):
                result = event.result
            else:
                _show_event(event, view, tool_names)
        return result

    def _on_governor_event(self, event: GovernorEvent) -> None:
        if event.kind == "compaction" and event.result is not None:
            self._compactions.append(event.result)
            self._notices.append(compaction_line(event.result))
        elif event.message:
            self._notices.append(event.message)

    def _flush_notices(self, view: TurnView) -> None:
        for message in self._notices:
            view.notice(message)
        self._notices.clear()

    def _finish(
        self,
        all_messages: list[ModelMessage],
        new: list[ModelMessage],
        prompt_seq: int | None,
        status: MessageStatus,
        usage: Any,
    ) -> None:
        """Save the turn, then make the run's history (with any compaction it made) the working context."""
        saved: list[int] = []
        turn_usage = run_usage(usage, new, model=self.resolved.label, role="chat")
        self.last_usage = turn_usage
        if self.store and self.session and prompt_seq is not None:
            saved = self.store.messages.finish_turn(
                self.session.id,
                prompt_seq,
                new,
                status=status,
                input_tokens=turn_usage.input_tokens,
                output_tokens=turn_usage.output_tokens,
                cost_usd=turn_usage.cost_usd or 0.0,
                usage=turn_usage,
            )
            self._save_summary_usage()
        context = self.context.extended(all_messages, saved)
        _, adopted = self.governor.adopt(all_messages)
        if adopted is not None:
            # Each compaction of the run is recorded; the last one (the cache) is what the context keeps.
            for result in self._compactions:
                self._record(result, context, trigger="auto", focus="")
                self._pin_found_instructions(result)
            context.apply(adopted)
        self._compactions.clear()
        self.context = context

    def _record(
        self, result: CompactionResult, context: WorkingContext, *, trigger: CompactionTrigger, focus: str
    ) -> None:
        """Save a compaction of ``context`` (a second transaction after the turn's: a crash between the two
        loses only the compaction, which the next request makes again)."""
        if not self.store or not self.session:
            return
        from co_cli.store import CompactionRecord

        span = context.span(result)
        record = CompactionRecord(
            from_seq=span.from_seq,
            upto_seq=span.upto_seq,
            summary=result.summary,
            focus=focus,
            trigger=trigger,
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            model=getattr(self.summary_model, "model_name", str(self.summary_model)),
            replacement=result.replacement,
            method=result.method,
            detail=result.detail or trigger,
            ledger=result.check,
            tiers=", ".join(result.tiers),
        )
        self.store.compactions.add(self.session.id, record)

    def _apply(self, result: CompactionResult, *, trigger: CompactionTrigger, focus: str) -> None:
        self._record(result, self.context, trigger=trigger, focus=focus)
        self._undo.append(WorkingContext(list(self.context.messages), list(self.context.seqs)))
        self.context.apply(result)

    def uncompact(self) -> int | None:
        """Restore the working context as it was before the latest compaction in force (the transcript is
        lossless, so this is exact); recorded, so a resumed session does the same. Returns how many
        messages the working context now holds, or None when there is no compaction to undo."""
        if self.store and self.session:
            if self.store.compactions.undo(self.session.id) is None:
                return None
            self.context = self._rebuild(self.session.id)
        elif self._undo:
            self.context = self._undo.pop()
        else:
            return None
        self.governor.discard()
        return len(self.context)

    # ----- pins ------------------------------------------------------------------------------------
    def _set_pins(self, pins: list[Pin], *, recount: bool = True) -> None:
        """Set the pins (``recount=False`` when the governor is about to be rebuilt anyway)."""
        self.pins = pins
        self.deps.pins = [pin.text for pin in pins]
        if recount and hasattr(self, "governor"):
            self.governor.pipeline.overhead_tokens = self.overhead_tokens()

    def pin(self, text: str, source: PinSource = "user") -> Pin | None:
        """Pin a standing instruction for the rest of the session (None when it is already pinned)."""
        text = " ".join(text.split())
        if not text or any(pin.text == text for pin in self.pins):
            return None
        if self.store and self.session:
            pin_id = self.store.pins.add(self.session.id, text, source)
        else:
            pin_id = -(len(self.pins) + 1)
        pin = Pin(pin_id, text, source)
        self._set_pins([*self.pins, pin])
        return pin

    def unpin(self, number: int) -> Pin:
        """Remove pin ``number`` (1-based, as /pins lists them)."""
        if not 1 <= number <= len(self.pins):
            raise CoError(f"no pin {number}: /pins lists {len(self.pins)}")
        pin = self.pins[number - 1]
        if self.store and self.session and pin.id > 0:
            self.store.pins.remove(self.session.id, pin.id)
        self._set_pins([p for p in self.pins if p is not pin])
        return pin

    def last_user_text(self) -> str | None:
        """What the user typed last (for /pin with no text)."""
        found = latest_request(self.context.messages)
        return found[1] if found else self.last_prompt

    async def _compact_harder(self, view: TurnView) -> bool:
        lean = drop_tool_outputs(self.context.messages)
        try:
            result = await compact_middle(
                lean,
                self.summary_model,
                max_history_messages=max(4, self.deps.settings.max_history_messages or 8),
                max_input_tokens=self.resolved.context_window // 2,
                must_fit=True,
                model_settings=request_time_limits(self.summary_model, self.deps.settings.request_timeout),
            )
        except Exception as exc:
            view.notice(f"Compaction failed: {describe_provider_error(exc)}")
            result = None
        if not isinstance(result, CompactionResult):
            if lean == self.context.messages:
                return False
            # Dropping the tool outputs is the compaction: record it, so a resumed session sends the same.
            result = CompactionResult(
                messages=lean,
                covered=len(lean),
                replacement=lean,
                head=0,
                summary="[tool outputs dropped to fit the context window]",
                tokens_before=estimate_history(self.context.messages).total,
                tokens_after=estimate_history(lean).total,
                used_fallback=True,
                error=None,
                n_replaced=len(lean),
                method="tools-dropped",
            )
        self._apply(replace(result, detail="overflow"), trigger="auto", focus="")
        return True

    # ----- context ---------------------------------------------------------------------------------
    async def preview_compaction(self, focus: str | None) -> CompactionResult:
        """A summary of the whole working context, not applied (``/compact preview``).

        Raises ``NothingToCompact`` when there is nothing (new) worth summarising."""
        if not self.context.messages:
            raise NothingToCompact("nothing to compact yet")
        result = await compact_all(
            self.context.messages,
            self.summary_model,
            focus=focus or None,
            max_input_tokens=self.resolved.context_window // 2,
            model_settings=request_time_limits(self.summary_model, self.deps.settings.request_timeout),
        )
        return replace(result, detail="manual")

    def apply_compaction(self, result: CompactionResult, focus: str | None) -> None:
        self._apply(result, trigger="manual", focus=focus or "")
        self._pin_found_instructions(result)
        self._save_summary_usage()
        self.governor.reset_failures()

    def _pin_found_instructions(self, result: CompactionResult) -> None:
        """Standing instructions a summary found (verbatim in the user's messages) hold from now on as pins,
        outside the history, so no later compaction can drop them."""
        for text in result.standing_instructions:
            self.pin(text, source="summary")

    async def compact(self, focus: str | None) -> CompactionResult:
        """Summarise the whole working context now (``/compact``); the history is unchanged on failure."""
        result = await self.preview_compaction(focus)
        self.apply_compaction(result, focus)
        return result

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
            check=f"{result.check}; edited by the user" if result.check else "edited by the user",
        )

    def current_summary(self) -> str | None:
        """The text of the summary (or digest, or marker) the working context starts from, if any."""
        for message in self.context.messages:
            if is_summary(message):
                return "\n".join(view.text for view in views(message) if view.kind == "user")
        return None

    def sendable(self) -> tuple[list[ModelMessage], TokenEstimate]:
        """What the next request would send (offloaded, trimmed, repaired) and its token estimate."""
        processed = self.governor.process(self.context.messages)
        return processed.sendable, processed.estimate

    def percent_used(self) -> float:
        """Context use in percent (cached until the working context changes: the toolbar asks on every key)."""
        messages = self.context.messages
        key = (id(messages), len(messages), self.resolved.context_window)
        if self._percent_cache is None or self._percent_cache[0] != key:
            percent = 100.0 * self.sendable()[1].total / max(1, self.resolved.context_window)
            self._percent_cache = (key, percent)
        return self._percent_cache[1]

    def report(self) -> ContextReport:
        transcript = 0
        compactions = 0
        if self.store and self.session:
            info = self.store.sessions.get(self.session.id)
            transcript, compactions = info.message_count, info.compaction_count
        return context_report(
            self.sendable()[0],
            context_window=self.resolved.context_window,
            window_source=self.resolved.window_source,
            threshold=self.deps.settings.compact_threshold,
            overhead_tokens=self.governor.overhead_tokens,
            transcript_count=transcript or len(self.context),
            compactions=compactions,
            offload_dir=self.deps.tool_output_dir,
            **memory_report_tokens(self.deps),
        )


def _show_event(event: AgentStreamEvent, view: TurnView, tool_names: dict[str, str]) -> None:
    if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
        if event.part.content:
            view.text(event.part.content)
    elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
        view.text(event.delta.content_delta)
    elif isinstance(event, FunctionToolCallEvent):
        tool_names[event.part.tool_call_id] = event.part.tool_name
        view.tool_call(event.part.tool_name, event.part.args)
    elif isinstance(event, FunctionToolResultEvent):
        part = event.part
        view.tool_result(getattr(part, "tool_name", None) or tool_names.get(part.tool_call_id, "?"), part.content)


def summarizer_model(settings: Settings, paths: Paths | None = None) -> Model | None:
    """The model that writes summaries: ``summarization_model`` if set, else None (the chat model).

    A 'provider:model' string is used as such even when base_url is set; a bare name goes to that server.
    """
    spec = settings.summarization_model.strip()
    if not spec:
        return None
    from co_cli.models import build_model, choose_model

    if ":" in spec or spec in ("local", "test"):
        settings = settings.model_copy(update={"base_url": ""})
    settings = settings.model_copy(update={"model": spec})
    return build_model(choose_model(settings, "summarization_model setting"), settings, paths)


@functools.cache
def tool_defs_tokens() -> int:
    """Tokens the chat agent's tool schemas add to every request (they never change in a process)."""
    return estimate_overhead("", build_agent_tool_defs())


def build_agent_tool_defs() -> list[Any]:
    """Tool definitions of the chat agent (for counting their tokens)."""
    from co_cli.memory.tools import memory_function_toolset
    from co_cli.tools import build_toolset
    from co_cli.tools.history import build_history_toolset

    defs = []
    for toolset in (build_toolset(), build_history_toolset(), memory_function_toolset()):
        for tool in toolset.tools.values():
            defs.append(tool.tool_def)
    return defs


def _open_turn(message: ModelMessage) -> bool:
    """A request waiting for an answer (its turn never finished)."""
    return isinstance(message, ModelRequest)


def _cut_off(new: list[ModelMessage], model: Model) -> bool:
    """The run's last answer was streamed but never finished: a chat-completions server closed the stream
    without a finish reason (it sends one with every complete answer; pydantic-ai then reports "stop" anyway,
    so the server's own word in ``provider_details`` is what tells)."""
    last = new[-1] if new else None
    return (
        type(model).__name__ == "OpenAIChatModel"
        and isinstance(last, ModelResponse)
        and "finish_reason" not in (last.provider_details or {})
    )


def close_cancelled(new: list[ModelMessage], prompt: str) -> list[ModelMessage]:
    """Close a cancelled turn: the partial answer is kept and marked, so the history stays well-formed."""
    new = repair_orphans(list(new)) if new else []
    if not new:
        new = [ModelRequest(parts=[UserPromptPart(prompt)])]
    last = new[-1]
    if isinstance(last, ModelResponse):
        new[-1] = close_interrupted(last)
    else:
        new.append(interrupted_response())
    return new


def close_cut_off(new: list[ModelMessage]) -> list[ModelMessage]:
    """Mark a run whose last answer was cut off by the connection: the text is kept, with a note."""
    last = new[-1]
    assert isinstance(last, ModelResponse)
    return [*new[:-1], close_interrupted(last, CUT_OFF_NOTE)]
