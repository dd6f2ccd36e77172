"""Who may use the server: every route wants co's token.

The token comes from ``CO_CLI_SERVE_TOKEN``, else from a file in the data dir (0600), made once with 32 random
bytes. A client sends it as ``Authorization: Bearer <token>``; a browser is given it once as ``/?token=<token>``,
which sets an HttpOnly, SameSite=Strict cookie and redirects to the same path without it, so the token leaves
the address bar and another site's page can neither read the cookie nor send it.
"""

from __future__ import annotations

import hmac
import os
import secrets
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import Headers
from starlette.responses import HTMLResponse, RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from co_cli.errors import CoError
from co_cli.serve.errors import ApiError

TOKEN_ENV = "CO_CLI_SERVE_TOKEN"
TOKEN_FILE = "serve-token"
COOKIE = "co_serve_token"
MIN_TOKEN_CHARS = 16
SIGN_IN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>co serve: the token is needed</title></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 4em auto; line-height: 1.5">
<h1>co serve needs its token</h1>
<p>{reason}. Open the link <code>co serve</code> printed when it started
(<code>http://host:port/?token=&hellip;</code>): the browser then keeps the token and this page opens.</p>
<p>Started without <code>CO_CLI_SERVE_TOKEN</code>, the token is in the file <code>serve-token</code> of co's data
directory (<code>co config path</code> shows where that is).</p>
</body></html>
"""
"""What a browser gets at ``/`` without the token (a client that asks for JSON gets OpenAI's error shape)."""


def server_token(data_dir: Path) -> tuple[str, str]:
    """The token every request must carry and where it comes from (the environment, or the token file)."""
    given = os.environ.get(TOKEN_ENV, "").strip()
    if given:
        if len(given) < MIN_TOKEN_CHARS:
            raise CoError(f"{TOKEN_ENV} is too short: use at least {MIN_TOKEN_CHARS} characters", exit_code=2)
        return given, TOKEN_ENV
    path = data_dir / TOKEN_FILE
    try:
        token = path.read_text().strip()
    except FileNotFoundError:
        token = ""
    except OSError as exc:
        raise CoError(f"cannot read the server token {path}: {exc.strerror}") from None
    if token:
        os.chmod(path, 0o600)
        return token, str(path)
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:  # another co serve made it meanwhile
        return server_token(data_dir)
    except OSError as exc:
        raise CoError(f"cannot write the server token {path}: {exc.strerror}") from None
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")
    return token, str(path)


class TokenAuth:
    """ASGI middleware: a request without the token gets a 401 in OpenAI's error shape."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token.encode()

    def _valid(self, candidate: str | None) -> bool:
        return bool(candidate) and hmac.compare_digest(str(candidate).encode(), self.token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = next((value for name, value in query if name == "token"), None)
        if given is not None and scope["method"] in ("GET", "HEAD"):
            if not self._valid(given):
                await _unauthorized("the token in the address is wrong", headers)(scope, receive, send)
                return
            rest = urlencode([(name, value) for name, value in query if name != "token"])
            target = scope.get("root_path", "") + scope["path"] + (f"?{rest}" if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(COOKIE, given, httponly=True, samesite="strict", path="/")
            await response(scope, receive, send)
            return
        scheme, _, bearer = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self._valid(bearer.strip()):
            await self.app(scope, receive, send)
            return
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # a malformed cookie header is as good as none
            cookie = SimpleCookie()
        if COOKIE in cookie and self._valid(cookie[COOKIE].value):
            await self.app(scope, receive, send)
            return
        reason = "wrong token" if bearer or COOKIE in cookie else "missing token: send Authorization: Bearer <token>"
        await _unauthorized(reason, headers)(scope, receive, send)


def _unauthorized(message: str, request: Headers) -> ASGIApp:
    """A 401: a short page for a browser opening a page, OpenAI's error shape for everything else."""
    if "text/html" in request.get("accept", ""):
        reason = "The token in the address is wrong" if "address" in message else "This browser has no token yet"
        if message == "wrong token":
            reason = "The token this browser keeps is wrong (co serve may have a new one)"
        return HTMLResponse(
            SIGN_IN_PAGE.format(reason=reason),
            status_code=401,
            headers={
                "WWW-Authenticate": "Bearer",
                "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
            },
        )
    return ApiError(401, message, "invalid_api_key").response(headers={"WWW-Authenticate": "Bearer"})
