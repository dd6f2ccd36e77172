"""What bounds the server's time: a request arrives whole within ``serve_request_timeout`` or its connection is
closed; a read of the store (a search) ends when its client goes, when ``serve_search_timeout`` passes or when
the server begins to stop; and the server stops without waiting for either.

uvicorn times out an idle kept-alive connection but not a request whose headers or body never finish: a
thousand half-sent requests held their connections for good. ``request_deadline_protocol`` is uvicorn's HTTP/1.1
protocol with a deadline on reading each request (from the connection's start, or from a request's first byte
on a kept-alive connection), which data arriving meanwhile does not push back.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import h11
import uvicorn
from starlette.requests import Request
from uvicorn.protocols.http.h11_impl import H11Protocol

from co_cli.errors import StoreError
from co_cli.serve.errors import ApiError
from co_cli.tools.blocking import run_blocking

T = TypeVar("T")


class _RequestDeadline(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, with a request still arriving ``read_timeout`` seconds after it began answered
    408 and its connection closed; and a request still arriving when the server stops closed at once."""

    read_timeout: float = 30.0
    _timer: asyncio.TimerHandle | None = None
    _answered = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._follow()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        self._answered = True
        super().on_response_complete()
        self._follow()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)

    def shutdown(self) -> None:
        if self.conn.their_state is h11.SEND_BODY:  # its body may never come: the server does not wait for it
            self._cancel()
            self.transport.close()
            return
        super().shutdown()

    def _arriving(self) -> bool:
        """Whether a request has begun to arrive and is not whole yet (a new connection counts as one; a kept-alive
        connection waiting for its next request is uvicorn's keep-alive timeout's)."""
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            return True
        if state is h11.IDLE:
            return not self._answered or bool(self.conn.trailing_data[0])
        return False

    def _follow(self) -> None:
        if self.transport.is_closing() or not self._arriving():
            self._cancel()
        elif self._timer is None:
            self._timer = self.loop.call_later(self.read_timeout, self._expired)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        if self.transport.is_closing() or not self._arriving():
            return
        if self.cycle is None or not self.cycle.response_started:
            error = ApiError(
                408,
                f"the request did not arrive whole within {self.read_timeout:g} s (serve_request_timeout)",
                "request_timeout",
            )
            body = json.dumps(error.body()).encode()
            head = (
                "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
                f"content-length: {len(body)}\r\n\r\n"
            )
            self.transport.write(head.encode() + body)
        self.transport.close()


def request_deadline_protocol(seconds: float) -> type[H11Protocol]:
    """uvicorn's HTTP/1.1 protocol with every request given ``seconds`` to arrive whole (``Config(http=...)``)."""

    class RequestDeadline(_RequestDeadline):
        read_timeout = seconds

    return RequestDeadline


class StoppingServer(uvicorn.Server):
    """uvicorn's server, setting ``stopping`` as it begins to stop (Ctrl-C, SIGTERM): the reads that look at it end
    at once, instead of holding the connection uvicorn waits for."""

    def __init__(self, config: uvicorn.Config, stopping: threading.Event) -> None:
        super().__init__(config)
        self.stopping = stopping

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.stopping.set()
        await super().shutdown(sockets=sockets)


async def read_while_wanted(
    request: Request, stopping: threading.Event, seconds: float, read: Callable[[Callable[[], bool]], T]
) -> T:
    """``read(stop)`` in a worker thread; ``stop()`` turns true when the client disconnects, after ``seconds`` or
    when ``stopping`` is set, and the store's reads end soon after it does (they look at it every few thousand
    steps). ApiError: 503 past the deadline or when the server stops, 500 for a store error."""
    deadline = time.monotonic() + seconds
    gone = threading.Event()

    def stop() -> bool:
        return gone.is_set() or stopping.is_set() or time.monotonic() > deadline

    reading = asyncio.ensure_future(run_blocking(lambda flag: read(lambda: flag.is_set or stop()), name="co-read"))
    watching = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({reading, watching}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watching.cancel()
        if not reading.done():  # the client went (or this request is cancelled): the read is abandoned and stops
            gone.set()
            reading.cancel()
    if not reading.done() or reading.cancelled():
        raise ApiError(499, "the client went away before the answer", "client_closed_request")
    try:
        return reading.result()
    except StoreError as exc:
        if stopping.is_set():
            raise ApiError(503, "co serve is stopping", "server_stopping", "server_error") from None
        if time.monotonic() > deadline:
            raise ApiError(
                503,
                f"the search took longer than {seconds:g} s (serve_search_timeout); search for fewer or rarer words",
                "search_timeout",
                "server_error",
            ) from None
        raise ApiError(500, exc.message, "store_error") from None


async def _disconnected(request: Request) -> None:
    """Returns once the client has gone (the request's body, if any, is read and dropped meanwhile)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
