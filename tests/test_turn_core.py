"""Whole turns through the turn core (``co_cli.session.Conversation``), in process, with FunctionModel.

Each test drives the same path the REPL, ``-p`` and piped mode use: a prompt in, events to a view, the turn
saved to a real SQLite store, the working context updated.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import CancellationToken
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from co_cli.config import load_settings
from co_cli.message_view import answer_text, user_text
from co_cli.models import ModelChoice, ResolvedModel
from co_cli.session import Conversation
from co_cli.store import Store
from co_cli.synthetic import INTERRUPTED_NOTE, is_summary, synthetic_kind
from co_cli.tools.approval import ApprovalRequest
from tests.support.summariser import scripted_summariser
from tests.support.turn_core import (
    Core,
    RecordingView,
    core,
    dumped,
    echo,
    long_echo,
    run,
    streaming_model,
    summarizer,
)

__all__ = ["core"]

pytestmark = pytest.mark.allow_model_requests


def stored(core: Core, conv: Conversation) -> list[tuple[int, str, str, str]]:
    assert conv.session is not None
    return [(m.seq, m.kind, m.status, m.text) for m in core.store.messages.transcript(conv.session.id)]


def test_a_normal_turn_streams_saves_and_extends_the_working_context(core: Core) -> None:
    conv = core.conversation(streaming_model(echo))
    view = RecordingView()
    outcome = run(conv, "hello there", view)
    assert outcome.status == "ok" and outcome.output == "echo: hello there"
    assert "".join(view.texts) == "echo: hello there" and view.ends == [False]
    assert stored(core, conv) == [(0, "user", "ok", "hello there"), (1, "assistant", "ok", "echo: hello there")]
    assert conv.context.seqs == [0, 1] and len(conv.working) == 2


def test_a_tool_turn_asks_for_approval_and_keeps_the_tool_exchange(core: Core) -> None:
    asked: list[ApprovalRequest] = []

    async def ask(request: ApprovalRequest) -> str:
        asked.append(request)
        return "y"

    def step(messages: list[ModelMessage]) -> str | tuple[str, dict[str, Any]]:
        if len(messages) == 1:
            return ("run_shell", {"command": "echo approved-output"})
        return "done"

    conv = core.conversation(streaming_model(step), ask=ask)
    view = RecordingView()
    outcome = run(conv, "run it", view)
    assert outcome.status == "ok"
    assert [r.command for r in asked] == ["echo approved-output"]
    assert view.tools[0][0] == "run_shell" and "approved-output" in str(view.results[0][1])
    kinds = [kind for _, kind, _, _ in stored(core, conv)]
    assert kinds == ["user", "tool-call", "tool-return", "assistant"]
    assert conv.context.seqs == [0, 1, 2, 3]


def test_a_cancelled_turn_keeps_the_partial_answer_marked(core: Core) -> None:
    token = CancellationToken()

    async def slow(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        yield "partial answer"
        await asyncio.sleep(30)
        yield " never"

    conv = core.conversation(FunctionModel(stream_function=slow, model_name="slow"))
    view = RecordingView(on_text=lambda _: token.cancel())
    outcome = run(conv, "tell me", view, token)
    assert outcome.status == "cancelled"
    assert view.ends == [True]
    last = conv.working[-1]
    assert isinstance(last, ModelResponse) and synthetic_kind(last) == "interrupted"
    assert answer_text(last).startswith("partial answer") and answer_text(last).endswith(INTERRUPTED_NOTE)
    assert [status for _, _, status, _ in stored(core, conv)] == ["cancelled", "cancelled"]


def test_a_failed_turn_keeps_the_prompt_for_retry_and_the_context_unchanged(core: Core) -> None:
    failing = {"on": True}

    def step(messages: list[ModelMessage]) -> str:
        if failing["on"]:
            raise ModelHTTPError(503, "scripted", body="overloaded")
        return echo(messages)

    conv = core.conversation(streaming_model(step))
    outcome = run(conv, "try this")
    assert outcome.status == "failed" and outcome.error and "\n" not in outcome.error
    assert conv.working == [] and conv.last_prompt == "try this"
    assert stored(core, conv) == [(0, "user", "failed", "try this")]
    failing["on"] = False
    again = run(conv, conv.last_prompt)
    assert again.status == "ok"
    assert [user_text(m) for m in conv.working if isinstance(m, ModelRequest)] == ["try this"]


def test_a_compaction_during_a_turn_is_recorded_and_adopted(core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CO_CLI_MAX_HISTORY_MESSAGES", "6")
    monkeypatch.setenv("CO_CLI_COMPACT_MIN_SPAN_TOKENS", "0")
    core.loaded = load_settings(cwd=core.cwd)
    conv = core.conversation(streaming_model(long_echo), summarizer=summarizer())
    views = [RecordingView() for _ in range(6)]
    for i, view in enumerate(views):
        assert run(conv, f"hello number {i} " + "with padding words " * 10, view).status == "ok"
    assert any(n.startswith("Compacted (summary, auto past 6 messages)") for v in views for n in v.notices)
    assert conv.session is not None
    records = core.store.compactions.list(conv.session.id)
    assert records and all(r.trigger == "auto" for r in records)
    summaries = [m for m in conv.working if is_summary(m)]
    assert len(summaries) == 1
    # The head (first exchange, seqs 0-1) is kept; the first summarised message is the second prompt.
    assert records[0].from_seq == 2
    assert conv.context.seqs[:2] == [None, None] and conv.context.seqs[-1] is not None


def test_an_automatic_compaction_pins_the_rules_the_summariser_named_and_the_user_wrote(
    core: Core, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The summariser's typed answer names a rule (a fragment of the user's sentence) and one the user never
    wrote: the user's whole sentence is pinned and said so, the invented one dropped and counted."""
    monkeypatch.setenv("CO_CLI_MAX_HISTORY_MESSAGES", "6")
    monkeypatch.setenv("CO_CLI_COMPACT_MIN_SPAN_TOKENS", "0")
    core.loaded = load_settings(cwd=core.cwd)
    rules = ["antworte bitte immer auf Deutsch", "Always use tabs."]
    conv = core.conversation(streaming_model(long_echo), summarizer=summarizer(standing_instructions=rules))
    views = [RecordingView() for _ in range(6)]
    run(conv, "hello first " + "with padding words " * 10, views[0])
    run(conv, "Ab jetzt antworte bitte immer auf Deutsch. Padding " + "with padding words " * 10, views[1])
    for i, view in enumerate(views[2:], start=2):
        run(conv, f"hello number {i} " + "with padding words " * 10, view)
    notices = [n for v in views for n in v.notices if n.startswith("Pinned")]
    assert notices == [
        "Pinned a standing instruction you stated (every request carries it; /unpin undoes this):\n"
        "  #1 Ab jetzt antworte bitte immer auf Deutsch."
    ]
    compacted = [n for v in views for n in v.notices if n.startswith("Compacted")]
    assert compacted and "; 1 quote not found in your messages, dropped" in compacted[0]
    assert [(pin.text, pin.source) for pin in conv.pins] == [("Ab jetzt antworte bitte immer auf Deutsch.", "summary")]
    assert conv.session is not None
    conv.release()
    resumed = core.conversation(streaming_model(long_echo), summarizer=summarizer())
    resumed.load(core.store.sessions.get(conv.session.id))
    assert [pin.text for pin in resumed.pins] == ["Ab jetzt antworte bitte immer auf Deutsch."]


def test_resume_rebuilds_exactly_what_the_live_session_had(core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CO_CLI_MAX_HISTORY_MESSAGES", "6")
    monkeypatch.setenv("CO_CLI_COMPACT_MIN_SPAN_TOKENS", "0")
    core.loaded = load_settings(cwd=core.cwd)
    conv = core.conversation(streaming_model(long_echo), summarizer=summarizer())
    for i in range(7):
        run(conv, f"message {i} " + "with padding words " * 10)
    assert conv.session is not None
    live = dumped(conv.working)
    live_sent = dumped(conv.window.sendable()[0])
    conv.release()
    resumed = core.conversation(streaming_model(long_echo), summarizer=summarizer())
    resumed.load(core.store.sessions.get(conv.session.id))
    assert dumped(resumed.working) == live
    assert dumped(resumed.window.sendable()[0]) == live_sent
    assert resumed.context.seqs[-1] == conv.context.seqs[-1]


def test_manual_compaction_records_the_range_from_the_first_message(core: Core) -> None:
    """Three turns then /compact: the compaction covers seqs 0..5 (it used to record from_seq=1)."""
    conv = core.conversation(streaming_model(long_echo), summarizer=summarizer())
    for i in range(3):
        run(conv, f"turn {i} " + "with padding words " * 10)
    result = asyncio.run(conv.compactions.compact(None))
    assert result.n_replaced == 6
    assert conv.session is not None
    record = core.store.compactions.latest(conv.session.id)
    assert record is not None and (record.from_seq, record.upto_seq) == (0, 5)
    assert record.trigger == "manual"
    assert [synthetic_kind(m) for m in conv.working] == ["summary", "ack"]


def test_a_crash_closed_turn_is_saved_on_resume(core: Core) -> None:
    conv = core.conversation(streaming_model(echo))
    run(conv, "answered")
    assert conv.session is not None
    core.store.messages.begin_turn(conv.session.id, "never answered")  # the process died here
    conv.release()
    resumed = core.conversation(streaming_model(echo))
    resumed.load(core.store.sessions.get(conv.session.id))
    rows = stored(core, resumed)
    assert rows[-2:] == [(2, "user", "cancelled", "never answered"), (3, "assistant", "cancelled", INTERRUPTED_NOTE)]
    assert resumed.context.seqs == [0, 1, 2, 3]


def test_uncompact_restores_the_context_exactly_and_resume_agrees(core: Core) -> None:
    conv = core.conversation(streaming_model(long_echo), summarizer=summarizer())
    for i in range(3):
        run(conv, f"turn {i} " + "with padding words " * 10)
    before = dumped(conv.working)
    asyncio.run(conv.compactions.compact(None))
    assert dumped(conv.working) != before
    assert conv.compactions.undo() == 6
    assert dumped(conv.working) == before
    run(conv, "after the undo")
    live = dumped(conv.working)
    assert conv.session is not None
    conv.release()
    resumed = core.conversation(streaming_model(long_echo), summarizer=summarizer())
    resumed.load(core.store.sessions.get(conv.session.id))
    assert dumped(resumed.working) == live
    assert resumed.compactions.undo() is None  # nothing left in force to undo
    records = core.store.compactions.list(conv.session.id)
    assert len(records) == 1 and records[0].undone_at is not None


def test_uncompact_without_saving_works_on_the_scratch_store(core: Core, tmp_path: Path) -> None:
    """--no-save runs on a store in a scratch directory: undo works the same way there."""
    scratch = Store.open(tmp_path / "scratch" / "sessions.db")
    core = Core(core.loaded, scratch, core.cwd)
    conv = core.conversation(streaming_model(long_echo), summarizer=summarizer())
    for i in range(3):
        run(conv, f"turn {i} " + "with padding words " * 10)
    before = dumped(conv.working)
    asyncio.run(conv.compactions.compact(None))
    assert conv.compactions.undo() == 6 and dumped(conv.working) == before
    assert conv.compactions.undo() is None
    conv.release()
    scratch.close()


def test_pins_reach_every_request_and_survive_resume_and_fork(core: Core) -> None:
    seen: list[str] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        seen.append(str(info.instructions))
        yield "ok"

    conv = core.conversation(FunctionModel(stream_function=stream, model_name="pins"))
    run(conv, "Always answer in British English.")
    assert conv.pins.add(conv.pins.last_user_text() or "") is not None
    assert conv.pins.add("Always answer in British English.") is None  # already pinned
    run(conv, "next")
    assert "Always answer in British English." in seen[-1] and "Always answer" not in seen[0]
    assert conv.session is not None
    conv.release()
    resumed = core.conversation(FunctionModel(stream_function=stream, model_name="pins"))
    resumed.load(core.store.sessions.get(conv.session.id))
    assert [p.text for p in resumed.pins] == ["Always answer in British English."]
    forked = resumed.branches.fork()
    assert forked is not None and [p.text for p in resumed.pins] == ["Always answer in British English."]
    removed = resumed.pins.remove(1)
    assert removed.text == "Always answer in British English." and resumed.pins.all() == []
    run(resumed, "and now")
    assert "Always answer" not in seen[-1]


def test_a_plain_text_summary_pins_nothing_and_only_suggests(core: Core) -> None:
    """A summariser that answers in plain text (whatever it is asked): its "> " lines are not read, the
    English cue's reading of the user's sentence is kept as a suggestion, and nothing is pinned."""

    def plain(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        from pydantic_ai.messages import TextPart

        body = "## Goal\nShip it.\n## Standing instructions\n> Never push directly to main.\n> Use tabs"
        return ModelResponse(parts=[TextPart(body)])

    conv = core.conversation(streaming_model(long_echo), summarizer=scripted_summariser(plain, model_name="s"))
    run(conv, "Never push directly to main. How do I tag a release? " + "padding words " * 20)
    run(conv, "what else " + "padding words " * 20)
    result = asyncio.run(conv.compactions.compact(None))
    assert result.method == "summary" and conv.pins.all() == []
    suggested = conv.compactions.current_suggestions()
    assert [(s.kind, s.text, s.command) for s in suggested] == [
        ("rule", "Never push directly to main.", "/pin Never push directly to main.")
    ]
    assert conv.engine.governor.summary_mode.prompted  # the prose answer switched it to prompted JSON


def test_memory_extraction_is_attached_with_a_chosen_gguf_but_not_with_the_bundled_model(
    core: Core, tmp_path: Path
) -> None:
    from co_cli.local.model import LocalModel
    from co_cli.local.weights import DEFAULT_WEIGHTS_FILE

    def on_local(weights: str) -> Conversation:
        conv = core.conversation(streaming_model(echo))
        local = LocalModel(tmp_path / weights, n_ctx=2048, max_tokens=16)
        conv.engine.resolved = ResolvedModel(
            model=local, choice=ModelChoice(spec="local", reason="test"), context_window=2048, window_source="t"
        )
        return conv

    bundled = on_local(DEFAULT_WEIGHTS_FILE)
    assert bundled.engine.summarizer_is_embedded and bundled.engine.summarizer_is_bundled
    assert bundled.background.attach_extraction() is None
    chosen = on_local("qwen2.5-1.5b-instruct-q4_k_m.gguf")
    assert chosen.engine.summarizer_is_embedded and not chosen.engine.summarizer_is_bundled
    assert chosen.background.attach_extraction() is not None
    assert not core.conversation(streaming_model(echo)).engine.summarizer_is_embedded
    assert not core.conversation(streaming_model(echo), summarizer=summarizer()).engine.summarizer_is_embedded


def test_a_turn_stops_an_extraction_on_the_embedded_engine_and_it_is_read_again_after(
    core: Core, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedded engine answers one request at a time: a prompt sent while the last message is being read for
    memories stops that reading (the message stays queued), and the worker reads it after the answer."""
    from co_cli.session.engine import Engine

    monkeypatch.setattr(Engine, "summarizer_is_embedded", property(lambda self: True))
    reading_started = asyncio.Event()
    calls: list[str] = []

    async def read(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(user_text(messages[-1]))
        if len(calls) == 1:
            reading_started.set()
            try:
                await asyncio.Event().wait()  # the first reading never ends by itself
            except asyncio.CancelledError:
                calls[-1] = "stopped"
                raise
        if info.output_tools:
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"facts": []})])
        return ModelResponse(parts=[TextPart('{"facts": []}')])

    conv = core.conversation(streaming_model(echo), summarizer=FunctionModel(read))
    worker = conv.background.attach_extraction()
    assert worker is not None

    async def two_turns() -> None:
        await conv.run_turn("my first message to read", RecordingView(), CancellationToken())
        await asyncio.wait_for(reading_started.wait(), 5)
        outcome = await conv.run_turn("a second message meanwhile", RecordingView(), CancellationToken())
        assert outcome.status == "ok"
        for _ in range(200):
            if not worker.busy:
                break
            await asyncio.sleep(0.01)

    asyncio.run(two_turns())
    assert calls[0] == "stopped"
    assert [c for c in calls[1:] if "message" in c] == calls[1:] and len(calls) == 3
    assert "my first message to read" in calls[1] and "a second message meanwhile" in calls[2]
    assert worker.last_error is None, worker.last_error
    assert len(core.store.queue) == 0


def test_the_event_loop_runs_while_a_turn_is_saved(core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    """The prompt's commit and the turn's commit wait for the disk in a worker thread: meanwhile the event loop
    runs other work (another client's turn in `co serve`), and the turn goes on only once each is saved."""
    from co_cli.session.recorder import Recorder

    conv = core.conversation(streaming_model(echo))
    served: list[str] = []

    def waits_for_the_loop(method: Callable[..., Any], name: str) -> Callable[..., Any]:
        def commit(self: Recorder, *args: Any) -> Any:
            loop_ran = threading.Event()
            loop.call_soon_threadsafe(lambda: (served.append(name), loop_ran.set()))
            assert loop_ran.wait(5), f"the event loop was blocked during {name}"
            return method(self, *args)

        return commit

    monkeypatch.setattr(Recorder, "begin", waits_for_the_loop(Recorder.begin, "begin"))
    monkeypatch.setattr(Recorder, "finish", waits_for_the_loop(Recorder.finish, "finish"))

    async def turn() -> Any:
        nonlocal loop
        loop = asyncio.get_running_loop()
        return await conv.run_turn("hello", RecordingView(), CancellationToken())

    loop: asyncio.AbstractEventLoop
    outcome = asyncio.run(turn())
    assert outcome.status == "ok" and served == ["begin", "finish"]
    assert stored(core, conv) == [(0, "user", "ok", "hello"), (1, "assistant", "ok", "echo: hello")]
