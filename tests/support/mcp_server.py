"""A real MCP server for the tests (the ``mcp`` package's own server side), over stdio or streamable HTTP.

    python tests/support/mcp_server.py stdio [--tools N] [--fail-start]
    python tests/support/mcp_server.py http PORT [--tools N]

Tools: ``echo``, ``add`` (annotated read-only: co must ask anyway), ``big`` (a huge output), ``slow``, ``crash``
(the process exits mid-call), ``env_value``; ``--tools N`` adds N generated tools with realistic schemas (the
50-tool server of the schema-cost measurements). ``--fail-start`` writes to stderr and exits before serving;
``--linger`` stays alive after its stdin closes, as careless servers do; ``--detach FILE`` starts a process in a
session of its own (as ``setsid`` does) and writes its pid to FILE; ``--stderr-bytes N`` writes N bytes of noise
to stderr before anything else. With
``MCP_TEST_PID_FILE`` in its environment, the server appends its pid to that file.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations


def build(generated: int = 0) -> MCPServer:
    server = MCPServer("co-test-server")

    @server.tool(description="Echo the text back.")
    def echo(text: str) -> str:
        return f"echo: {text}"

    @server.tool(description="Add two numbers.", annotations=ToolAnnotations(readOnlyHint=True))
    def add(a: int, b: int) -> str:
        return str(a + b)

    @server.tool(description="Return a long text of about `chars` characters.")
    def big(chars: int) -> str:
        line = "0123456789 the quick brown fox jumps over the lazy dog\n"
        return "".join(f"{i:06d} {line}" for i in range(chars // (len(line) + 7) + 1))[:chars]

    @server.tool(description="Wait `seconds` seconds, then answer.")
    def slow(seconds: float) -> str:
        time.sleep(seconds)
        return "done"

    @server.tool(description="Exit the server process in the middle of the call.")
    def crash() -> str:
        os._exit(3)

    @server.tool(description="The value of an environment variable of the server process.")
    def env_value(name: str) -> str:
        return os.environ.get(name, "<unset>")

    for index in range(generated):
        _add_generated(server, index)
    return server


def _add_generated(server: MCPServer, index: int) -> None:
    def tool(
        query: str, repository: str = "", labels: list[str] | None = None, limit: int = 30, include_closed: bool = False
    ) -> str:
        return f"tool {index}: {query}"

    description = (
        f"Search the issue tracker's collection number {index} for items matching a query. Returns matching items "
        "with their titles, states, labels, authors and links, newest first. Use `repository` to narrow the search "
        "to one repository and `labels` to require labels."
    )
    server.add_tool(tool, name=f"search_collection_{index}", description=description)


def _noise(count: int) -> None:
    """``count`` bytes to stderr, in lines, cheaply (a server that logs without end)."""
    line = b"co-test-server: debug: nothing to see here, just a very talkative server writing one more line\n"
    block = line * ((1 << 20) // len(line))
    out = sys.stderr.buffer
    left = count - 1
    while left > 0:
        piece = block[:left]
        out.write(piece)
        left -= len(piece)
    out.write(b"\n" if count > 0 else b"")  # the last line ends
    out.flush()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("port", nargs="?", type=int, default=0)
    parser.add_argument("--tools", type=int, default=0)
    parser.add_argument("--fail-start", action="store_true")
    parser.add_argument("--linger", action="store_true", help="stay alive after stdin closes (a careless server)")
    parser.add_argument("--detach", metavar="FILE", help="start a process that leaves the server's session")
    parser.add_argument("--stderr-bytes", type=int, default=0, help="bytes of noise written to stderr at start")
    args = parser.parse_args()
    print(f"co-test-server starting ({args.transport})", file=sys.stderr, flush=True)
    _noise(args.stderr_bytes)
    if args.detach:
        detached = subprocess.Popen(
            ["sleep", "300"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        with open(args.detach, "w") as f:
            f.write(f"{detached.pid}\n")
    pid_file = os.environ.get("MCP_TEST_PID_FILE")
    if pid_file:  # tests check that co leaves no server process behind
        with open(pid_file, "a") as f:
            f.write(f"{os.getpid()}\n")
    if args.fail_start:
        print("co-test-server: cannot start: missing configuration", file=sys.stderr, flush=True)
        sys.exit(2)
    server = build(args.tools)
    if args.transport == "stdio":
        server.run("stdio")
        if args.linger:
            time.sleep(120)
        return
    import uvicorn

    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
