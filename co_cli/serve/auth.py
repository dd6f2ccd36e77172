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
from starlette.responses import RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from co_cli.errors import CoError
from co_cli.serve.errors import ApiError

TOKEN_ENV = "CO_CLI_SERVE_TOKEN"
TOKEN_FILE = "serve-token"
COOKIE = "co_serve_token"
MIN_TOKEN_CHARS = 16


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
                await _unauthorized("the token in the address is wrong")(scope, receive, send)
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
        await _unauthorized(reason)(scope, receive, send)


def _unauthorized(message: str) -> ASGIApp:
    return ApiError(401, message, "invalid_api_key").response(headers={"WWW-Authenticate": "Bearer"})
