"""The browser view at ``/``: the saved sessions listed, searched, read, renamed, moved to the trash and back, and a
box to continue one (and stop its answer).

The page is three files shipped in the package (``static/``), served by co itself: no CDN, no build step. It
reads the JSON routes below and continues a conversation through the server's own ``/v1/chat/completions``
(streamed, the session named by ``X-Co-Session``). The page and its two files need no credential (they hold
no data); the page signs in at ``/api/sign-in`` with the one-time code of co serve's link (or the pasted token)
and sends the browser key it gets as a bearer header on every other route (``auth.py``). The page's
Content-Security-Policy lets it load and call nothing but this server, and the page builds
its DOM from text, so a transcript can never run as markup.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from co_cli.errors import SessionNotFound, StoreError
from co_cli.serve import session_json
from co_cli.serve.auth import SIGN_IN_PATH
from co_cli.serve.context import ServeContext
from co_cli.serve.errors import ApiError
from co_cli.serve.limits import read_while_wanted
from co_cli.store import SessionInfo

STATIC_FILES = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
"""The page's files besides ``index.html``, and their types: nothing else under ``/static/`` is served."""

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
"""On every response of the browser view: its files and its JSON alike."""

MAX_QUERY_CHARS = 1_000


def _static(name: str) -> bytes:
    return resources.files("co_cli.serve").joinpath("static", name).read_bytes()


def routes(ctx: ServeContext) -> list[BaseRoute]:
    """The browser view's routes: its page, static files and sign-in, then the session API it reads."""
    return _page_routes(ctx) + _session_routes(ctx)


def _page_routes(ctx: ServeContext) -> list[BaseRoute]:
    async def page(request: Request) -> Response:
        return Response(_static("index.html"), media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC_FILES:
            raise ApiError(404, f"no route {request.url.path}", "not_found")
        return Response(_static(name), media_type=STATIC_FILES[name], headers=PAGE_HEADERS)

    async def sign_in(request: Request) -> Response:
        data = await _json_fields(request, ("code", "token"), 'send {"code": "<code>"} or {"token": "<token>"}')
        key = ctx.sign_in.exchange(code=data["code"], token=data["token"])
        return JSONResponse({"key": key}, headers=PAGE_HEADERS)

    return [
        Route("/", page, methods=["GET"]),
        Route(SIGN_IN_PATH, sign_in, methods=["POST"]),
        Route("/static/{name}", static, methods=["GET"]),
    ]


def _session_routes(ctx: ServeContext) -> list[BaseRoute]:
    async def sessions(request: Request) -> Response:
        return await _read(session_json.session_list, ctx.store)

    async def session(request: Request) -> Response:
        return await _read(session_json.session_record, ctx.store, request.path_params["id"])

    async def search(request: Request) -> Response:
        query = request.query_params.get("q", "")
        if len(query) > MAX_QUERY_CHARS:
            raise ApiError(400, f"q: a search is at most {MAX_QUERY_CHARS:,} characters", "invalid_value")
        body = await read_while_wanted(
            request,
            ctx.stopping,
            ctx.settings.serve_search_timeout,
            lambda stop: session_json.search_hits(ctx.store, query, stop=stop),
        )
        return JSONResponse(body, headers=PAGE_HEADERS)

    async def rename(request: Request) -> Response:
        title = (await _json_fields(request, "title", 'send {"title": "<the new title>"}'))["title"]
        info = await ctx.chats.rename(request.path_params["id"], title)
        return JSONResponse(_summary(ctx, info), headers=PAGE_HEADERS)

    async def trash(request: Request) -> Response:
        info = await ctx.chats.trash(request.path_params["id"])
        return JSONResponse(_summary(ctx, info), headers=PAGE_HEADERS)

    async def trashed(request: Request) -> Response:
        return await _read(session_json.trash_list, ctx.store)

    async def restore(request: Request) -> Response:
        info = await ctx.chats.restore(request.path_params["id"])
        return JSONResponse(_summary(ctx, info), headers=PAGE_HEADERS)

    async def stop(request: Request) -> Response:
        stopped = await ctx.chats.stop(request.path_params["id"])
        return JSONResponse({"stopped": stopped}, headers=PAGE_HEADERS)

    return [
        Route("/api/sessions", sessions, methods=["GET"]),
        Route("/api/sessions/{id}", session, methods=["GET"]),
        Route("/api/sessions/{id}", rename, methods=["PATCH"]),
        Route("/api/sessions/{id}", trash, methods=["DELETE"]),
        Route("/api/sessions/{id}/stop", stop, methods=["POST"]),
        Route("/api/trash", trashed, methods=["GET"]),
        Route("/api/trash/{id}/restore", restore, methods=["POST"]),
        Route("/api/search", search, methods=["GET"]),
    ]


async def _json_fields(request: Request, names: str | tuple[str, ...], usage: str) -> dict[str, str]:
    """The string fields ``names`` of a JSON object body (a missing one: ""); ApiError 400 saying ``usage``."""
    try:
        data = json.loads(await request.body())
    except (ValueError, UnicodeDecodeError, RecursionError):
        data = None
    wanted = (names,) if isinstance(names, str) else names
    if not isinstance(data, dict) or not all(isinstance(data.get(name, ""), str) for name in wanted):
        raise ApiError(400, usage, "invalid_request")
    return {name: data.get(name, "") for name in wanted}


def _summary(ctx: ServeContext, info: SessionInfo) -> dict[str, Any]:
    return session_json.session_summary(info, ctx.store.sessions.short_id(info.id))


async def _read(reader: Callable[..., dict[str, Any]], *args: Any) -> Response:
    """What ``reader`` reads of the store, as JSON (read in a worker thread: the server goes on meanwhile)."""
    try:
        body = await run_in_threadpool(reader, *args)
    except SessionNotFound as exc:
        raise ApiError(404, exc.message, "session_not_found") from None
    except StoreError as exc:  # a damaged database or session: said in one line, as the terminal says it
        raise ApiError(500, exc.message, "store_error") from None
    return JSONResponse(body, headers=PAGE_HEADERS)
