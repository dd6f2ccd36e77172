"""``/mcp``: the MCP servers of this co, their status, their tools and what their schemas cost."""

from __future__ import annotations

from co_cli.terminal.commands.registry import CommandHost, command


@command("mcp", "", "the MCP servers: status, tools and the tokens their schemas cost per request")
async def _mcp(host: CommandHost, arg: str) -> None:
    from co_cli.terminal.views import mcp_table
    from co_cli.tools.mcp.toolset import budget_note, summarize

    servers = host.conv.workspace.mcp
    if servers is None or not len(servers):
        host.info("No MCP servers configured (the mcp_servers setting; see `co config show`).")
        return
    host.show(mcp_table(summarize(servers)))
    if servers.running():
        host.info(budget_note(servers, host.loaded.settings.mcp_schema_budget_tokens))
