"""`co config trust`: list, allow and revoke the servers project settings files may send conversations to."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from co_cli.errors import CoError

app = typer.Typer(
    help="Servers that project settings files may send conversations to or start (base_url and mcp_servers in "
    ".co-cli/settings.json).",
    no_args_is_help=True,
)


@app.command("allow")
def trust_allow(
    mcp: Annotated[
        list[str] | None,
        typer.Option("--mcp", help="Allow only this MCP server of the project file (repeatable).", show_default=False),
    ] = None,
) -> None:
    """Allow what this directory's project settings file asks for: its base_url, a provider in its
    summarization_model, and its MCP servers."""
    from co_cli import project_trust
    from co_cli.config import load_settings

    loaded = load_settings()
    project = project_trust.project_dir(loaded)
    base_url = project_trust.project_server(loaded)
    summarizer = project_trust.project_summarizer(loaded)
    servers = list(loaded.project_mcp_servers)
    for name in mcp or []:
        if name not in servers:
            known = ", ".join(servers) or "none"
            raise CoError(
                f"{loaded.paths.project_settings} defines no MCP server {name!r} (it defines: {known})", exit_code=2
            )
    if not base_url and not summarizer and not servers:
        raise CoError(
            f"nothing to allow: {loaded.paths.project_settings} sets neither base_url, a provider in "
            "summarization_model nor mcp_servers",
            exit_code=2,
        )
    for chosen in (base_url, summarizer) if not mcp else ():
        if chosen:
            entry = project_trust.TrustedServer(str(project), chosen)
            project_trust.trust(loaded.paths.user_settings.parent, project, chosen)
            print(f"allowed: {project_trust.describe(entry)}")
    for name in mcp or servers:
        print(f"allowed: {project_trust.describe(project_trust.trust_mcp(loaded, name))}")
        for line in project_trust.describe_mcp_server(loaded.settings.mcp_servers[name]):
            print(f"  {line}")


@app.command("list")
def trust_list() -> None:
    """List the allowed project directories and servers."""
    from co_cli import project_trust
    from co_cli.config import default_config_dir

    config_dir = default_config_dir()
    entries: list[project_trust.TrustedServer | project_trust.TrustedMcpServer] = [
        *project_trust.load_trusted(config_dir),
        *project_trust.load_trusted_mcp(config_dir),
    ]
    for entry in entries:
        print(project_trust.describe(entry))


@app.command("revoke")
def trust_revoke(
    directory: Annotated[
        Path | None, typer.Argument(help="Project directory (default: the current one).", show_default=False)
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Revoke every project's server.")] = False,
) -> None:
    """Forget the servers allowed for a project directory; co asks again next time."""
    from co_cli import project_trust
    from co_cli.config import default_config_dir

    project = None if all_ else (directory or Path.cwd()).resolve()
    removed = project_trust.revoke(default_config_dir(), project)
    for entry in removed:
        print(f"revoked: {project_trust.describe(entry)}")
    if not removed:
        print("nothing to revoke", file=sys.stderr)
