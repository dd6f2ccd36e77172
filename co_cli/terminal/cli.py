"""Command line: parses arguments, loads settings and hands over. No pydantic-ai import at module level."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from co_cli import __version__
from co_cli.errors import CoError
from co_cli.terminal.trust_cli import app as trust_app
from co_cli.terminal_text import printable

LATEST = "@latest"

app = typer.Typer(
    name="co",
    help=(
        "co: chat with LLMs in your terminal; every conversation is saved and stays inside the context window. "
        "`co` alone starts a chat, as `co chat` does (and takes its options: `co -c`, `co -p PROMPT`)."
    ),
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
config_app = typer.Typer(help="Show the effective settings and where they come from.", no_args_is_help=True)
app.add_typer(config_app, name="config")
config_app.add_typer(trust_app, name="trust")


def _mount_sessions() -> None:
    from co_cli.terminal.memory_cli import app as memory_app
    from co_cli.terminal.sessions_cli import app as sessions_app

    app.add_typer(sessions_app, name="sessions", help="List, show, search, export, import, rename and delete sessions.")
    app.add_typer(memory_app, name="memory", help="List, search, add, edit, forget, review and undo memories.")
    from co_cli.terminal.usage_cli import usage

    app.command("usage")(usage)
    from co_cli.terminal.mcp_cli import app as mcp_app

    app.add_typer(mcp_app, name="mcp", help="List the MCP servers, their tools and what their schemas cost.")
    from co_cli.terminal.serve_cli import serve

    app.command("serve")(serve)


def _version(value: bool) -> None:
    if value:
        print(f"co {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """co: chat with LLMs in your terminal."""


@app.command()
def chat(
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Model for this run (overrides the setting).")
    ] = None,
    prompt: Annotated[
        str | None,
        typer.Option(
            "--print",
            "-p",
            help=(
                "One turn, non-interactive: print the answer and exit. Text piped to co is sent with the prompt, "
                "in a fenced block after it."
            ),
        ),
    ] = None,
    lines: Annotated[
        bool,
        typer.Option(
            "--lines",
            help=(
                "Piped stdin: each line is its own input (a prompt or a /command), for scripted sessions. "
                "Without it, everything piped is one prompt."
            ),
        ),
    ] = False,
    resume: Annotated[
        str | None,
        typer.Option("--resume", "-r", help="Continue a session by id or unique prefix; alone, the latest one."),
    ] = None,
    continue_: Annotated[
        bool, typer.Option("--continue", "-c", help="Continue the most recently updated session.")
    ] = False,
    fork: Annotated[
        bool, typer.Option("--fork", help="With --resume: continue in a copy; the original is untouched.")
    ] = False,
    approve_all: Annotated[
        bool,
        typer.Option("--approve-all", help="Approve every tool call without asking (for non-interactive use)."),
    ] = False,
    no_save: Annotated[bool, typer.Option("--no-save", help="Do not save this conversation.")] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="With --resume: take the session over even if another co has it open."),
    ] = False,
    no_memory: Annotated[
        bool, typer.Option("--no-memory", help="No long-term memory in this run: nothing recalled or saved.")
    ] = False,
    fork_at: Annotated[
        int | None,
        typer.Option(
            "--fork-at",
            min=-1,
            help="With --resume: continue in a fork holding messages up to #n (`co sessions show`).",
        ),
    ] = None,
    pick: Annotated[
        bool, typer.Option("--pick", help="Choose the session to continue in a full-screen picker.")
    ] = False,
) -> None:
    """Chat with a model (REPL). Non-interactive: -p PROMPT is one turn (with any piped text added to it); piped
    stdin alone is one prompt; with --lines, each piped line is one input."""
    from co_cli.terminal.chat import ChatOptions, run_chat

    if prompt is not None and not prompt.strip():
        raise CoError("the prompt given with -p is empty", exit_code=2)
    if continue_ and resume is None:
        resume = LATEST
    if fork and resume is None:
        raise CoError("--fork needs --resume <id> (or -c)", exit_code=2)
    if force and resume is None:
        raise CoError("--force needs --resume <id> (or -c)", exit_code=2)
    if no_save and resume is not None:
        raise CoError("--no-save cannot be combined with --resume", exit_code=2)
    if fork_at is not None and resume is None:
        raise CoError("--fork-at needs --resume <id>", exit_code=2)
    if lines and prompt is not None:
        raise CoError("--lines cannot be combined with -p: with -p, piped text is part of the prompt", exit_code=2)
    if pick and (resume is not None or prompt is not None or no_save):
        raise CoError("--pick cannot be combined with --resume, -c, -p or --no-save", exit_code=2)
    code = run_chat(
        ChatOptions(
            model=model,
            prompt=prompt,
            resume=resume,
            fork=fork,
            approve_all=approve_all,
            save=not no_save,
            force=force,
            memory=False if no_memory else None,
            fork_at=fork_at,
            pick=pick,
            lines=lines,
        )
    )
    raise typer.Exit(code)


@config_app.command("show")
def config_show(
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Print the effective settings, where each value came from; secrets masked."""
    import json

    from pydantic import SecretStr

    from co_cli.config import env_var, load_settings
    from co_cli.secrets import mask_url_credentials

    loaded = load_settings()
    for warning in loaded.warnings:  # e.g. a project file's value that is ignored: the table shows the one in use
        print(printable(f"warning: {warning}"), file=sys.stderr)
    rows = []
    for name in type(loaded.settings).model_fields:
        value = getattr(loaded.settings, name)
        if isinstance(value, SecretStr):
            value = "********" if value.get_secret_value() else ""
        elif name == "base_url":
            value = mask_url_credentials(value)
        elif name == "mcp_servers":
            value = json.dumps({server: spec.masked() for server, spec in value.items()})
        rows.append({"name": name, "value": str(value), "source": loaded.sources[name], "env": env_var(name)})
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    _print_settings(rows)
    _print_command_rules(loaded.paths.user_settings.parent)


def _print_command_rules(config_dir: Path) -> None:
    """The command prefixes run_shell runs without asking in this project (``co config trust allow --command``)."""
    from co_cli.memory.instructions_files import project_root
    from co_cli.project_trust import load_trusted_commands

    project = project_root(Path.cwd())
    prefixes = [rule.prefix for rule in load_trusted_commands(config_dir) if rule.project == str(project)]
    if prefixes:
        print(printable(f"shell commands run without asking in {project}: " + ", ".join(prefixes)))
        print("  (co config trust allow --command PREFIX adds one; co config trust revoke --command PREFIX removes it)")


def _print_settings(rows: list[dict[str, str]]) -> None:
    """A table when it fits (a pipe gets it with whole lines, however wide); on a narrower terminal each
    setting as a line with its value, and under it where the value came from and its variable."""
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    from co_cli.terminal.output import output_console

    console = output_console()
    columns = ("name", "value", "source", "env")
    widths = [max(len(printable(row[key])) for row in rows) for key in columns]
    if sum(widths) + 3 * 3 + 4 <= console.width:
        table = Table("setting", "value", "source", "environment variable")
        for row in rows:
            table.add_row(row["name"], Text(printable(row["value"])), row["source"], row["env"])
        console.print(table)
        return
    for row in rows:
        line = Text(row["name"], style="bold")
        line.append(" = " + printable(row["value"]))
        console.print(line)
        console.print(Padding(Text(f"{row['source']} · {row['env']}", style="dim"), (0, 0, 0, 4)))


@config_app.command("path")
def config_path() -> None:
    """Print the files and directories co uses."""
    from co_cli.config import load_settings

    paths = load_settings().paths
    for label, path in (
        ("user settings", paths.user_settings),
        ("project settings", paths.project_settings),
        ("config dir", paths.config_dir),
        ("data dir", paths.data_dir),
        ("sessions database", paths.db),
        ("input history", paths.input_history),
        ("offloaded tool outputs", paths.tool_outputs),
        ("local model cache", paths.local_model_cache),
    ):
        state = "" if Path(path).exists() else "  (not created yet)"
        print(f"{label + ':':<24}{path}{state}")
    from co_cli.memory.instructions_files import instructions_files_for

    loaded = load_settings()
    found = instructions_files_for(Path.cwd(), loaded.settings, loaded.paths)
    for file in found.files:
        note = f"  (cut: {file.shown_tokens:,} of {file.tokens:,} tokens used)" if file.cut else ""
        print(printable(f"{'instructions file:':<24}{file.path}{note}"))
    for skipped in found.skipped:
        print(printable(f"{'instructions skipped:':<24}{skipped.path}: {skipped.reason}"))


ROOT_OPTIONS = ("--help", "--version")


def _normalize_argv(argv: list[str]) -> list[str]:
    """``co`` alone, or with chat's options (``co -c``, ``co -p "..."``), is ``co chat``; and --resume/-r may
    stand alone (continue the latest session) as well as take an id."""
    if not argv or (argv[0].startswith("-") and argv[0] not in ROOT_OPTIONS):
        argv = ["chat", *argv]
    out: list[str] = []
    for i, arg in enumerate(argv):
        out.append(arg)
        if arg in ("--resume", "-r"):
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if nxt is None or nxt.startswith("-"):
                out.append(LATEST)
    return out


def _usage_error(exc: Exception) -> None:
    """A usage error as co words every error: one ``error:`` line, then where the help is."""
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    name, possible = getattr(exc, "option_name", None), getattr(exc, "possibilities", None)
    if name and possible:  # click lists every similar option; name the closest one
        import difflib

        closest = difflib.get_close_matches(name, possible, n=1, cutoff=0) or sorted(possible)
        message = f"no such option: {name}; did you mean {closest[0]}?"
    print(printable(f"error: {message[:1].lower()}{message[1:]}"), file=sys.stderr)
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        print(f"Try '{ctx.command_path} --help' for help.", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    from typer._click.exceptions import ClickException
    from typer.exceptions import Abort, Exit

    os.environ.setdefault("PYDANTIC_AI_NO_BANNER", "1")
    args = _normalize_argv(list(sys.argv[1:] if argv is None else argv))
    if args[0] != "chat":  # a chat needs none of the other commands: building them is time before the prompt
        _mount_sessions()
    command = typer.main.get_command(app)
    try:
        code = command.main(args=args, prog_name="co", standalone_mode=False)
    except CoError as exc:
        print(printable(f"error: {exc.message}"), file=sys.stderr)
        sys.exit(exc.exit_code)
    except Exit as exc:
        sys.exit(exc.exit_code)
    except ClickException as exc:  # usage errors: unknown option, missing argument, bad value
        _usage_error(exc)
        sys.exit(exc.exit_code)
    except (Abort, KeyboardInterrupt):
        print("aborted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(1)
    except Exception as exc:  # a bug, not a user error: one line, the traceback only on request
        if os.environ.get("CO_CLI_DEBUG"):
            raise
        print(
            printable(f"error: internal error: {type(exc).__name__}: {exc} (set CO_CLI_DEBUG=1 for details)"),
            file=sys.stderr,
        )
        sys.exit(70)
    sys.exit(code if isinstance(code, int) else 0)
