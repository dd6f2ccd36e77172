"""Running the server: the store, the models and the turns made ready, then uvicorn on one event loop."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable
from pathlib import Path

from co_cli.config import LoadedSettings
from co_cli.errors import CoError
from co_cli.serve.auth import BrowserSignIn, server_token
from co_cli.serve.chats import Chats
from co_cli.serve.context import ServeContext
from co_cli.serve.served_models import ServedModels
from co_cli.store import Store


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def make_context(loaded: LoadedSettings, cwd: Path) -> tuple[ServeContext, str]:
    """The server's context (the store opened, the configured model resolved) and where its token came from."""
    loaded.paths.ensure_data_dir()
    token, source = server_token(loaded.paths.data_dir)
    store = Store.open(loaded.paths.db)
    try:
        models = ServedModels(loaded)
        models.resolve(None)  # a model co cannot use is said now, not at the first request
    except BaseException:
        store.close()
        raise
    chats = Chats(loaded, store, cwd, models)
    context = ServeContext(
        loaded=loaded, store=store, cwd=cwd, token=token, models=models, chats=chats, sign_in=BrowserSignIn(token)
    )
    return context, source


def bind(host: str, port: int) -> socket.socket:
    """The listening socket (port 0: any free one); CoError when the address cannot be used."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, so asyncio sets TCP_NODELAY on each connection (it checks the protocol): without it a
    # response written in two pieces on a kept-alive connection waits 40 ms for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise CoError(f"cannot listen on {host}:{port}: {exc.strerror or exc}", exit_code=2) from None
    except UnicodeError:
        sock.close()
        raise CoError(f"cannot listen on {host}:{port}: not a host name", exit_code=2) from None
    sock.listen(2048)
    return sock


def url_of(sock: socket.socket, host: str) -> str:
    port = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return f"http://{shown}:{port}"


def serve(ctx: ServeContext, sock: socket.socket, host: str, on_ready: Callable[[], None] | None = None) -> None:
    """Serve on ``sock`` (bound to ``host``, the address requests must name) until interrupted (Ctrl-C,
    SIGTERM); running turns and background work are given time to be saved before the process ends."""
    import uvicorn

    from co_cli.serve.app import build_app
    from co_cli.serve.limits import StoppingServer, request_deadline_protocol

    app = build_app(ctx, host, sock.getsockname()[1], on_ready=on_ready)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=20,
        http=request_deadline_protocol(ctx.settings.serve_request_timeout),
    )
    server = StoppingServer(config, ctx.stopping)
    try:
        asyncio.run(server.serve(sockets=[sock]))
    except KeyboardInterrupt:  # uvicorn stops on Ctrl-C, then raises it again: the normal end of a server
        pass
    finally:
        sock.close()
        ctx.store.close()
