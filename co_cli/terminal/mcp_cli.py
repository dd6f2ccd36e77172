"""`co mcp list`: start the configured MCP servers, show their status, tools and schema cost, stop them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from co_cli.config import McpServer, Paths
    from co_cli.tools.mcp.toolset import ServerSummary

app = typer.Typer(
    help="The MCP servers co offers the model tools from (the mcp_servers setting).", no_args_is_help=True
)


@app.command("list")
def mcp_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Start each configured server, list its tools and the tokens their schemas cost per request, stop it.

    A project file's server that is not allowed for this directory is listed, not started."""
    import asyncio

    from co_cli.config import load_settings
    from co_cli.project_trust import confirm_project_mcp_servers

    loaded = load_settings()
    if not loaded.settings.mcp_servers:
        print("No MCP servers configured (the mcp_servers setting; see `co config show`).")
        return
    refused = confirm_project_mcp_servers(loaded, None)
    summaries, note = asyncio.run(
        _started_and_stopped(
            loaded.settings.mcp_servers, loaded.paths, refused, loaded.settings.mcp_schema_budget_tokens
        )
    )
    if as_json:
        import json
        from dataclasses import asdict

        print(json.dumps([{**asdict(s), "tokens": s.tokens} for s in summaries], indent=2))
        return
    from rich.console import Console

    from co_cli.terminal.views import mcp_table

    Console(highlight=False).print(mcp_table(summaries))
    if note:
        print(note)


async def _started_and_stopped(
    servers: dict[str, McpServer], paths: Paths, refused: dict[str, str], budget: int
) -> tuple[list[ServerSummary], str]:
    from co_cli.tools.mcp.servers import McpServers
    from co_cli.tools.mcp.toolset import budget_note, summarize

    paths.ensure_data_dir()
    hub = McpServers(servers, paths, Path.cwd(), refused)
    hub.on_notice = lambda message: None  # each failure is in the table
    hub.start()
    try:
        await hub.wait_started()
        return summarize(hub), budget_note(hub, budget) if hub.running() else ""
    finally:
        await hub.stop()
