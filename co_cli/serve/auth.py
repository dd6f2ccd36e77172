"""Who may use the server, and from where.

Every route but the page's own files and its sign-in wants a bearer credential in the ``Authorization`` header:
co's token (``CO_CLI_SERVE_TOKEN``, else a file in the data dir, 0600, made once with 32 random bytes), or a
browser key. Nothing is ever accepted from a cookie or the address, so a browser holds no ambient credential
that another local server (browsers share cookies across the ports of a host) could receive or make it send.

The browser signs in with a one-time link, ``/#code=<code>``: the code is in the fragment, which the browser
never sends to any server; the page exchanges it (``POST /api/sign-in``) for a browser key, keeps the key in
its origin's ``localStorage`` (which another port cannot read) and sends it as a header. A code works once, so
the link left in the browser's history is spent; co serve prints a fresh one each time one is used. The page
also takes the token itself, pasted, for a browser that missed the link. Browser keys live as long as the
server process.

``OriginGuard`` sits in front of everything: a request whose ``Host`` is not this server (a name other than
localhost, an IP address or the address it was started on, or another port: DNS rebinding) or whose
``Origin`` is another origin gets a 403 before any route runs.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from co_cli.errors import CoError
from co_cli.serve.errors import ApiError

TOKEN_ENV = "CO_CLI_SERVE_TOKEN"
TOKEN_FILE = "serve-token"
MIN_TOKEN_CHARS = 16
SIGN_IN_PATH = "/api/sign-in"
PUBLIC_ROUTES = frozenset({("GET", "/"), ("GET", "/static/app.js"), ("GET", "/static/app.css"), ("POST", SIGN_IN_PATH)})
"""What needs no credential: the page's own files (static, no data in them) and the sign-in itself."""
MAX_BROWSER_KEYS = 64
"""Browser keys kept at once; signing in past it ends the oldest browser's sign-in."""


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


def _same(candidate: str, expected: str) -> bool:
    return hmac.compare_digest(candidate.encode(), expected.encode())


class BrowserSignIn:
    """The one-time sign-in code of the link co serve shows, and the browser keys it has been exchanged for.

    There is one live code at a time: using it makes the next one, and ``on_new_code`` is told (the terminal
    prints the new link). Keys are random, kept in memory only, at most ``MAX_BROWSER_KEYS``.
    """

    def __init__(self, token: str) -> None:
        self._token = token
        self.code = secrets.token_urlsafe(24)
        self._keys: OrderedDict[str, float] = OrderedDict()
        self.on_new_code: Callable[[str], None] | None = None

    def exchange(self, *, code: str = "", token: str = "") -> str:
        """A new browser key for the live code or the token; ApiError 401 for anything else."""
        if code and _same(code, self.code):
            self.code = secrets.token_urlsafe(24)
            if self.on_new_code is not None:
                self.on_new_code(self.code)
        elif not (token and _same(token, self._token)):
            what = "this sign-in link was already used or is not this server's" if code else "wrong token"
            raise ApiError(401, f"{what}: open the newest link co serve printed, or paste the token", "invalid_api_key")
        key = secrets.token_urlsafe(32)
        self._keys[key] = time.time()
        while len(self._keys) > MAX_BROWSER_KEYS:
            self._keys.popitem(last=False)
        return key

    def accepts(self, credential: str) -> bool:
        """Whether ``credential`` is the token or a browser key this server gave out."""
        if _same(credential, self._token):
            return True
        return any(_same(credential, key) for key in self._keys)


class TokenAuth:
    """ASGI middleware: a request without a valid bearer credential gets a 401 in OpenAI's error shape."""

    def __init__(self, app: ASGIApp, sign_in: BrowserSignIn) -> None:
        self.app = app
        self.sign_in = sign_in

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (scope["method"], scope["path"]) in PUBLIC_ROUTES:
            await self.app(scope, receive, send)
            return
        scheme, _, credential = Headers(scope=scope).get("authorization", "").partition(" ")
        credential = credential.strip()
        if scheme.lower() == "bearer" and credential and self.sign_in.accepts(credential):
            await self.app(scope, receive, send)
            return
        message = "wrong token" if credential else "missing token: send Authorization: Bearer <token>"
        await ApiError(401, message, "invalid_api_key").response(headers={"WWW-Authenticate": "Bearer"})(
            scope, receive, send
        )


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def split_host(value: str) -> tuple[str, int | None]:
    """A ``Host`` header's name (lower case, IPv6 without brackets) and port (None when absent or malformed)."""
    try:
        parts = urlsplit(f"//{value}")
        return (parts.hostname or "", parts.port)
    except ValueError:
        return ("", None)


class OriginGuard:
    """ASGI middleware: only requests addressed to this server, from no other origin.

    ``Host`` must name this server's port, with ``localhost``, an IP address or the name it was started on
    (``--host``): a DNS name an attacker controls, pointed at 127.0.0.1 (DNS rebinding), is refused. An
    ``Origin`` header, which browsers send on every cross-origin request and every POST, must be this same
    ``http://host:port``; a page on another port or host, or an opaque ``null`` origin, gets a 403.
    """

    def __init__(self, app: ASGIApp, host: str, port: int) -> None:
        self.app = app
        self.names = {"localhost", host.strip("[]").lower()}
        self.port = port

    def host_allowed(self, value: str) -> bool:
        name, port = split_host(value)
        return bool(name) and port == self.port and (name in self.names or _is_ip(name))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if not self.host_allowed(host):
            error = ApiError(403, "this server answers only to its own address (Host)", "forbidden_host")
        elif "origin" in headers and headers["origin"].lower() != f"http://{host.lower()}":
            error = ApiError(403, "requests from another origin are refused", "forbidden_origin")
        else:
            await self.app(scope, receive, send)
            return
        await error.response()(scope, receive, send)
