"""`co config trust`: list, allow and revoke the servers project settings files may send conversations to, and the
command prefixes run_shell may run without asking in a project."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from co_cli.errors import CoError

app = typer.Typer(
    help="Servers that project settings files may send conversations to or start (base_url and mcp_servers in "
    ".co-cli/settings.json), and the shell commands you allow without asking in a project (--command).",
    no_args_is_help=True,
)


@app.command("allow")
def trust_allow(
    mcp: Annotated[
        list[str] | None,
        typer.Option("--mcp", help="Allow only this MCP server of the project file (repeatable).", show_default=False),
    ] = None,
    command: Annotated[
        list[str] | None,
        typer.Option(
            "--command",
            help="Let shell commands starting with these words (e.g. 'git status') run without asking in this "
            "project; a command with ; & | < > $ ` ( ) or a glob still asks (repeatable).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Allow what this directory's project settings file asks for: its base_url, a provider in its
    summarization_model, and its MCP servers. With --command: a command prefix, and nothing else."""
    from co_cli import project_trust
    from co_cli.config import load_settings

    if command:
        _allow_commands(command)
        return

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


def _allow_commands(prefixes: list[str]) -> None:
    """Keep each prefix as a rule of the project of the working directory (its repository root)."""
    from co_cli import project_trust
    from co_cli.config import default_config_dir
    from co_cli.memory.instructions_files import project_root

    checked = [project_trust.checked_prefix(prefix) for prefix in prefixes]  # all or none
    project = project_root(Path.cwd())
    for prefix in checked:
        print(f"allowed: {project_trust.describe(project_trust.allow_command(default_config_dir(), project, prefix))}")


@app.command("list")
def trust_list() -> None:
    """List the allowed project directories, their servers and their command rules."""
    from co_cli import project_trust
    from co_cli.config import default_config_dir

    for entry in project_trust.load_all(default_config_dir()):
        print(project_trust.describe(entry))


@app.command("revoke")
def trust_revoke(
    directory: Annotated[
        Path | None, typer.Argument(help="Project directory (default: the current one).", show_default=False)
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Revoke what every project was allowed.")] = False,
    command: Annotated[
        str | None,
        typer.Option(
            "--command", help="Revoke only this command rule (as `co config trust list` shows it).", show_default=False
        ),
    ] = None,
) -> None:
    """Forget the servers and command rules allowed for a project directory; co asks again next time."""
    from co_cli import project_trust
    from co_cli.config import default_config_dir
    from co_cli.memory.instructions_files import project_root

    config_dir = default_config_dir()
    prefix = project_trust.checked_prefix(command) if command is not None else None
    if all_:
        removed = project_trust.revoke(config_dir, None, prefix)
    else:
        project = (directory or Path.cwd()).resolve()
        removed = project_trust.revoke(config_dir, project, prefix, commands_only=prefix is not None)
        if project_root(project) != project:  # command rules are kept for the repository's root
            removed += project_trust.revoke(config_dir, project_root(project), prefix, commands_only=True)
    for entry in removed:
        print(f"revoked: {project_trust.describe(entry)}")
    if not removed:
        print("nothing to revoke", file=sys.stderr)
