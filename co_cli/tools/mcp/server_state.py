"""One configured MCP server as co keeps it: its status for the user, its tools, its session and its process."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from co_cli.config import McpServer
from co_cli.tools.mcp.stderr_log import StderrLog

if TYPE_CHECKING:
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.tools import ToolDefinition

    from co_cli.deps import CoDeps

ServerStatus = Literal["starting", "running", "failed", "stopped", "not allowed", "disabled"]


@dataclass
class ServerState:
    """One configured server, as the user sees it in ``/mcp`` and ``co mcp list``."""

    name: str
    spec: McpServer
    status: ServerStatus = "starting"
    detail: str = ""
    """Why it failed, was not allowed, or stopped (one line)."""
    tool_defs: list[ToolDefinition] = field(default_factory=list)
    """Its tools as the server describes them (its own names)."""
    toolset: MCPToolset[CoDeps] | None = None
    pid: int | None = None
    mark: str | None = None
    """In the environment of its process and of every process it starts (``tools.processes``)."""
    stderr: StderrLog | None = None
    stderr_start: int = 0
    """What it had written to stderr when it started running (what it writes after may say why it stops)."""
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    @property
    def transport(self) -> str:
        return self.spec.transport


def one_line(exc: BaseException) -> str:
    """An exception as one short line (exception groups by their first leaf)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:199] + "…"
