"""The ContextGovernor capability: what the model receives vs. what the run keeps."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic_ai import Agent, AgentRunResultEvent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext, ModelRequestParameters
from pydantic_ai.models.function import AgentInfo, FunctionModel

from co_cli.config import Settings
from co_cli.context.digest import DIGEST_HEADING
from co_cli.context.governor import ContextGovernor, GovernorEvent
from co_cli.context.policy import FALLBACK_COOLDOWN_REQUESTS, GovernorConfig
from co_cli.context.repair import tool_pairs_valid
from co_cli.synthetic import is_summary
from tests.support.messages import calls, conversation, recording_model, reply, returns, texts_of, tool_turn, user
from tests.support.summariser import scripted_summariser, typed_summary

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def make_settings() -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {"tool_output_offload_chars": 0, "compact_min_span_tokens": 0, **overrides}
        return Settings(**values)

    return make


class CountingModel:
    """A summariser that fails or answers, counting calls."""

    def __init__(self, fail: bool = True) -> None:
        self.calls = 0
        self.fail = fail
        self.model = scripted_summariser(self._respond)

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls += 1
        if self.fail:
            raise RuntimeError("provider down")
        return typed_summary(info, "Short summary.")


async def _send(governor: ContextGovernor, messages: list[ModelMessage], run_id: str = "run-1") -> list[ModelMessage]:
    ctx = SimpleNamespace(run_id=run_id, model=None)
    request_context = ModelRequestContext(
        model=FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("unused")])),
        messages=list(messages),
        model_settings=None,
        model_request_parameters=ModelRequestParameters(),
    )
    out = await governor.before_model_request(ctx, request_context)  # type: ignore[arg-type]
    return out.messages


def _chat_model(received: list[list[ModelMessage]]) -> FunctionModel:
    """Calls read_file once per user turn, then answers."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        received.append(list(messages))
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        if any(isinstance(p, ToolReturnPart) for p in last.parts):
            return ModelResponse(parts=[TextPart(f"answer {len(received)}")])
        return ModelResponse(parts=[ToolCallPart("read_file", {"path": f"f{len(received)}.py"})])

    return FunctionModel(respond)


async def test_agent_receives_compacted_history_while_run_keeps_everything(
    make_settings: Callable[..., Settings],
) -> None:
    summarizer, prompts = recording_model("Summary: the user asked questions about files.")
    events: list[GovernorEvent] = []
    governor = ContextGovernor(
        GovernorConfig.from_settings(make_settings(max_history_messages=12, tool_output_trim_chars=100), 1_000_000),
        summarizer=summarizer,
        on_event=events.append,
    )
    received: list[list[ModelMessage]] = []
    agent = Agent(_chat_model(received), capabilities=[governor])

    @agent.tool_plain
    def read_file(path: str) -> str:
        return f"contents of {path}: " + "data " * 200

    history: list[ModelMessage] = []
    for turn in range(8):
        result = await agent.run(f"question {turn}", message_history=history)
        new = result.new_messages()
        assert len(new) == 4
        assert isinstance(new[0], ModelRequest) and new[0].parts[-1] == new[0].parts[-1]
        assert f"question {turn}" in texts_of(new[:1])
        history = result.all_messages()

    assert len(history) == 32
    for turn in range(8):
        assert f"question {turn}" in texts_of(history)
    assert all(isinstance(p, ToolReturnPart) and "data data" in str(p.content) for p in history[2].parts)
    assert not any(is_summary(m) for m in history)

    last_sent = received[-1]
    assert any(is_summary(m) for m in last_sent)
    assert len(last_sent) < len(history)
    assert "question 7" in texts_of(last_sent)
    assert tool_pairs_valid(last_sent)
    compactions = [e for e in events if e.kind == "compaction"]
    assert compactions and all(e.trigger == "auto" and e.result is not None for e in compactions)
    # The cached compaction is reused: far fewer summariser calls than model requests (a call whose summary
    # came back no smaller than its span makes no compaction: the span grows first).
    assert 0 < len(compactions) <= len(prompts) < len(received) // 2
    assert governor.last_sent_estimate is not None


async def test_cache_is_reused_within_a_run_and_across_runs(make_settings: Callable[..., Settings]) -> None:
    summarizer, prompts = recording_model("S.")
    governor = ContextGovernor(
        GovernorConfig.from_settings(make_settings(max_history_messages=10), 0), summarizer=summarizer
    )
    base = conversation(10)
    first = await _send(governor, base)
    assert len(prompts) == 1
    assert is_summary(first[4])
    grown = [*base, calls(("read_file", {}, "x1")), returns(("read_file", "ok", "x1"))]
    second = await _send(governor, grown)
    assert len(prompts) == 1
    assert second[: len(first)] == first
    assert second[-2:] == grown[-2:]
    # A new run given the full transcript (no adopt) still finds the cached compaction.
    third = await _send(governor, [*grown, reply("done"), user("again")], run_id="run-2")
    assert len(prompts) == 2
    assert "[Earlier summary]" in prompts[1] and "User: question 1" not in prompts[1]
    assert sum(is_summary(m) for m in third) == 1
    # A different history in a new run drops the cache instead of applying it wrongly.
    fresh = conversation(2)
    assert await _send(governor, fresh, run_id="run-3") == fresh


async def test_adopt_returns_working_context_and_clears_cache(make_settings: Callable[..., Settings]) -> None:
    summarizer, _ = recording_model("S.")
    governor = ContextGovernor(
        GovernorConfig.from_settings(make_settings(max_history_messages=10), 0), summarizer=summarizer
    )
    base = conversation(10)
    await _send(governor, base)
    final = [*base, reply("answer")]
    working, result = governor.adopt(final)
    assert result is not None
    assert working == [*result.replacement, *final[result.covered :]]
    assert result.covered == 36 and result.messages == working
    assert not any(isinstance(p, ToolReturnPart) and "truncated" in str(p.content) for m in working for p in m.parts)
    assert governor.adopt(final) == (final, None)
    # The adopted context passed back in a new run is not compacted twice.
    again = await _send(governor, [*working, user("next")], run_id="run-2")
    assert sum(is_summary(m) for m in again) == 1


async def test_input_messages_are_never_mutated(make_settings: Callable[..., Settings], tmp_path: Path) -> None:
    summarizer, _ = recording_model("S.")
    governor = ContextGovernor(
        GovernorConfig.from_settings(
            make_settings(max_history_messages=10, tool_output_trim_chars=50, tool_output_offload_chars=5000), 0
        ),
        summarizer=summarizer,
        offload_dir=lambda: tmp_path / "out",
    )
    base = conversation(10, "z" * 9000)
    snapshot = copy.deepcopy(base)
    sent = await _send(governor, base)
    assert base == snapshot
    assert isinstance(sent[-1], ModelRequest)
    assert sent[-1].parts == base[-1].parts


async def test_large_current_output_is_offloaded(make_settings: Callable[..., Settings], tmp_path: Path) -> None:
    governor = ContextGovernor(
        GovernorConfig.from_settings(make_settings(tool_output_offload_chars=2000, max_history_messages=0), 0),
        offload_dir=lambda: tmp_path / "out",
    )
    big = "\n".join(f"row {i}" for i in range(3000))
    base = [user("list"), calls(("ls", {}, "call_9")), returns(("ls", big, "call_9"))]
    sent = await _send(governor, base)
    part = sent[-1].parts[0]
    assert isinstance(part, ToolReturnPart)
    assert "saved as ref=call_9" in part.content and len(part.content) < 3000
    assert (tmp_path / "out" / "call_9.txt").read_text() == big
    assert base[-1].parts[0].content == big


async def test_token_threshold_triggers_compaction(make_settings: Callable[..., Settings]) -> None:
    summarizer, prompts = recording_model("S.")
    settings = make_settings(max_history_messages=0, compact_threshold=0.5, tool_output_trim_chars=0)
    governor = ContextGovernor(GovernorConfig.from_settings(settings, 8000), summarizer=summarizer, overhead_tokens=200)
    base = conversation(12, "w" * 1200)
    sent = await _send(governor, base)
    estimate = governor.last_sent_estimate
    assert prompts and estimate is not None
    assert estimate.total <= governor.threshold_tokens
    assert any(is_summary(m) for m in sent)


async def test_under_budget_nothing_is_compacted(make_settings: Callable[..., Settings]) -> None:
    summarizer, prompts = recording_model("S.")
    governor = ContextGovernor(GovernorConfig.from_settings(make_settings(), 1_000_000), summarizer=summarizer)
    base = conversation(3)
    sent = await _send(governor, base)
    assert sent == base and prompts == []


async def test_failures_cool_down_then_disable_until_reset(make_settings: Callable[..., Settings]) -> None:
    model = CountingModel(fail=True)
    events: list[GovernorEvent] = []
    governor = ContextGovernor(
        GovernorConfig.from_settings(make_settings(max_history_messages=10), 0),
        summarizer=model.model,
        on_event=events.append,
    )
    history = conversation(10)

    async def next_request() -> list[ModelMessage]:
        nonlocal history
        history = [*history[:-1], *tool_turn(len(history), "ok"), user(f"prompt {len(history)}")]
        return await _send(governor, history)

    sent = await _send(governor, history)
    assert model.calls == 1
    notices = [e.message for e in events if e.kind == "notice"]
    assert notices and "Summariser failed (RuntimeError: provider down); kept an extractive digest" in notices[0]
    assert any(DIGEST_HEADING in texts_of([m]) for m in sent)
    for _ in range(FALLBACK_COOLDOWN_REQUESTS):
        sent = await next_request()
        assert isinstance(sent[-1], ModelRequest)
        assert DIGEST_HEADING in texts_of(sent)
    assert model.calls == 1
    for expected in (2, 3):
        await next_request()
        assert model.calls == expected
        for _ in range(FALLBACK_COOLDOWN_REQUESTS):
            await next_request()
        assert model.calls == expected
    assert governor.summarizer_disabled
    assert any("3 times in a row" in (e.message or "") for e in events)
    for _ in range(10):
        await next_request()
    assert model.calls == 3
    governor.reset_failures()
    model.fail = False
    await next_request()
    assert model.calls == 4
    assert not governor.summarizer_disabled


async def test_latest_user_prompt_always_sent(make_settings: Callable[..., Settings]) -> None:
    governor = ContextGovernor(GovernorConfig.from_settings(make_settings(max_history_messages=6), 0))
    history = [user("hello"), reply("hi"), user("Please migrate the schema to v2.")]
    for i in range(20):
        history += [calls(("step", {"i": i}, f"c{i}")), returns(("step", "ok", f"c{i}"))]
    sent = await _send(governor, history)
    assert len(sent) < len(history)
    assert "Please migrate the schema to v2." in texts_of(sent)
    assert isinstance(sent[-1], ModelRequest) and tool_pairs_valid(sent)
    assert any(isinstance(p, UserPromptPart) for p in sent[2].parts)


async def test_streamed_run_is_governed_too(make_settings: Callable[..., Settings]) -> None:
    summarizer, prompts = recording_model("S.")
    governor = ContextGovernor(
        GovernorConfig.from_settings(make_settings(max_history_messages=10), 0), summarizer=summarizer
    )
    received: list[list[ModelMessage]] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        received.append(list(messages))
        yield "streamed "
        yield "answer"

    agent = Agent(FunctionModel(stream_function=stream), capabilities=[governor])
    history = conversation(10)[:-1]
    final = None
    async with agent.run_stream_events("next question", message_history=history) as events:
        async for event in events:
            if isinstance(event, AgentRunResultEvent):
                final = event.result
    assert final is not None and final.output == "streamed answer"
    assert len(final.all_messages()) == len(history) + 2
    assert len(prompts) == 1
    assert any(is_summary(m) for m in received[0]) and len(received[0]) < len(history)
    working, result = governor.adopt(final.all_messages())
    assert result is not None and working[-1] == final.all_messages()[-1]


async def test_cheap_passes_run_before_any_summary(make_settings: Callable[..., Settings]) -> None:
    """Over the token threshold, a file read again later becomes a pointer first; when that is enough, the
    summariser is not asked at all."""
    summarizer, prompts = recording_model("S.")
    big = "line of the module\n" * 400  # ~1.9k tokens per read; the window of 4,500 has its threshold at 3,600
    history = [user("read it"), calls(("read_file", {"path": "src/app.py"}, "r1")), returns(("read_file", big, "r1"))]
    history += [reply("read"), user("again"), calls(("read_file", {"path": "src/app.py"}, "r2"))]
    history += [returns(("read_file", big, "r2")), reply("read again"), user("and now?")]
    settings = make_settings(max_history_messages=0, tool_output_trim_chars=0)
    events: list[GovernorEvent] = []
    governor = ContextGovernor(
        GovernorConfig.from_settings(settings, 4500), summarizer=summarizer, on_event=events.append
    )
    sent = await _send(governor, history)
    assert prompts == [] and not [e for e in events if e.kind == "compaction"]
    assert "[superseded: read_file of src/app.py was read again later]" in texts_of(sent)
    assert texts_of(sent).count("line of the module") == 400  # the later read is whole


async def test_a_slow_summariser_is_named_once_with_the_setting(make_settings: Callable[..., Settings]) -> None:
    """A summariser that times out: the digest stands in, it is not asked again for the same request, and one
    notice (not one per compaction) names request_timeout."""
    calls = 0

    def slow(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal calls
        calls += 1
        raise TimeoutError("no first event")

    events: list[GovernorEvent] = []
    governor = ContextGovernor(
        GovernorConfig.from_settings(make_settings(max_history_messages=10, request_timeout=7), 0),
        summarizer=scripted_summariser(slow),
        on_event=events.append,
    )
    history = conversation(10)
    sent = await _send(governor, history)
    assert calls == 1 and any(DIGEST_HEADING in texts_of([m]) for m in sent)
    for i in range(2 * (FALLBACK_COOLDOWN_REQUESTS + 1)):
        history = [*history[:-1], *tool_turn(len(history), "ok"), user(f"prompt {i}")]
        await _send(governor, history)
    assert calls >= 2  # asked again after the cool-down, never twice for one request
    notices = [e.message or "" for e in events if e.kind == "notice"]
    slow_notices = [n for n in notices if n.startswith("The summariser is slow")]
    assert len(slow_notices) == 1 and "sent nothing for 7 s" in slow_notices[0]
    assert "raise request_timeout" in slow_notices[0]
    compactions = [e.result for e in events if e.kind == "compaction" and e.result is not None]
    assert compactions[0].timed_out and compactions[0].method == "digest"


async def test_past_the_threshold_auto_compaction_summarises_what_a_manual_compact_would() -> None:
    """A short conversation of long messages in a small window: fewer messages than the tail that
    auto-compaction keeps (half of max_history_messages), so it used to give up ("nothing more can be
    summarised automatically") where a manual /compact replaced them all."""
    from co_cli.context.compact import compact_all

    history: list[ModelMessage] = []
    for i in range(7):
        history += [user(f"question {i}: " + "tell me more about the harbour " * 12), reply("the harbour " * 60)]
    history.append(user("and the lighthouse?"))
    summarizer, prompts = recording_model("The user asked about the harbour seven times.")
    events: list[GovernorEvent] = []
    config = GovernorConfig.from_settings(Settings(), 4096)  # the defaults: 40 messages, min span 800 tokens
    governor = ContextGovernor(config, summarizer=summarizer, overhead_tokens=1700, on_event=events.append)

    manual = await compact_all(history, summarizer)
    assert manual.n_replaced == len(history) and manual.tokens_after < manual.tokens_before

    sent = await _send(governor, history)
    assert not [e for e in events if e.kind == "notice"]
    assert any(is_summary(m) for m in sent) and prompts
    assert texts_of(sent[-1:]) == "and the lighthouse?"
    estimate = governor.last_sent_estimate
    assert estimate is not None and estimate.total <= governor.threshold_tokens
