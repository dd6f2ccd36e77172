"""The server's application: route modules composed behind the address check, the token check and the body
cap, every error in OpenAI's shape.

A route module is a function ``routes(ctx: ServeContext) -> list[BaseRoute]``. ``ROUTE_MODULES`` lists them
in the order they are matched; a new front of the server adds its module there (``build_app`` also takes
extra ones, for tests).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from co_cli.serve import browser, openai_api
from co_cli.serve.auth import OriginGuard, TokenAuth
from co_cli.serve.context import ServeContext
from co_cli.serve.errors import ApiError

RouteModule = Callable[[ServeContext], list[BaseRoute]]

ROUTE_MODULES: tuple[RouteModule, ...] = (openai_api.routes, browser.routes)
"""Every route module of the server. The browser view registers its routes here."""


def build_app(
    ctx: ServeContext,
    host: str,
    port: int,
    extra: Sequence[RouteModule] = (),
    on_ready: Callable[[], None] | None = None,
) -> Starlette:
    """The application for the server listening on ``host:port``; ``on_ready`` is called once it serves (the
    server prints where it listens then)."""
    routes: list[BaseRoute] = []
    for module in (*ROUTE_MODULES, *extra):
        routes.extend(module(ctx))
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(OriginGuard, host=host, port=port),
            Middleware(TokenAuth, sign_in=ctx.sign_in),
            Middleware(BodyLimit, limit=ctx.settings.serve_max_request_bytes),
        ],
        exception_handlers={
            ApiError: _api_error,
            HTTPException: _http_error,
            ClientDisconnect: _client_gone,
            Exception: _internal_error,
        },
        lifespan=_lifespan,
    )
    app.state.ctx = ctx
    app.state.on_ready = on_ready
    return app


@contextlib.asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    if app.state.on_ready is not None:
        app.state.on_ready()
    yield
    await app.state.ctx.chats.close()  # running turns and background work are saved before the process ends


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response()


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    message = {404: f"no route {request.url.path}", 405: f"{request.method} is not allowed on {request.url.path}"}
    code = {404: "not_found", 405: "method_not_allowed"}
    return ApiError(
        exc.status_code, message.get(exc.status_code, str(exc.detail)), code.get(exc.status_code)
    ).response()


async def _client_gone(request: Request, exc: Exception) -> Response:
    """The client went while its request's body was arriving (or the body's deadline closed it): nobody reads an
    answer, and it is no error of the server's."""
    return Response(status_code=400)


async def _internal_error(request: Request, exc: Exception) -> Response:
    return ApiError(500, f"internal error: {type(exc).__name__}", "internal_error").response()


class BodyLimit:
    """Refuse a request body over ``limit`` bytes (413): by its Content-Length before reading any of it, or
    as soon as a chunked body passes the limit."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_big = ApiError(
            413, f"the request body is larger than {self.limit:,} bytes (serve_max_request_bytes)", "request_too_large"
        )
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    await ApiError(400, "malformed Content-Length", "invalid_request").response()(scope, receive, send)
                    return
                if length > self.limit:
                    await too_big.response(headers={"Connection": "close"})(scope, receive, send)
                    return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise too_big
            return message

        await self.app(scope, counted, send)
