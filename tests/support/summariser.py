"""Scripted summarisers: a FunctionModel answers both plain and streamed requests (co streams its summary
requests) with the same function.

co asks the summariser for a typed answer (``context.summarize.SummaryAnswer``) in its JSON schema (native
output: FunctionModel's profile claims it), through its output tool, or as prompted JSON once the model
answered in prose; ``typed_summary`` answers every way with the same fields.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.profiles import ModelProfile

from co_cli.context import standing
from co_cli.message_view import user_text

Respond = Callable[[list[ModelMessage], AgentInfo], ModelResponse | Awaitable[ModelResponse]]
TOOL_ONLY = ModelProfile(supports_json_schema_output=False)
"""The profile of a server co cannot name: a structured answer is asked with a forced output tool."""


def typed_summary(info: AgentInfo, summary: str, **fields: Any) -> ModelResponse:
    """The summariser's typed answer with ``summary`` and ``fields`` (standing_instructions, changes,
    next_step, people): a call of the output tool when one is offered, else the JSON object as text (native or
    prompted output); a plain-text request (a merge of partial summaries) gets ``summary`` alone."""
    if info.output_tools or info.model_request_parameters.output_mode in ("native", "prompted"):
        return structured(info, {"summary": summary, **fields})
    return ModelResponse(parts=[TextPart(summary)])


def is_rule_question(info: AgentInfo) -> bool:
    """Whether the request asks whether one sentence is a rule (``context.standing``: before a summary's rule is
    pinned)."""
    return standing.INSTRUCTIONS in (info.instructions or "")


def structured(info: AgentInfo, arguments: dict[str, Any]) -> ModelResponse:
    """``arguments`` as a structured answer: a call of the output tool when one is offered, else the JSON object
    as text."""
    if info.output_tools:
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, arguments)])
    return ModelResponse(parts=[TextPart(json.dumps(arguments, ensure_ascii=False))])


def scripted_summariser(
    respond: Respond,
    *,
    model_name: str | None = None,
    profile: ModelProfile | None = None,
    rules_read_as: standing.Reading | None = "rule",
    rule_questions: list[str] | None = None,
) -> FunctionModel:
    """A model that answers with ``respond``'s response, whole or as one streamed chunk (a tool call as one
    delta); asked whether a sentence is a rule, it answers ``rules_read_as`` (a careful summariser names only
    rules; None: the request fails), and adds the question's text to ``rule_questions`` when given.
    ``profile``: FunctionModel's own (which claims native structured output) unless given."""

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if is_rule_question(info):
            if rule_questions is not None:
                rule_questions.append(user_text(messages[-1]) or "")
            if rules_read_as is None:
                raise RuntimeError("the server went away")
            return structured(info, {"answer": rules_read_as})
        response = respond(messages, info)
        return await response if inspect.isawaitable(response) else response

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        response = await answer(messages, info)
        calls = [part for part in response.parts if isinstance(part, ToolCallPart)]
        if calls:
            yield {i: DeltaToolCall(call.tool_name, call.args_as_json_str()) for i, call in enumerate(calls)}
            return
        yield "".join(part.content for part in response.parts if isinstance(part, TextPart))

    return FunctionModel(answer, stream_function=stream, model_name=model_name, profile=profile)


def typed_summariser(
    summary: str, *, model_name: str | None = None, rules_read_as: standing.Reading | None = "rule", **fields: Any
) -> FunctionModel:
    """A summariser whose every summary is ``typed_summary(summary, **fields)``; ``rules_read_as``: how it reads a
    rule asked about alone."""
    return scripted_summariser(
        lambda messages, info: typed_summary(info, summary, **fields),
        model_name=model_name,
        rules_read_as=rules_read_as,
    )


def prose_summariser(summary: str, *, model_name: str | None = None) -> FunctionModel:
    """A summariser that answers in plain text whatever it is asked (no typed answer can be had from it)."""
    return scripted_summariser(lambda messages, info: ModelResponse(parts=[TextPart(summary)]), model_name=model_name)
