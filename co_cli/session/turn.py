"""One turn: the prompt saved, the agent run streamed to a view, the turn closed however it ended (answered,
cancelled, cut off, failed) and saved with everything it brought, the working context moved on.

No terminal I/O here: the caller passes a ``TurnView`` that receives what happens during the turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

from pydantic_ai import CancellationToken, RunContext, capture_run_messages
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

from co_cli.context.compact import CompactionResult, compaction_line
from co_cli.context.governor import GovernorEvent
from co_cli.context.offload import bound_for_transcript
from co_cli.context.repair import repair_orphans
from co_cli.deps import PinSource, SessionState, Task
from co_cli.failure_text import describe_provider_error, is_context_overflow
from co_cli.message_view import kinds
from co_cli.session.background import Background
from co_cli.session.compaction import Compactions
from co_cli.session.engine import Engine
from co_cli.session.metering import run_usage
from co_cli.session.pins import Pins
from co_cli.session.recorder import Recorder, TurnRecord
from co_cli.session.tool_stats import tool_calls_of
from co_cli.store import CompactionRecord
from co_cli.store.redact import as_saved
from co_cli.store.turn_memories import SentMemory
from co_cli.synthetic import CUT_OFF_NOTE, LENGTH_NOTE, close_interrupted, interrupted_response, with_failure
from co_cli.tools.blocking import off_loop
from co_cli.vocabulary import COMPACTING, WAITING_FOR_MODEL, MessageStatus

T = TypeVar("T")

TurnStatus = Literal["ok", "cancelled", "cut-off", "failed"]
"""ok: answered; cancelled: the user stopped it; cut-off: the stream ended before the answer was complete;
failed: the provider or the network failed (the prompt is kept for /retry)."""


class TurnView(Protocol):
    """What the terminal shows during a turn."""

    def working(self, what: str) -> None:
        """co waits for ``what`` ("waiting for the model", "compacting the conversation"): a live view says so."""

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


class Turns:
    def __init__(
        self,
        state: SessionState,
        engine: Engine,
        recorder: Recorder,
        compactions: Compactions,
        pins: Pins,
        background: Background,
    ) -> None:
        self.state = state
        self.engine = engine
        self.recorder = recorder
        self.compactions = compactions
        self.pins = pins
        self.background = background
        self._notices: list[str] = []
        self._view: TurnView | None = None
        """The view of the running turn (the governor's events say what co waits for)."""
        self._made: list[CompactionResult] = []
        """Compactions the governor made during the running turn."""
        self._tasks_before: list[Task] = []
        """The task list when the running turn started."""
        self._words = ""
        """The user's own words in the running turn's prompt (without the files and output it carries)."""

    async def run(
        self, prompt: str, view: TurnView, token: CancellationToken, instructions: str = "", words: str | None = None
    ) -> TurnOutcome:
        """Run one turn. ``instructions`` are added to co's own for this turn only (an API client's system
        message); they are not saved. ``words`` are the user's own in ``prompt`` (which may carry files and
        command output besides): what titles the session and what memory extraction reads."""
        # Text that is not valid UTF-8 (e.g. stray bytes from a pipe) is sent and saved with U+FFFD instead.
        prompt = prompt.encode("utf-8", "replace").decode("utf-8")
        own = words.encode("utf-8", "replace").decode("utf-8") if words is not None else None
        self._words = own if own is not None else prompt
        self.state.last_prompt = prompt
        await self.background.pause_extraction()
        prompt_seq = await off_loop(lambda: self.recorder.begin(prompt, own))
        self.state.turn_seq = prompt_seq
        outcome = await self._turn(prompt, view, token, prompt_seq, retry_on_overflow=True, instructions=instructions)
        self.background.start_extraction()  # what the turn queued, or what it paused
        if outcome.status == "ok" and prompt_seq == 0:
            self.background.start_title(self._words, outcome.output)
        return outcome

    async def _turn(
        self,
        prompt: str,
        view: TurnView,
        token: CancellationToken,
        prompt_seq: int,
        *,
        retry_on_overflow: bool,
        instructions: str = "",
    ) -> TurnOutcome:
        base = list(self.state.context.messages)
        self._view = view
        self._notices.clear()
        self._made.clear()
        self._tasks_before = list(self.state.tasks)
        self.state.tool_seconds.clear()
        self.state.memory_sent.clear()
        run = await self._run_agent(prompt, base, view, token, instructions)
        self._flush_notices(view)
        cut_off = _cut_off(run.result.new_messages(), self.engine.resolved.model) if run.result is not None else None
        view.end(interrupted=run.cancelled is not None or cut_off == "connection")
        if run.cancelled is not None:
            new = close_cancelled(run.cancelled.new_messages(), prompt)
            await self._finish(prompt, base + new, new, prompt_seq, "cancelled", run.cancelled.usage, view)
            return TurnOutcome("cancelled")
        if run.result is not None and cut_off == "connection":
            new = close_cut_off(run.result.new_messages(), CUT_OFF_NOTE)
            await self._finish(prompt, base + new, new, prompt_seq, "cancelled", run.result.usage, view)
            view.notice("The connection closed before the answer was complete; what arrived is kept.")
            return TurnOutcome("cut-off", output=run.result.output, error="the answer was cut off")
        if run.result is not None:
            result = run.result
            new, all_messages = result.new_messages(), result.all_messages()
            if cut_off == "length":
                # The model's own answer, stopped by the output limit the user set: kept as answered, marked.
                new = close_cut_off(new, LENGTH_NOTE)
                all_messages = [*all_messages[:-1], new[-1]]
            await self._finish(prompt, all_messages, new, prompt_seq, "ok", result.usage, view)
            if cut_off == "length":
                view.notice("The answer reached the model's output limit and stops there.")
            return TurnOutcome("ok", output=result.output)
        failure = run.failure or RuntimeError("the run ended without a result")
        self.engine.governor.discard()  # a compaction made during the failed run is not adopted
        tools_ran = any("tool-return" in kinds(m) for m in run.partial)
        # Retrying re-runs the turn: only when no tool has run yet (a command must not run twice).
        if retry_on_overflow and is_context_overflow(failure) and not tools_ran:
            view.notice("The provider says the context is too long: compacting harder and retrying once.")
            if await self.compactions.compact_harder(view.notice):
                return await self._turn(
                    prompt, view, token, prompt_seq, retry_on_overflow=False, instructions=instructions
                )
        # Keep what the failed run did (tool calls that ran, their results) in the transcript; the working
        # context stays as it was, so /retry sends the prompt again.
        partial = repair_orphans(run.partial)
        error = describe_provider_error(failure)
        failed = TurnRecord(
            prompt_seq,
            with_failure(self._as_stored(partial), prompt, error),
            "failed",
            tasks=self._changed_tasks(),
            tool_calls=tool_calls_of(partial, self.state.tool_seconds),
            memories=self._memories_sent(),
        )
        await off_loop(lambda: self.recorder.finish(failed))
        return TurnOutcome("failed", error=error)

    async def _run_agent(
        self, prompt: str, base: list[ModelMessage], view: TurnView, token: CancellationToken, instructions: str = ""
    ) -> _Run:
        run = _Run()
        tool_names: dict[str, str] = {}

        async def show(_ctx: RunContext[Any], events: AsyncIterable[AgentStreamEvent]) -> None:
            # Called inside the run, in this task: each event reaches the view without a hop through
            # another task (``run_stream_events`` hands every event over a zero-buffer stream).
            async for event in events:
                self._flush_notices(view)
                _show_event(event, view, tool_names)

        with capture_run_messages() as captured:
            try:
                run.result = await self.engine.agent.run(
                    prompt,
                    message_history=base,
                    deps=self.engine.deps,
                    cancellation_token=token,
                    instructions=instructions or None,
                    event_stream_handler=show,
                )
            except RunCancelled as exc:
                run.cancelled = exc
            except Exception as exc:  # provider failures: one clear line, nothing lost
                run.failure = exc
        if run.result is None:
            run.partial = [m for m in captured[len(base) :] if m.parts]  # a failed stream leaves an empty response
        return run

    def on_governor_event(self, event: GovernorEvent) -> None:
        if event.kind == "compacting":
            if self._view is not None:
                self._view.working(COMPACTING)
            return
        if self._view is not None:
            self._view.working(WAITING_FOR_MODEL)
        if event.kind == "compaction" and event.result is not None:
            self._made.append(event.result)
            self._notices.append(compaction_line(event.result))
        elif event.message:
            self._notices.append(event.message)

    def _flush_notices(self, view: TurnView) -> None:
        if self.engine.mcp is not None:
            self._notices.extend(self.engine.mcp.take_notices())  # an MCP server failed or died
        for message in self._notices:
            view.notice(message)
        self._notices.clear()

    async def _finish(
        self,
        prompt: str,
        all_messages: list[ModelMessage],
        new: list[ModelMessage],
        prompt_seq: int,
        status: MessageStatus,
        usage: Any,
        view: TurnView,
    ) -> None:
        """Save the turn with everything it brought (one record), then make the run's history (with any
        compaction it made) the working context; the pins a compaction found are shown."""
        turn_usage = run_usage(usage, new, model=self.engine.resolved.label, role="chat")
        self.state.last_usage = turn_usage
        seqs = self.recorder.seqs_for(prompt_seq, new)
        context = self.state.context.extended(all_messages, seqs)
        _, adopted = self.engine.governor.adopt(all_messages)
        records: list[CompactionRecord] = []
        found: list[tuple[str, PinSource]] = []
        if adopted is not None:
            # Each compaction of the run is recorded; the last one (the cache) is what the context keeps.
            records = [self.compactions.record(r, context, trigger="auto", focus="") for r in self._made]
            found = self.pins.new_ones([text for r in self._made for text in r.standing_instructions], "summary")
        self._made.clear()
        spent = [u for u in (self.engine.drain_summary_usage(), self.engine.drain_memory_usage()) if u is not None]
        stored = self._as_stored(new)
        record = TurnRecord(
            prompt_seq,
            stored,
            status,
            usage=[turn_usage, *spent],
            compactions=records,
            pins=found,
            tasks=self._changed_tasks(),
            tool_calls=tool_calls_of(new, self.state.tool_seconds),
            memories=self._memories_sent(),
            extraction=self.background.extraction(self._words) if status == "ok" else None,
        )
        written = await off_loop(lambda: self.recorder.finish(record))
        if written.seqs != seqs:  # not expected: the lock keeps other writers out, and a takeover refuses the commit
            context = self.state.context.extended(all_messages, written.seqs)
        offered = self.pins.adopt(found, written.pin_ids)
        if offered:
            view.notice(self.pins.offered_notice(offered))
        # The run's messages (the context's last ones) as saved: a huge output as its preview.
        context.messages = [*context.messages[: len(context.messages) - len(new)], *stored]
        if adopted is not None:
            context.apply(adopted)
        # As saved (instructions left out: every request gets the current ones), so the live context is the
        # one a resume rebuilds.
        context.messages = as_saved(context.messages)
        self.state.context = context

    def _as_stored(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """The run's messages as the transcript keeps them: a tool output past the offload threshold as the
        preview the model is sent, the whole output in the session's private file it names."""
        threshold = self.engine.governor.config.offload_threshold
        return bound_for_transcript(messages, threshold, self.engine.deps.tool_output_dir)

    def _memories_sent(self) -> list[SentMemory]:
        """The memories the running turn's requests were sent, as saved with it."""
        return [SentMemory(m.id, m.kind, m.text) for m in self.state.memory_sent.values()]

    def _changed_tasks(self) -> list[Task] | None:
        """The task list when the turn changed it (the model's set_tasks), else None; the instructions every
        request carries are counted again when it did."""
        if self.state.tasks == self._tasks_before:
            return None
        self.engine.recount()
        return list(self.state.tasks)


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


CutOff = Literal["connection", "length"]


def _cut_off(new: list[ModelMessage], model: Model) -> CutOff | None:
    """Why the run's last answer is incomplete, if it is: it hit the model's output limit (the provider's
    finish reason says "length"), or a chat-completions server closed the stream without a finish reason (it
    sends one with every complete answer; pydantic-ai then reports "stop" anyway, so the server's own word in
    ``provider_details`` is what tells)."""
    last = new[-1] if new else None
    if not isinstance(last, ModelResponse):
        return None
    if last.finish_reason == "length":
        return "length"
    if type(model).__name__ == "OpenAIChatModel" and "finish_reason" not in (last.provider_details or {}):
        return "connection"
    return None


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


def close_cut_off(new: list[ModelMessage], note: str = CUT_OFF_NOTE) -> list[ModelMessage]:
    """Mark a run whose last answer was cut off: the text is kept, with the note saying why."""
    last = new[-1]
    assert isinstance(last, ModelResponse)
    return [*new[:-1], close_interrupted(last, note)]
