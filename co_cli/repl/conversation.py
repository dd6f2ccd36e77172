"""One conversation: the working context, its saved transcript and the runs of the agent over it.

No terminal I/O here: the caller passes a ``TurnView`` that receives what happens during a turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from pydantic_ai import Agent, CancellationToken, capture_run_messages
from pydantic_ai.capabilities import HandleDeferredToolCalls
from pydantic_ai.exceptions import RunCancelled
from pydantic_ai.messages import (
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.run import AgentRunResultEvent

from co_cli.agent import build_agent, instructions_text
from co_cli.config import Settings
from co_cli.context.compact import CompactionResult, compact_all, compact_middle, drop_tool_outputs
from co_cli.context.governor import ContextGovernor, GovernorEvent
from co_cli.context.repair import repair_orphans
from co_cli.context.report import ContextReport, context_report
from co_cli.context.tokens import TokenEstimate, estimate_history, estimate_overhead
from co_cli.context.window import is_summary_message, is_user_turn_start
from co_cli.deps import CoDeps
from co_cli.errors import CoError
from co_cli.models import ResolvedModel
from co_cli.provider_errors import describe_provider_error, is_context_overflow
from co_cli.tools.approval import ApprovalPrompt, make_approval_handler

if TYPE_CHECKING:
    from co_cli.store.sessions import CompactionRecord, SessionInfo, SessionStore

INTERRUPTED_NOTE = "[interrupted by the user]"


class TurnView(Protocol):
    """What the terminal shows during a turn."""

    def text(self, delta: str) -> None: ...
    def tool_call(self, name: str, args: Any) -> None: ...
    def tool_result(self, name: str, content: Any) -> None: ...
    def notice(self, message: str) -> None: ...
    def end(self, interrupted: bool = False) -> None: ...


@dataclass
class TurnOutcome:
    status: str  # "ok" | "cancelled" | "failed"
    output: str = ""
    error: str | None = None


@dataclass
class Conversation:
    resolved: ResolvedModel
    deps: CoDeps
    store: SessionStore | None
    ask_approval: ApprovalPrompt | None = None
    approve_all: bool = False
    working: list[ModelMessage] = field(default_factory=list)
    # Transcript seq of each working message (None for summaries and other synthetic messages).
    seqs: list[int | None] = field(default_factory=list)
    session: SessionInfo | None = None
    last_prompt: str | None = None
    _notices: list[str] = field(default_factory=list)
    _compactions: list[CompactionResult] = field(default_factory=list)
    _percent_cache: tuple[tuple[int, int, int], float] | None = None

    def __post_init__(self) -> None:
        self._build()

    # ----- model and agent -------------------------------------------------------------------------
    def _build(self) -> None:
        settings = self.deps.settings
        self.summarizer = summarizer_model(settings)
        self.governor = ContextGovernor(
            settings=settings,
            context_window=self.resolved.context_window,
            summarizer=self.summarizer,
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
        return estimate_overhead(instructions_text(self.deps), build_agent_tool_defs())

    def switch_model(self, resolved: ResolvedModel) -> None:
        self.resolved = resolved
        self._build()
        if self.store and self.session:
            self.store.set_model(self.session.id, resolved.label)

    @property
    def summary_model(self) -> Any:
        return self.summarizer or self.resolved.model

    # ----- sessions --------------------------------------------------------------------------------
    @property
    def session_id(self) -> str | None:
        return self.session.id if self.session else None

    def new(self) -> None:
        self.release()
        self.session = None
        self.deps.session_id = None
        self.working, self.seqs = [], []
        self.deps.approved_commands.clear()
        self._build()

    def load(self, session: SessionInfo) -> None:
        """Continue a saved session: rebuild its working context exactly as the live session had it."""
        assert self.store is not None
        self.store.acquire(session.id)
        self.release()
        self.session = session
        self.deps.session_id = session.id
        self.deps.approved_commands.clear()  # "always" was said for the other session
        latest = self.store.latest_compaction(session.id)
        after = latest.upto_seq if latest else -1
        stored = [m for m in self.store.transcript(session.id, after_seq=after) if m.status != "failed"]
        working = list(latest.replacement) if latest else []
        seqs: list[int | None] = [None] * len(working)
        for m in stored:
            # A turn cut off by a crash left its prompt unanswered: close it as interrupted.
            if is_user_turn_start(m.message) and working and _open_turn(working[-1]):
                working.append(ModelResponse(parts=[TextPart(INTERRUPTED_NOTE)]))
                seqs.append(None)
            working.append(m.message)
            seqs.append(m.seq)
        if working and _open_turn(working[-1]):
            working.append(ModelResponse(parts=[TextPart(INTERRUPTED_NOTE)]))
            seqs.append(None)
        self.working, self.seqs = working, seqs
        self._build()

    def fork(self) -> SessionInfo | None:
        """Continue in a copy of the current session; the original stays as it is."""
        if not self.store or not self.session:
            return None
        forked = self.store.fork(self.session.id)
        self.load(forked)
        return forked

    def release(self) -> None:
        if self.store and self.session:
            self.store.release(self.session.id)

    def _ensure_session(self, prompt: str) -> None:
        if self.store is None or self.session is not None:
            return
        self.session = self.store.create_session(model=self.resolved.label, cwd=str(self.deps.cwd), title=prompt)
        self.store.acquire(self.session.id)
        self.deps.session_id = self.session.id

    # ----- turns -----------------------------------------------------------------------------------
    async def run_turn(self, prompt: str, view: TurnView, token: CancellationToken) -> TurnOutcome:
        # Text that is not valid UTF-8 (e.g. stray bytes from a pipe) is sent and saved with U+FFFD instead.
        prompt = prompt.encode("utf-8", "replace").decode("utf-8")
        self.last_prompt = prompt
        self._ensure_session(prompt)
        prompt_seq = self.store.begin_turn(self.session.id, prompt) if self.store and self.session else None
        outcome = await self._run(prompt, view, token, prompt_seq, retry_on_overflow=True)
        return outcome

    async def _run(
        self,
        prompt: str,
        view: TurnView,
        token: CancellationToken,
        prompt_seq: int | None,
        *,
        retry_on_overflow: bool,
    ) -> TurnOutcome:
        base = list(self.working)
        self._notices.clear()
        self._compactions.clear()
        tool_names: dict[str, str] = {}
        run_result: Any = None
        failure: Exception | None = None
        cancelled: RunCancelled | None = None
        with capture_run_messages() as captured:
            try:
                async with self.agent.run_stream_events(
                    prompt, message_history=base, deps=self.deps, cancellation_token=token
                ) as events:
                    async for event in events:
                        self._flush_notices(view)
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
                            view.tool_result(part.tool_name or tool_names.get(part.tool_call_id, "?"), part.content)
                        elif isinstance(event, AgentRunResultEvent):
                            run_result = event.result
            except RunCancelled as exc:
                cancelled = exc
            except Exception as exc:  # provider failures: one clear line, nothing lost
                failure = exc
        self._flush_notices(view)
        view.end(interrupted=cancelled is not None)
        if cancelled is not None:
            new = mark_interrupted(cancelled.new_messages(), prompt)
            self._finish(base, base + new, new, prompt_seq, "cancelled", cancelled.usage)
            return TurnOutcome("cancelled")
        if failure is None and run_result is not None:
            self._finish(base, run_result.all_messages(), run_result.new_messages(), prompt_seq, "ok", run_result.usage)
            return TurnOutcome("ok", output=run_result.output)
        failure = failure or RuntimeError("the run ended without a result")
        self.governor.discard()  # a compaction made during the failed run is not adopted
        partial = list(captured[len(base) :]) if len(captured) > len(base) else []
        tools_ran = any(isinstance(part, ToolReturnPart) for m in partial for part in m.parts)
        # Retrying re-runs the turn: only when no tool has run yet (a command must not run twice).
        if retry_on_overflow and is_context_overflow(failure) and not tools_ran:
            view.notice("The provider says the context is too long: compacting harder and retrying once.")
            if await self._compact_harder(view):
                return await self._run(prompt, view, token, prompt_seq, retry_on_overflow=False)
        if self.store and self.session and prompt_seq is not None:
            # Keep what the failed run did (tool calls that ran, their results) in the transcript; the
            # working context stays as it was, so /retry sends the prompt again.
            self.store.finish_turn(self.session.id, prompt_seq, repair_orphans(partial), status="failed")
        return TurnOutcome("failed", error=describe_provider_error(failure))

    def _on_governor_event(self, event: GovernorEvent) -> None:
        if event.kind == "compaction" and event.result is not None:
            r = event.result
            how = "static marker" if r.used_fallback else "summary"
            self._compactions.append(r)
            self._notices.append(
                f"Context compacted ({how}): {r.n_replaced} messages, ~{r.tokens_before} -> ~{r.tokens_after} tokens"
            )
        elif event.message:
            self._notices.append(event.message)

    def _flush_notices(self, view: TurnView) -> None:
        for message in self._notices:
            view.notice(message)
        self._notices.clear()

    def _finish(
        self,
        base: list[ModelMessage],
        all_messages: list[ModelMessage],
        new: list[ModelMessage],
        prompt_seq: int | None,
        status: str,
        usage: Any,
    ) -> None:
        new_seqs: list[int | None] = [None] * len(new)
        if self.store and self.session and prompt_seq is not None:
            in_tokens = getattr(usage, "input_tokens", 0) or 0
            out_tokens = getattr(usage, "output_tokens", 0) or 0
            saved = self.store.finish_turn(
                self.session.id,
                prompt_seq,
                new,
                status=status,
                input_tokens=in_tokens,
                output_tokens=out_tokens,
                cost_usd=turn_cost(new),
            )
            new_seqs = list(saved) + [None] * (len(new) - len(saved))
        all_seqs = self.seqs[: len(base)] + new_seqs
        working, compaction = self.governor.adopt(all_messages)
        if compaction is not None:
            self.seqs = [None] * len(compaction.replacement) + all_seqs[compaction.covered :]
            for result in self._compactions:
                self._record(result, all_seqs, trigger="auto", focus="")
        else:
            self.seqs = all_seqs
        self._compactions.clear()
        self.working = working
        if len(self.seqs) != len(self.working):  # defensive: keep the two lists aligned
            self.seqs = (self.seqs + [None] * len(self.working))[: len(self.working)]

    def _record(self, result: CompactionResult, seqs: list[int | None], *, trigger: str, focus: str) -> None:
        if not self.store or not self.session:
            return
        from co_cli.store.sessions import CompactionRecord

        head = len(result.replacement) - 1
        known = [s for s in seqs[: result.covered] if s is not None]
        upto = known[-1] if known else -1
        middle = [s for s in seqs[head : result.covered] if s is not None]
        record: CompactionRecord = CompactionRecord(
            from_seq=middle[0] if middle else upto,
            upto_seq=upto,
            summary=result.summary,
            focus=focus,
            trigger=trigger,
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            model=getattr(self.summary_model, "model_name", str(self.summary_model)),
            replacement=result.replacement,
        )
        self.store.add_compaction(self.session.id, record)

    async def _compact_harder(self, view: TurnView) -> bool:
        lean = drop_tool_outputs(self.working)
        try:
            result = await compact_middle(
                lean,
                self.summary_model,
                max_history_messages=max(4, self.deps.settings.max_history_messages or 8),
                max_input_tokens=self.resolved.context_window // 2,
            )
        except Exception as exc:
            view.notice(f"Compaction failed: {describe_provider_error(exc)}")
            result = None
        if result is None:
            if lean == self.working:
                return False
            # Dropping the tool outputs is the compaction: record it, so a resumed session sends the same.
            before = estimate_history(self.working).total
            result = CompactionResult(
                messages=lean,
                covered=len(self.working),
                replacement=lean,
                summary="[tool outputs dropped to fit the context window]",
                tokens_before=before,
                tokens_after=estimate_history(lean).total,
                used_fallback=True,
                error=None,
                n_replaced=len(self.working),
            )
        self._record(result, self.seqs, trigger="auto", focus="")
        self.seqs = [None] * len(result.replacement) + self.seqs[result.covered :]
        self.working = result.messages
        return True

    # ----- context ---------------------------------------------------------------------------------
    async def compact(self, focus: str | None) -> CompactionResult:
        """Summarise the whole working context now (``/compact``); the history is unchanged on failure."""
        if not self.working:
            raise CoError("nothing to compact yet")
        if all(is_summary_message(m) or isinstance(m, ModelResponse) for m in self.working) and any(
            is_summary_message(m) for m in self.working
        ):
            raise CoError("nothing new to compact since the last summary")
        result = await compact_all(
            self.working,
            self.summary_model,
            focus=focus or None,
            max_input_tokens=self.resolved.context_window // 2,
        )
        self._record(result, self.seqs, trigger="manual", focus=focus or "")
        self.seqs = [None] * len(result.replacement) + self.seqs[result.covered :]
        self.working = result.messages
        self.governor.reset_failures()
        return result

    def sendable(self) -> tuple[list[ModelMessage], TokenEstimate]:
        """What the next request would send (offloaded, trimmed, repaired) and its token estimate."""
        _, _, sendable, estimate = self.governor.process(self.working)
        return sendable, estimate

    def percent_used(self) -> float:
        """Context use in percent (cached until the working context changes: the toolbar asks on every key)."""
        key = (id(self.working), len(self.working), self.resolved.context_window)
        if self._percent_cache is None or self._percent_cache[0] != key:
            percent = 100.0 * self.sendable()[1].total / max(1, self.resolved.context_window)
            self._percent_cache = (key, percent)
        return self._percent_cache[1]

    def report(self) -> ContextReport:
        transcript = 0
        compactions = 0
        if self.store and self.session:
            info = self.store.get(self.session.id)
            transcript, compactions = info.message_count, info.compaction_count
        return context_report(
            self.sendable()[0],
            context_window=self.resolved.context_window,
            window_source=self.resolved.window_source,
            threshold=self.deps.settings.compact_threshold,
            overhead_tokens=self.governor.overhead_tokens,
            transcript_count=transcript or len(self.working),
            compactions=compactions,
            offload_dir=self.deps.tool_output_dir,
        )


def summarizer_model(settings: Settings) -> Model | None:
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
    return build_model(choose_model(settings, "summarization_model setting"), settings)


def build_agent_tool_defs() -> list[Any]:
    """Tool definitions of the chat agent (for counting their tokens)."""
    from co_cli.tools import build_toolset
    from co_cli.tools.history import build_history_toolset

    defs = []
    for toolset in (build_toolset(), build_history_toolset()):
        for tool in toolset.tools.values():
            defs.append(tool.tool_def)
    return defs


def _open_turn(message: ModelMessage) -> bool:
    """A request waiting for an answer (its turn never finished)."""
    return isinstance(message, ModelRequest)


def mark_interrupted(new: list[ModelMessage], prompt: str) -> list[ModelMessage]:
    """Close a cancelled turn: the partial answer is kept and marked, so the history stays well-formed."""
    new = repair_orphans(list(new)) if new else []
    if not new:
        new = [ModelRequest(parts=[UserPromptPart(prompt)])]
    last = new[-1]
    if isinstance(last, ModelResponse):
        new[-1] = replace(last, parts=[*last.parts, TextPart(f"\n\n{INTERRUPTED_NOTE}")])
    else:
        new.append(ModelResponse(parts=[TextPart(INTERRUPTED_NOTE)]))
    return new


def turn_cost(messages: list[ModelMessage]) -> float:
    total = 0.0
    for message in messages:
        if isinstance(message, ModelResponse):
            try:
                total += float(message.cost().total_price)
            except Exception:  # unknown model or provider: no price
                continue
    return total
