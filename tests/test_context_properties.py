"""Properties of the governor's processing over generated histories.

Histories mix text turns, tool call/return rounds (parallel calls, big outputs), interrupted turns (calls
never answered) and earlier summaries. Whatever the settings, what is sent never splits a tool call from its
return, ends with a request, keeps the latest user prompt and is never bigger than the (repaired) input.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse
from pydantic_ai.models import ModelRequestContext, ModelRequestParameters
from pydantic_ai.models.function import FunctionModel

from co_cli.config import Settings
from co_cli.context.boundaries import latest_user_prompt_index
from co_cli.context.governor import ContextGovernor
from co_cli.context.policy import GovernorConfig
from co_cli.context.repair import repair_orphans, tool_pairs_valid
from co_cli.context.tokens import estimate_messages_tokens
from co_cli.message_view import user_text
from tests.support.messages import ack, calls, reply, returns, static_marker, summary_message, texts_of, user
from tests.support.summariser import scripted_summariser, typed_summary

OUTPUT_SIZES = (5, 120, 900, 6000)


@st.composite
def histories(draw: st.DrawFn) -> list[ModelMessage]:
    ids = itertools.count()
    messages: list[ModelMessage] = []
    for turn in range(draw(st.integers(1, 14))):
        if turn and draw(st.integers(0, 5)) == 0:
            text = draw(st.sampled_from([static_marker(7), "[Summary of 9 earlier messages]\nWe use SQLite."]))
            messages += [summary_message(text), ack()]
        words = draw(st.text(alphabet="abcdefgh ", min_size=1, max_size=30))
        messages.append(user(f"prompt {turn}: {words}"))
        interrupted = False
        for _ in range(draw(st.integers(0, 3))):
            call_ids = [f"c{next(ids)}" for _ in range(draw(st.integers(1, 3)))]
            messages.append(calls(*[("tool", {"n": i}, call_id) for i, call_id in enumerate(call_ids)]))
            answered = call_ids if draw(st.integers(0, 6)) else call_ids[: draw(st.integers(0, len(call_ids)))]
            if answered:
                size = draw(st.sampled_from(OUTPUT_SIZES))
                messages.append(returns(*[("tool", "r" * size, call_id) for call_id in answered]))
            if len(answered) < len(call_ids):
                interrupted = True
                break
        if not interrupted:
            messages.append(reply(f"answer {turn} " + "t" * draw(st.sampled_from((3, 200)))))
    last = messages[-1]
    if isinstance(last, ModelResponse):
        messages.append(user(f"final prompt {draw(st.integers(0, 99))}"))
    return messages


knobs = st.fixed_dictionaries(
    {
        "max_history_messages": st.sampled_from([0, 4, 6, 8, 12, 40]),
        "context_window": st.sampled_from([0, 1500, 4000, 50_000]),
        "tool_output_trim_chars": st.sampled_from([0, 100, 2000]),
        "tool_output_offload_chars": st.sampled_from([0, 1000]),
        "summary": st.sampled_from(["ok", "fail", "huge"]),
    }
)


def _summarizer(kind: str) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: Any) -> ModelResponse:
        if kind == "fail":
            raise RuntimeError("down")
        return typed_summary(info, "Short summary." if kind == "ok" else "long " * 4000)

    return scripted_summariser(respond)


def _governor(knob: dict[str, Any], directory: Path) -> ContextGovernor:
    config = Settings(
        max_history_messages=knob["max_history_messages"],
        tool_output_trim_chars=knob["tool_output_trim_chars"],
        tool_output_offload_chars=knob["tool_output_offload_chars"],
        compact_threshold=0.5,
    )
    return ContextGovernor(
        GovernorConfig.from_settings(config, knob["context_window"]),
        summarizer=_summarizer(knob["summary"]),
        offload_dir=lambda: directory,
    )


async def _send(governor: ContextGovernor, history: list[ModelMessage]) -> list[ModelMessage]:
    request_context = ModelRequestContext(
        model=_summarizer("ok"),
        messages=list(history),
        model_settings=None,
        model_request_parameters=ModelRequestParameters(),
    )
    ctx = SimpleNamespace(run_id="run", model=None)
    out = await governor.before_model_request(ctx, request_context)  # type: ignore[arg-type]
    return out.messages


@pytest.fixture(scope="module")
def outputs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("offloaded")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(), knob=knobs)
def test_processing_invariants(history: list[ModelMessage], knob: dict[str, Any], outputs_dir: Path) -> None:
    sent = asyncio.run(_send(_governor(knob, outputs_dir), history))
    event("compacted" if len(sent) < len(repair_orphans(history)) else "not compacted")
    assert latest_user_prompt_index(history) is not None
    _check(history, sent)


def _check(history: list[ModelMessage], sent: list[ModelMessage]) -> None:
    assert sent and isinstance(sent[-1], ModelRequest)
    assert tool_pairs_valid(sent)
    latest_index = latest_user_prompt_index(history)
    if latest_index is not None:
        latest = user_text(history[latest_index])
        assert latest is not None and latest in texts_of(sent)
    repaired = repair_orphans(history)
    assert estimate_messages_tokens(sent) <= estimate_messages_tokens(repaired)
    assert len(sent) <= len(repaired)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(), knob=knobs)
def test_invariants_hold_at_every_request_of_a_growing_run(
    history: list[ModelMessage], knob: dict[str, Any], outputs_dir: Path
) -> None:
    governor = _governor(knob, outputs_dir)

    async def run() -> None:
        for end in range(1, len(history) + 1):
            if isinstance(history[end - 1], ModelRequest):
                prefix = history[:end]
                _check(prefix, await _send(governor, prefix))

    asyncio.run(run())


@settings(max_examples=60, deadline=None)
@given(history=histories())
def test_repair_is_idempotent_and_valid(history: list[ModelMessage]) -> None:
    once = repair_orphans(history)
    assert tool_pairs_valid(once)
    assert repair_orphans(once) == once
