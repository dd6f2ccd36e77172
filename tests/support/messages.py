"""Builders of message histories for the context tests: prompts, replies, tool calls and returns, whole conversations,
and models that record what they were asked."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from co_cli.synthetic import STATIC_MARKER, ack_response, upgrade_legacy
from tests.support.summariser import scripted_summariser, typed_summary

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def user(text: str, *, ts: datetime | None = None) -> ModelRequest:
    stamp = ts or T0
    return ModelRequest(parts=[UserPromptPart(text, timestamp=stamp)], timestamp=stamp)


def summary_message(text: str) -> ModelRequest:
    """A co summary (or static marker) with this text, marked as co's own (as compaction makes them)."""
    now = datetime.now(UTC)
    message = upgrade_legacy(ModelRequest(parts=[UserPromptPart(text, timestamp=now)], timestamp=now))
    assert isinstance(message, ModelRequest) and message.metadata, f"not a summary text: {text[:40]!r}"
    return message


def static_marker(n: int) -> str:
    return STATIC_MARKER.format(n=n)


def ack() -> ModelResponse:
    return ack_response()


def reply(text: str, *, input_tokens: int = 0, output_tokens: int = 0, ts: datetime | None = None) -> ModelResponse:
    return ModelResponse(
        parts=[TextPart(text)],
        usage=RequestUsage(input_tokens=input_tokens, output_tokens=output_tokens),
        timestamp=ts or T0,
        model_name="m",
    )


def calls(*specs: tuple[str, dict[str, Any], str], ts: datetime | None = None) -> ModelResponse:
    return ModelResponse(
        parts=[ToolCallPart(name, args, call_id) for name, args, call_id in specs],
        timestamp=ts or T0,
        model_name="m",
    )


def returns(*specs: tuple[str, Any, str], ts: datetime | None = None) -> ModelRequest:
    stamp = ts or T0
    return ModelRequest(
        parts=[ToolReturnPart(name, content, call_id, timestamp=stamp) for name, content, call_id in specs],
        timestamp=stamp,
    )


def tool_turn(index: int, output: str) -> list[ModelMessage]:
    """A user turn with one tool call and a text answer: 4 messages."""
    call_id = f"call_{index}"
    return [
        user(f"question {index}"),
        calls(("read_file", {"path": f"src/file_{index}.py"}, call_id)),
        returns(("read_file", output, call_id)),
        reply(f"answer {index}"),
    ]


def conversation(turns: int, output: str = "ok", *, final_prompt: str = "latest question") -> list[ModelMessage]:
    """``turns`` tool turns followed by a new user prompt (so it ends with a request)."""
    messages: list[ModelMessage] = []
    for i in range(turns):
        messages.extend(tool_turn(i, output))
    messages.append(user(final_prompt))
    return messages


def texts_of(messages: Sequence[ModelMessage]) -> str:
    """All visible text of a history, for substring checks."""
    out: list[str] = []
    for msg in messages:
        for part in msg.parts:
            content = getattr(part, "content", None)
            if isinstance(content, str):
                out.append(content)
    return "\n".join(out)


def recording_model(answer: Callable[[str], str] | str = "A short summary.") -> tuple[FunctionModel, list[str]]:
    """A summariser model that records each prompt it receives and answers with ``answer`` as its summary (a
    typed answer with no other field; plain text where text is asked for)."""
    prompts: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assert not info.function_tools, "the summariser must have no tools"
        prompt = "\n".join(
            part.content
            for part in messages[-1].parts
            if isinstance(part, UserPromptPart) and isinstance(part.content, str)
        )
        prompts.append(prompt)
        text = answer(prompt) if callable(answer) else answer
        return typed_summary(info, text)

    return scripted_summariser(respond), prompts


def failing_model(message: str = "rate limited") -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise RuntimeError(message)

    return scripted_summariser(respond)
