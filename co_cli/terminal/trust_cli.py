"""`co config trust`: list, allow and revoke the servers project settings files may send conversations to."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from co_cli.errors import CoError

app = typer.Typer(
    help="Servers that project settings files may send conversations to (base_url in .co-cli/settings.json).",
    no_args_is_help=True,
)


@app.command("allow")
def trust_allow() -> None:
    """Allow the servers this directory's project settings file chooses (base_url, and a provider in
    summarization_model)."""
    from co_cli import project_trust
    from co_cli.config import load_settings

    loaded = load_settings()
    chosen = [c for c in (project_trust.project_server(loaded), project_trust.project_summarizer(loaded)) if c]
    if not chosen:
        raise CoError(
            f"nothing to allow: {loaded.paths.project_settings} sets neither base_url nor a provider in "
            "summarization_model",
            exit_code=2,
        )
    for base_url in chosen:
        entry = project_trust.TrustedServer(str(project_trust.project_dir(loaded)), base_url)
        project_trust.trust(loaded.paths.user_settings.parent, Path(entry.project), base_url)
        print(f"allowed: {project_trust.describe(entry)}")


@app.command("list")
def trust_list() -> None:
    """List the allowed project directories and servers."""
    from co_cli import project_trust
    from co_cli.config import default_config_dir

    for entry in project_trust.load_trusted(default_config_dir()):
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
