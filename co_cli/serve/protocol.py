"""The OpenAI chat-completions protocol as co speaks it: the request validated with pydantic, and the
completion, its stream chunks and the model list built as OpenAI clients read them."""

from __future__ import annotations

import secrets
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from co_cli.serve.errors import ApiError
from co_cli.serve.history import ChatMessage
from co_cli.store import TurnUsage


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    type: str
    text: str | None = None


class RequestMessage(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    tool_calls: list[Any] | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    """What co reads of a request; sampling parameters and the like are accepted and left to co's settings."""

    model_config = ConfigDict(extra="allow", strict=True)

    model: str | None = None
    messages: list[RequestMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int | None = Field(None, ge=1)
    tools: list[Any] | None = None
    tool_choice: Any = None


def parse_request(data: Any) -> ChatCompletionRequest:
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object", "invalid_request")
    try:
        return ChatCompletionRequest.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(part) for part in err["loc"]) or "body"
        raise ApiError(400, f"{where}: {err['msg']}", "invalid_value") from None


class ClientTurn(BaseModel):
    """A request read as co runs it: the new prompt, and what the client sent before it."""

    prompt: str
    history: list[ChatMessage]
    instructions: str


def read_conversation(request: ChatCompletionRequest) -> ClientTurn:
    """The prompt (the last message, which must be the user's), the earlier user/assistant messages, and the
    client's own system messages. Client-side tools are not supported: co answers with its own."""
    if request.n not in (None, 1):
        raise ApiError(400, "n: co gives one answer per request", "unsupported_parameter")
    if request.tools and request.tool_choice != "none":
        raise ApiError(
            400,
            "tools: client-side tools are not supported; co answers with its own read-only tools",
            "unsupported_parameter",
        )
    history: list[ChatMessage] = []
    instructions: list[str] = []
    for index, message in enumerate(request.messages):
        if message.role in ("tool", "function") or message.tool_calls:
            raise ApiError(400, f"messages.{index}: tool messages are not supported", "unsupported_parameter")
        text = _text(message.content, index)
        if message.role in ("system", "developer"):
            instructions.append(text)
        else:
            history.append(ChatMessage("user" if message.role == "user" else "assistant", text))
    if not history or history[-1].role != "user":
        raise ApiError(400, "messages: the last message must be the user's", "invalid_value")
    prompt = history.pop().text
    if not prompt.strip():
        raise ApiError(400, "messages: the last user message is empty", "invalid_value")
    return ClientTurn(prompt=prompt, history=history, instructions="\n\n".join(instructions))


def _text(content: str | list[ContentPart] | None, index: int) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    texts = []
    for part in content:
        if part.type != "text" or part.text is None:
            raise ApiError(400, f"messages.{index}.content: only text parts are supported", "unsupported_parameter")
        texts.append(part.text)
    return "".join(texts)


def completion_id() -> str:
    return f"chatcmpl-{secrets.token_hex(12)}"


def usage_json(usage: TurnUsage | None) -> dict[str, int]:
    prompt = usage.input_tokens if usage else 0
    completion = usage.output_tokens if usage else 0
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def completion(cid: str, model: str, text: str, finish_reason: str, usage: TurnUsage | None) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}],
        "usage": usage_json(usage),
    }


def chunk(cid: str, model: str, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def usage_chunk(cid: str, model: str, usage: TurnUsage | None) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [],
        "usage": usage_json(usage),
    }


def model_list(names: list[str]) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [{"id": name, "object": "model", "created": 0, "owned_by": "co"} for name in names],
    }
