"""MCP servers for the tests: the scripted stdio server, an HTTP one, and a conversation run with them attached."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import CancellationToken
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from co_cli.config import McpServer
from co_cli.deps import CoDeps
from co_cli.models import ModelChoice, ResolvedModel
from co_cli.session import Conversation
from co_cli.tools.mcp.servers import McpServers
from tests.support.turn_core import Core, RecordingView

SERVER = str(Path(__file__).parent / "mcp_server.py")


def stdio(*extra: str, **spec: Any) -> McpServer:
    return McpServer(command=sys.executable, args=[SERVER, "stdio", *extra], **spec)


@dataclass
class Script:
    """The model: each request answered by the next step (a tool call, or text); what each request offered."""

    steps: list[tuple[str, dict[str, Any]] | str]
    offered: list[list[str]] = field(default_factory=list)
    seen: list[list[ModelMessage]] = field(default_factory=list)

    def model(self) -> FunctionModel:
        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
            self.offered.append([tool.name for tool in info.function_tools])
            self.seen.append(list(messages))
            step = self.steps.pop(0) if self.steps else "done"
            if isinstance(step, tuple):
                name, args = step
                yield {0: DeltaToolCall(name=name, json_args=json.dumps(args), tool_call_id=f"c{len(messages)}")}
                return
            yield step

        return PlainToolsModel(stream_function=stream, model_name="scripted")


class PlainToolsModel(FunctionModel):
    """A model with no provider-side tools (as a chat-completions server or the embedded model): tool search
    runs in co, through the search_tools function."""

    @classmethod
    def supported_native_tools(cls) -> frozenset[Any]:
        return frozenset()


Scenario = Callable[[Conversation, McpServers], Awaitable[Any]]


def run_with_servers(
    core: Core, servers: dict[str, McpServer], script: Script, scenario: Scenario, ask: Any = None, **settings: Any
) -> Any:
    async def main() -> Any:
        loaded = core.loaded
        hub = McpServers(servers, loaded.paths, core.cwd)
        hub.start()
        try:
            resolved = ResolvedModel(
                model=script.model(), choice=ModelChoice("scripted", "test"), context_window=100_000, window_source="t"
            )
            deps = CoDeps(
                settings=loaded.settings.model_copy(update=settings), paths=loaded.paths, cwd=core.cwd, store=core.store
            )
            conv = Conversation(resolved=resolved, deps=deps, ask_approval=ask, mcp=hub)
            return await scenario(conv, hub)
        finally:
            await hub.stop()

    return asyncio.run(main())


async def turn(conv: Conversation, prompt: str, view: RecordingView | None = None) -> Any:
    return await conv.run_turn(prompt, view or RecordingView(), CancellationToken())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def http_server() -> Iterator[str]:
    """The test MCP server over streamable HTTP on 127.0.0.1; its URL."""
    port = _free_port()
    process = subprocess.Popen([sys.executable, SERVER, "http", str(port)], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)
