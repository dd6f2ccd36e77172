"""`co serve`: parses its options, says where the server listens and with which token, and hands over."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from co_cli.terminal_text import printable


def serve(
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on; anything but loopback is reachable by others.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on (0: any free one).")] = 8765,
) -> None:
    """Serve co to OpenAI-compatible clients and the browser on this machine: same sessions, memory and context
    governance as the terminal."""
    from co_cli.config import load_settings
    from co_cli.project_trust import confirm_project_server
    from co_cli.serve.server import bind, is_loopback, make_context, url_of
    from co_cli.serve.server import serve as run_server
    from co_cli.terminal.chat import ask_on_terminal

    loaded = load_settings()
    for warning in loaded.warnings:
        print(printable(f"warning: {warning}"), file=sys.stderr)
    # A server a project file chose gets every request's prompts and files: only once allowed, as for `co chat`.
    confirm_project_server(loaded, ask_on_terminal if sys.stdin.isatty() and sys.stdout.isatty() else None)
    sock = bind(host, port)
    try:
        ctx, token_source = make_context(loaded, Path.cwd())
    except BaseException:
        sock.close()
        raise
    url = url_of(sock, host)

    def listening() -> None:
        if not is_loopback(host):
            print(
                printable(
                    f"warning: listening on {host}: anyone who can reach this address and has the token can read "
                    "your sessions and memories, and files here through co's tools"
                ),
                file=sys.stderr,
            )
        print(printable(f"co serve: {url}  (model {ctx.models.default_name}, sessions in {loaded.paths.db})"))
        print(printable(f"  OpenAI API:  {url}/v1   (Authorization: Bearer <token>)"))
        print(printable(f"  browser:     {url}/#code={ctx.sign_in.code}   (works once; a new link is printed then)"))
        print(printable(f"  token:       {ctx.token}   (from {token_source})"))
        print("Ctrl-C stops the server.", flush=True)

    def signed_in(code: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        print(printable(f"{stamp} a browser signed in; the next browser's link: {url}/#code={code}"), flush=True)

    ctx.sign_in.on_new_code = signed_in
    run_server(ctx, sock, host, on_ready=listening)
