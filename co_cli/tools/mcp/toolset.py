"""The MCP servers' tools as the model sees them: named after their server, each call approved by the user.

One toolset over every running server (``McpServers``). A tool ``search`` of server ``github`` is offered as
``mcp__github__search``. Every call asks the user unless the user's own settings trust that server or tool; the
server's annotations (``readOnlyHint`` and the like) never skip the question. A call is bounded by the
server's ``timeout``; a server found dead answers the model with an error and is dropped, with one line for
the user. The toolset never starts or stops a server: the runs only use the sessions ``McpServers`` holds.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from dataclasses import dataclass, replace
from typing import Any, Self

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry, ToolFailed
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from co_cli.deps import CoDeps
from co_cli.tools.mcp.server_state import ServerState
from co_cli.tools.mcp.servers import McpServers
from co_cli.vocabulary import MCP_TOOL_PREFIX

PREFIX = MCP_TOOL_PREFIX
SEPARATOR = "__"
MAX_NAME = 64
"""The longest tool name providers accept."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def offered_name(server: str, tool: str) -> str:
    """The name the model calls a server's tool by: ``mcp__<server>__<tool>`` (unsafe characters as ``_``; a
    name past 64 characters is cut and ends with a digest of the whole, so it stays unique)."""
    name = f"{PREFIX}{server}{SEPARATOR}{_UNSAFE.sub('_', tool)}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(f"{server}/{tool}".encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9]}_{digest}"


def is_mcp_tool(name: str) -> bool:
    return name.startswith(PREFIX)


def server_of(name: str) -> str | None:
    """The server a name offered by ``offered_name`` comes from (None for co's own tools)."""
    if not is_mcp_tool(name):
        return None
    server, sep, _ = name[len(PREFIX) :].partition(SEPARATOR)
    return server if sep else None


def approval_key(server: str, tool: str) -> str:
    """What "always" remembers for the session: this tool of this server."""
    return f"mcp:{server}/{tool}"


class McpToolset(AbstractToolset[CoDeps]):
    """Every running MCP server's tools, governed as co's own."""

    def __init__(self, servers: McpServers) -> None:
        self.servers = servers
        self._routes: dict[str, tuple[ServerState, ToolsetTool[CoDeps]]] = {}

    @property
    def id(self) -> str | None:
        return "mcp"

    async def __aenter__(self) -> Self:
        return self  # the servers' sessions belong to McpServers, not to a run

    async def __aexit__(self, *args: Any) -> bool | None:
        return None

    async def get_instructions(self, ctx: RunContext[CoDeps]) -> str | None:
        """Over the schema budget, the deferred tools' names and one-line descriptions, within the same budget
        (their schemas load on demand through search_tools)."""
        budget = ctx.deps.settings.mcp_schema_budget_tokens
        if not over_budget(self.servers, budget):
            return None
        return deferred_listing(self.servers, budget)

    async def get_tools(self, ctx: RunContext[CoDeps]) -> dict[str, ToolsetTool[CoDeps]]:
        await self.servers.wait_started()
        tools: dict[str, ToolsetTool[CoDeps]] = {}
        routes: dict[str, tuple[ServerState, ToolsetTool[CoDeps]]] = {}
        for state in self.servers.running():
            assert state.toolset is not None
            try:
                server_tools = await state.toolset.get_tools(ctx)
            except Exception as exc:
                await self.servers.died(state.name, exc)
                continue
            for tool in server_tools.values():
                name = offered_name(state.name, tool.tool_def.name)
                tools[name] = replace(tool, toolset=self, tool_def=self._offered(name, tool.tool_def, state))
                routes[name] = (state, tool)
        self._routes = routes
        if over_budget(self.servers, ctx.deps.settings.mcp_schema_budget_tokens):
            # pydantic-ai's tool search (on every agent) hides deferred tools until the model loads them.
            tools = {name: replace(t, tool_def=replace(t.tool_def, defer_loading=True)) for name, t in tools.items()}
        return tools

    @staticmethod
    def _offered(name: str, tool_def: ToolDefinition, state: ServerState) -> ToolDefinition:
        description = tool_def.description or ""
        return replace(tool_def, name=name, description=f"[MCP server {state.name}] {description}".strip())

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[CoDeps], tool: ToolsetTool[CoDeps]
    ) -> Any:
        route = self._routes.get(name)
        if route is None:
            raise ToolFailed(f"The MCP tool {name} is not available now (its server is not running).")
        state, server_tool = route
        own_name = server_tool.tool_def.name
        if not ctx.tool_call_approved and not _trusted(state, own_name):
            raise ApprovalRequired(
                metadata={
                    "reason": f"a tool of MCP server {state.name} (the server's own hints never skip this question)",
                    "always": approval_key(state.name, own_name),
                    "always_label": f"this tool of {state.name}",
                }
            )
        toolset = state.toolset
        if toolset is None or state.status != "running":
            raise ToolFailed(f"The MCP server {state.name} is not running: {state.detail or 'it stopped'}.")
        try:
            return await asyncio.wait_for(toolset.call_tool(own_name, tool_args, ctx, server_tool), state.spec.timeout)
        except TimeoutError:
            raise ToolFailed(
                f"The MCP server {state.name} did not answer within {state.spec.timeout:g} s; the call was abandoned."
            ) from None
        except (ModelRetry, ToolFailed) as exc:
            if not _connection_lost(exc):
                raise  # the tool's own error: the model sees it
            await self.servers.died(state.name, exc)
            raise ToolFailed(f"The MCP server {state.name} is not available: {state.detail}.") from None
        except (ApprovalRequired, CallDeferred):
            raise
        except Exception as exc:
            await self.servers.died(state.name, exc)
            raise ToolFailed(f"The MCP server {state.name} is not available: {state.detail}.") from None


def _connection_lost(exc: BaseException) -> bool:
    """The error says the server's connection closed (its process exited), not that the tool failed."""
    from mcp.types import CONNECTION_CLOSED

    seen: BaseException | None = exc
    while seen is not None:
        code = getattr(seen, "code", None)
        if code is None:
            code = getattr(getattr(seen, "error", None), "code", None)
        if code == CONNECTION_CLOSED:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _trusted(state: ServerState, tool: str) -> bool:
    """The user marked this server, or this tool of it, as trusted in their own settings."""
    return state.spec.trust or tool in state.spec.trusted_tools


def offered_defs(state: ServerState) -> list[ToolDefinition]:
    """A running server's tools as they are offered to the model (named after the server)."""
    return [McpToolset._offered(offered_name(state.name, d.name), d, state) for d in state.tool_defs]


def schema_tokens(state: ServerState) -> int:
    """Tokens a server's tool schemas add to every request."""
    from co_cli.context.tokens import estimate_overhead

    return estimate_overhead("", offered_defs(state))


def total_schema_tokens(servers: McpServers | None) -> int:
    """Tokens every running server's tool schemas would add to every request, sent whole."""
    return sum(schema_tokens(state) for state in servers.running()) if servers is not None else 0


SEARCH_TOOL_TOKENS = 150
"""About what pydantic-ai's search_tools schema adds to a request once some tools are deferred."""
DEFERRED_HEADER = (
    "Tools of the user's MCP servers, by name (call search_tools with words from a name or description to load "
    "a tool's schema before its first use):"
)


def over_budget(servers: McpServers | None, budget: int) -> bool:
    """The servers' schemas, sent whole, would pass ``budget`` tokens (0: no budget)."""
    return budget > 0 and total_schema_tokens(servers) > budget


LISTING_END_TOKENS = 80
"""Room kept in the budget for the line that counts the tools left out of the listing."""
LISTED_SERVERS = 5
"""Servers named in that line (the rest are counted)."""


@dataclass(frozen=True)
class Listing:
    text: str
    listed: int
    left_out: int


def listing(servers: McpServers, budget: int) -> Listing:
    """What the model is told of deferred tools: each name and the first line of its description, in server
    order, while they fit in ``budget`` tokens with the search tool (0: all of them); then one line counting
    the rest, which search_tools finds like the listed ones."""
    from co_cli.text_tokens import estimate_text_tokens

    lines = [DEFERRED_HEADER]
    room = budget - SEARCH_TOOL_TOKENS - LISTING_END_TOKENS - estimate_text_tokens(DEFERRED_HEADER)
    left_out: dict[str, int] = {}
    for state in servers.running():
        for own, offered in zip(state.tool_defs, offered_defs(state), strict=True):
            first = (own.description or "").strip().split("\n", 1)[0]
            if len(first) > 100:
                first = first[:99] + "…"
            line = f"- {offered.name}: {first}" if first else f"- {offered.name}"
            cost = estimate_text_tokens(line) + 1
            if budget > 0 and (left_out or cost > room):  # once one is left out, so are the rest: a prefix
                left_out[state.name] = left_out.get(state.name, 0) + 1
                continue
            lines.append(line)
            room -= cost
    if left_out:
        lines.append(_left_out_line(left_out))
    return Listing("\n".join(lines), len(lines) - 1 - bool(left_out), sum(left_out.values()))


def _left_out_line(left_out: dict[str, int]) -> str:
    named = [f"{count:,} of {name}" for name, count in list(left_out.items())[:LISTED_SERVERS]]
    others = len(left_out) - len(named)
    if others:
        named.append(f"{sum(list(left_out.values())[LISTED_SERVERS:]):,} of {others:,} other servers")
    return (
        f"- ... and {sum(left_out.values()):,} more tools ({', '.join(named)}), not listed to keep within the "
        "budget: search_tools finds them by words from their names or descriptions."
    )


def deferred_listing(servers: McpServers, budget: int) -> str:
    return listing(servers, budget).text


def sent_schema_tokens(servers: McpServers | None, budget: int) -> int:
    """Tokens the MCP tools add to every request as they are sent: their schemas whole, or over ``budget`` the
    listing of names and one-line descriptions (itself within ``budget``) plus the search tool."""
    if servers is None:
        return 0
    if not over_budget(servers, budget):
        return total_schema_tokens(servers)
    from co_cli.text_tokens import estimate_text_tokens

    return estimate_text_tokens(deferred_listing(servers, budget)) + SEARCH_TOOL_TOKENS


@dataclass(frozen=True)
class ToolSummary:
    name: str
    """As offered to the model."""
    description: str
    """Its first line."""
    tokens: int
    """What its schema adds to every request."""


@dataclass(frozen=True)
class ServerSummary:
    """One server as ``/mcp`` and ``co mcp list`` show it."""

    name: str
    transport: str
    status: str
    detail: str
    tools: list[ToolSummary]

    @property
    def tokens(self) -> int:
        return sum(tool.tokens for tool in self.tools)


def summarize(servers: McpServers) -> list[ServerSummary]:
    from co_cli.context.tokens import estimate_overhead

    out = []
    for state in servers.states.values():
        tools = [
            ToolSummary(
                offered.name, (own.description or "").strip().split("\n", 1)[0], estimate_overhead("", [offered])
            )
            for own, offered in zip(state.tool_defs, offered_defs(state), strict=True)
        ]
        out.append(ServerSummary(state.name, state.transport, state.status, state.detail, tools))
    return out


def budget_note(servers: McpServers, budget: int) -> str:
    """One line on what the model is sent of the MCP tools: their schemas whole, or past the budget names only."""
    whole = total_schema_tokens(servers)
    if not over_budget(servers, budget):
        return f"The model is sent these schemas whole: ~{whole:,} tokens per request."
    listed = listing(servers, budget)
    which = f" of {listed.listed:,} of the {listed.listed + listed.left_out:,} tools" if listed.left_out else ""
    return (
        f"The schemas (~{whole:,} tokens) pass mcp_schema_budget_tokens ({budget:,}): the model is sent names and "
        f"one-line descriptions{which} (~{sent_schema_tokens(servers, budget):,} tokens) and loads a schema with "
        "search_tools when it needs it."
    )
