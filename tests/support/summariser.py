"""Scripted summarisers: a FunctionModel answers both plain and streamed requests (co streams its summary
requests) with the same function."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

Respond = Callable[[list[ModelMessage], AgentInfo], ModelResponse | Awaitable[ModelResponse]]


def scripted_summariser(respond: Respond, *, model_name: str | None = None) -> FunctionModel:
    """A model that answers with ``respond``'s response, whole or as one streamed chunk."""

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        response = respond(messages, info)
        return await response if inspect.isawaitable(response) else response

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        response = await answer(messages, info)
        yield "".join(part.content for part in response.parts if isinstance(part, TextPart))

    return FunctionModel(answer, stream_function=stream, model_name=model_name)
