"""``/v1/models`` and ``/v1/chat/completions``: the OpenAI chat-completions API over co's sessions.

A request is one turn of a session (``chats.py``): ``X-Co-Session`` names it (an id or a unique prefix), else a
client resending its earlier messages continues the session they match, else a new one starts. The answer
carries the session's id in ``X-Co-Session`` so a client can pin it. Streaming is server-sent events
(``data: {...}`` chunks, then ``data: [DONE]``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from co_cli.serve.chats import Finished, RunningTurn, TextDelta, TurnEvent, TurnRequest
from co_cli.serve.context import ServeContext
from co_cli.serve.errors import ApiError
from co_cli.serve.protocol import (
    chunk,
    completion,
    completion_id,
    model_list,
    parse_request,
    read_conversation,
    usage_chunk,
)

SESSION_HEADER = "X-Co-Session"

STREAM_PACE = 0.010
"""The shortest time between two writes of a streamed answer, in seconds: the pieces that come sooner wait for
the next write and go out together (each still its own event), so a piece is late by at most this much and the
turn's end is written as soon as it comes. Every write costs a system call and wakes the reader; a reader still
sees the answer grow 100 times a second."""


def routes(ctx: ServeContext) -> list[BaseRoute]:
    async def models(request: Request) -> Response:
        return JSONResponse(model_list(ctx.models.names()))

    async def chat_completions(request: Request) -> Response:
        body = await request.body()
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested past Python's limit
            raise ApiError(400, "the request body is not valid JSON", "invalid_json") from None
        parsed = parse_request(data)
        asked = read_conversation(parsed)
        turn = await ctx.chats.start(
            TurnRequest(
                prompt=asked.prompt,
                history=asked.history,
                session=request.headers.get(SESSION_HEADER) or None,
                model=parsed.model,
                instructions=asked.instructions,
            )
        )
        include_usage = bool(parsed.stream_options and parsed.stream_options.include_usage)
        if parsed.stream:
            return EventStream(turn, include_usage)
        return await _answer(turn, request)

    return [
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    ]


async def _answer(turn: RunningTurn, request: Request) -> Response:
    """The whole answer in one completion; a client that goes away meanwhile cancels the turn (saved cut off)."""
    text: list[str] = []
    finished: Finished | None = None
    try:
        watcher = asyncio.get_running_loop().create_task(_disconnected(request.receive, turn))
        try:
            async for event in turn.events():
                if isinstance(event, TextDelta):
                    text.append(event.text)
                elif isinstance(event, Finished):
                    finished = event
        finally:
            watcher.cancel()
    finally:
        turn.abandon()  # only if it never started
    headers = {SESSION_HEADER: turn.session_id}
    assert finished is not None
    outcome = finished.outcome
    if outcome.status == "ok":
        body = completion(completion_id(), turn.model, "".join(text), finished.finish_reason, finished.usage)
        return JSONResponse(body, headers=headers)
    if finished.taken_over:
        error = ApiError(409, outcome.error or "the session was taken over", "session_taken_over")
    elif outcome.status == "cut-off":
        error = ApiError(502, f"the model's answer was cut off: {outcome.error}", "upstream_cut_off")
    elif outcome.status == "cancelled":  # the client went away: nobody reads this
        error = ApiError(499, "the request was cancelled", "cancelled")
    else:
        error = ApiError(502, f"the model failed: {outcome.error}", "upstream_error")
    return error.response(headers=headers)


async def _disconnected(receive: Receive, turn: RunningTurn) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            turn.cancel()
            return


class EventStream(Response):
    """The answer as server-sent events; a client that goes away cancels the turn, which is saved cut off."""

    media_type = "text/event-stream"

    def __init__(self, turn: RunningTurn, include_usage: bool) -> None:
        self.turn = turn
        self.include_usage = include_usage
        self.status_code = 200
        self.background = None
        self.init_headers(
            {SESSION_HEADER: self.turn.session_id, "Cache-Control": "no-cache", "Content-Type": self.media_type}
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._stream(receive, send)
        finally:
            self.turn.abandon()  # the client went away before the turn started: the session is let go

    async def _stream(self, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        watcher = asyncio.get_running_loop().create_task(_disconnected(receive, self.turn))
        gone = False
        try:
            async for data in self._chunks():
                if gone:
                    continue  # the turn runs on until it is saved; nobody reads this any more
                try:
                    await send({"type": "http.response.body", "body": data, "more_body": True})
                except OSError:
                    gone = True
                    self.turn.cancel()
            if not gone:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            watcher.cancel()

    async def _chunks(self) -> AsyncIterator[bytes]:
        """The events, each piece of the answer its own ``data:`` event; the pieces that come within
        ``STREAM_PACE`` of a write are written at once."""
        turn, cid = self.turn, completion_id()
        yield _event(chunk(cid, turn.model, {"role": "assistant", "content": ""}))
        async for batch in turn.batches(STREAM_PACE):
            yield b"".join(self._event_bytes(cid, event) for event in batch)

    def _event_bytes(self, cid: str, event: TurnEvent) -> bytes:
        turn = self.turn
        if isinstance(event, TextDelta):
            return _event(chunk(cid, turn.model, {"content": event.text}))
        if not isinstance(event, Finished):
            return b""
        outcome = event.outcome
        if event.taken_over:  # the answer streamed so far was not saved: the client is told it is void
            return _event(ApiError(409, outcome.error or "the session was taken over", "session_taken_over").body())
        if outcome.status == "cancelled":  # stopped (``/api/sessions/<id>/stop``): what was answered is kept
            return _event(ApiError(499, "the answer was stopped; what came of it is saved", "cancelled").body())
        if outcome.status != "ok":
            code = "upstream_cut_off" if outcome.status == "cut-off" else "upstream_error"
            return _event(ApiError(502, outcome.error or "the turn did not finish", code).body())
        data = _event(chunk(cid, turn.model, {}, event.finish_reason))
        if self.include_usage:
            data += _event(usage_chunk(cid, turn.model, event.usage))
        return data + b"data: [DONE]\n\n"


def _event(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()
