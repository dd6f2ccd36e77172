"""``co sessions``: list, show, search, export, import, rename and delete saved sessions.

CoError is left to propagate: the main CLI prints it as one line with its exit code.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from co_cli.errors import CoError

if TYPE_CHECKING:
    from rich.console import Console

    from co_cli.config import Paths
    from co_cli.store.sessions import SessionStore

app = typer.Typer(
    name="sessions",
    help="List, show, search, export, import, rename and delete saved sessions.",
    no_args_is_help=True,
    add_completion=False,
)


class ExportFormat(StrEnum):
    md = "md"
    json = "json"


def _console() -> Console:
    from rich.console import Console

    return Console()


def _open_store() -> tuple[SessionStore, Paths]:
    # Imported here so `co --help` stays fast.
    from co_cli.config import load_settings
    from co_cli.store.sessions import SessionStore

    paths = load_settings().paths
    return SessionStore.open(paths.db), paths


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by the user only (0600), replacing any old content."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise CoError(f"cannot write {path}: {exc.strerror}") from None


@app.command("list")
def list_sessions(
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=1_000_000, help="How many sessions to show.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List sessions, most recently updated first."""
    store, _ = _open_store()
    with store:
        sessions = store.list(limit=limit)
        total = store.count()
    if as_json:
        typer.echo(json.dumps([asdict(s) for s in sessions], ensure_ascii=False, indent=1))
        return
    console = _console()
    if not sessions:
        console.print("No saved sessions yet. Start one with `co chat`.", highlight=False, markup=False)
        return
    from co_cli.sessions_view import sessions_table

    console.print(sessions_table(sessions))
    if total > len(sessions):
        console.print(f"{len(sessions)} of {total} sessions shown; use --limit to see more.", style="dim")


@app.command("show")
def show(session_id: Annotated[str, typer.Argument(help="Session id or unique prefix.")]) -> None:
    """Show a session's metadata and full transcript."""
    from co_cli.sessions_view import format_time, render_transcript

    store, _ = _open_store()
    with store:
        info = store.get(session_id)
        transcript = store.transcript(info.id)
    console = _console()
    console.print(info.title or "untitled", style="bold", markup=False, highlight=False)
    details = [
        f"id {info.id}",
        f"updated {format_time(info.updated_at)}",
        f"model {info.model or '?'}",
        f"{info.message_count} messages",
        f"{info.input_tokens} in / {info.output_tokens} out tokens",
        f"${info.cost_usd:.4f}",
    ]
    if info.parent_id:
        details.append(f"forked from {info.parent_id} at #{info.fork_seq}")
    if info.compaction_count:
        details.append(f"{info.compaction_count} compactions")
    console.print(" · ".join(details), style="dim", markup=False, highlight=False)
    console.print(f"cwd {info.cwd}", style="dim", markup=False, highlight=False)
    console.print()
    console.print(render_transcript(transcript))


@app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="Words to find (matched literally, all of them).")],
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=1_000_000, help="Most hits to show.")] = 20,
    session: Annotated[str | None, typer.Option("--session", "-s", help="Search only this session.")] = None,
) -> None:
    """Full-text search over every saved transcript."""
    store, _ = _open_store()
    with store:
        session_id = store.get(session).id if session else None
        hits = store.search(query, session_id=session_id, limit=limit)
    console = _console()
    if not hits:
        console.print(f"No messages match {query!r}.", markup=False, highlight=False)
        return
    from co_cli.sessions_view import search_table

    console.print(search_table(hits))


@app.command("export")
def export(
    session_id: Annotated[str, typer.Argument(help="Session id or unique prefix.")],
    fmt: Annotated[ExportFormat, typer.Option("--format", "-f", help="md (readable) or json (lossless).")] = (
        ExportFormat.md
    ),
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file (mode 0600).")] = None,
) -> None:
    """Export a session as Markdown or JSON."""
    from co_cli.store.export import export_json, export_markdown

    store, _ = _open_store()
    with store:
        info = store.get(session_id)
        text = export_markdown(store, info.id) if fmt is ExportFormat.md else export_json(store, info.id) + "\n"
    if output is None:
        typer.echo(text, nl=False)
        return
    _write_private(output, text)
    typer.echo(f"exported {info.id} to {output}", err=True)


@app.command("import")
def import_session(
    file: Annotated[Path, typer.Argument(help="A file written by `co sessions export -f json`.")],
) -> None:
    """Import a session exported as JSON (under a new id if its id is taken)."""
    from co_cli.store.export import import_json

    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CoError(f"cannot read {file}: {getattr(exc, 'strerror', None) or exc}") from None
    store, _ = _open_store()
    with store:
        info = import_json(store, text)
    typer.echo(f"imported {info.id} ({info.title or 'untitled'}, {info.message_count} messages)")


@app.command("rename")
def rename(
    session_id: Annotated[str, typer.Argument(help="Session id or unique prefix.")],
    title: Annotated[str, typer.Argument(help="The new title.")],
) -> None:
    """Give a session a new title."""
    store, _ = _open_store()
    with store:
        info = store.get(session_id)
        store.rename(info.id, title)
        renamed = store.get(info.id)
    typer.echo(f"renamed {renamed.id} to {renamed.title!r}")


@app.command("delete")
def delete(
    session_id: Annotated[str, typer.Argument(help="Session id or unique prefix.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a session, its transcript and its saved tool outputs."""
    store, paths = _open_store()
    with store:
        info = store.get(session_id)
        if not yes:
            question = f"Delete session {info.id} ({info.title or 'untitled'}, {info.message_count} messages)?"
            if not typer.confirm(question, default=False):
                typer.echo("not deleted")
                raise typer.Exit(1)
        store.delete(info.id, files_root=paths.tool_outputs)
    typer.echo(f"deleted {info.id}")
