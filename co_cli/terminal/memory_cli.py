"""``co memory``: list, search, add, edit, forget, review, log, undo, export and import long-term memories.

Project memories belong to the repository root (or the working directory outside a repository) they were
made in; the commands work on the user's memories plus those of the current project. CoError propagates:
the main CLI prints it as one line with its exit code.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from co_cli.terminal_text import printable

if TYPE_CHECKING:
    from co_cli.store import Memories, Memory, MemoryEvent

app = typer.Typer(
    name="memory",
    help="List, search, add, edit, forget, review, undo, export and import long-term memories.",
    no_args_is_help=True,
    add_completion=False,
)


class Scope(StrEnum):
    user = "user"
    project = "project"


class Kind(StrEnum):
    fact = "fact"
    preference = "preference"
    instruction = "instruction"


def _open(*, reads_only: bool = False) -> tuple[Memories, str]:
    """The memory store and the current project's key; ``reads_only`` for commands that only read (a database
    that cannot be written opens read-only, as for ``co sessions``)."""
    from co_cli.config import load_settings
    from co_cli.memory.instructions_files import project_root
    from co_cli.store import Store

    paths = load_settings().paths
    paths.ensure_data_dir()
    return Store.open(paths.db, reads_only=reads_only).memories, str(project_root(Path.cwd()))


def _out(line: str) -> None:
    typer.echo(printable(line) if sys.stdout.isatty() else line)


def _line(memory: Memory, *, status: bool = False) -> str:
    state = f" {memory.status}" if status else ""
    whose = f" ({memory.whose})" if memory.whose else ""
    return f"{memory.ref:>6} [{memory.scope}, {memory.kind}]{state}{whose} {memory.text}"


def _event_line(event: MemoryEvent) -> str:
    when = datetime.fromtimestamp(event.at).strftime("%Y-%m-%d %H:%M")
    undo = f" (undoes change {event.undoes})" if event.undoes else ""
    if event.action == "update" and event.old_text != event.new_text:
        what = f"“{event.old_text}” → “{event.new_text}”"
    else:
        what = f"“{event.new_text}”"
    return f"{when}  #{event.change_id:<4} {event.action:<7} m{event.memory_id:<5} by {event.actor:<9} {what}{undo}"


@app.command("list")
def list_memories(
    all_: Annotated[bool, typer.Option("--all", help="Every status and every project.")] = False,
    scope: Annotated[Scope | None, typer.Option("--scope", help="Only user or only project memories.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """List the active memories of the user and of this project."""
    from co_cli.store import MEMORY_STATUSES

    store, project = _open(reads_only=True)
    memories = store.list(
        statuses=MEMORY_STATUSES if all_ else ("active",),
        scope=scope.value if scope else None,
        project=None if all_ else project,
    )
    if as_json:
        typer.echo(json.dumps([m.as_json() for m in memories], ensure_ascii=False, indent=1))
        return
    if not memories:
        _out("No memories yet. Add one with `co memory add <text>`, or /remember in a chat.")
        return
    for memory in memories:
        _out(_line(memory, status=all_))


@app.command("search")
def search(query: Annotated[str, typer.Argument(help="Words to find (any of them).")]) -> None:
    """Search the memories of the user and of this project, best match first (then what only the topic's
    words find: "shell" finds "fish")."""
    from co_cli.memory.expansion import search_with_topics
    from co_cli.memory.retrieval import query_terms

    store, project = _open(reads_only=True)
    direct, by_topic = search_with_topics(store, query_terms(query) or query.split(), project, 50)
    hits = [*direct, *by_topic]
    if not hits:
        _out(f"No memories match {query!r}.")
        return
    for hit in hits:
        _out(_line(hit.memory))


@app.command("add")
def add(
    text: Annotated[str, typer.Argument(help="One statement to remember.")],
    project_scope: Annotated[bool, typer.Option("--project", help="Only for this project (repository).")] = False,
    kind: Annotated[Kind, typer.Option("--kind", "-k", help="fact, preference or instruction.")] = Kind.fact,
) -> None:
    """Remember something; prints the new memory's id."""
    store, project = _open()
    memory = store.add(
        text, actor="user", kind=kind.value, scope="project" if project_scope else "user", project=project
    )
    typer.echo(memory.ref)


@app.command("edit")
def edit(
    memory_id: Annotated[str, typer.Argument(help="The memory's id, e.g. m12.")],
    text: Annotated[str, typer.Argument(help="Its new text.")],
    kind: Annotated[Kind | None, typer.Option("--kind", "-k", help="Change its kind too.")] = None,
) -> None:
    """Change a memory's text (its id stays)."""
    store, _ = _open()
    memory = store.edit(memory_id, text, kind=kind.value if kind else None)
    _out(f"updated {_line(memory).strip()}")


@app.command("forget")
def forget(memory_id: Annotated[str, typer.Argument(help="The memory's id, e.g. m12.")]) -> None:
    """Forget a memory (`co memory undo` brings it back)."""
    store, _ = _open()
    memory = store.forget(memory_id, actor="user")
    _out(f"forgot {_line(memory).strip()}")


@app.command("review")
def review() -> None:
    """Go through the proposed memories: accept, edit, reject or skip each."""
    import asyncio

    from co_cli.memory.review import review as run_review

    store, project = _open()
    proposals = store.review.proposals(project)
    if not proposals:
        _out("Nothing to review.")
        return

    async def ask(question: str, default: str = "") -> str | None:
        try:
            if default and sys.stdin.isatty() and sys.stdout.isatty():
                from prompt_toolkit import PromptSession

                return await PromptSession[str]().prompt_async(question, default=default)
            return input(question)
        except (EOFError, KeyboardInterrupt):
            return None

    accepted, rejected, skipped = asyncio.run(run_review(store, proposals, ask, _out))
    _out(f"{accepted} accepted, {rejected} rejected, {skipped} left to review.")


@app.command("log")
def log(limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many events.")] = 50) -> None:
    """The history of every change, newest first."""
    store, _ = _open(reads_only=True)
    events = store.history.log(limit)
    if not events:
        _out("No memory changes yet.")
    for event in events:
        _out(_event_line(event))


@app.command("undo")
def undo() -> None:
    """Revert the latest change to the memories."""
    store, _ = _open()
    events = store.history.undo()
    if events:
        _out(f"Undid change #{events[0].undoes}:")
    for event in events:
        _out(f"  {undo_effect(event)}")


UNDO_EFFECTS = {
    "delete": "m{id} is forgotten again: {text}",
    "restore": "m{id} is back: {text}",
    "update": "m{id} reads again: {text}",
}


def undo_effect(event: MemoryEvent) -> str:
    """What undoing a change did to one memory, in words."""
    return UNDO_EFFECTS.get(event.action, "m{id}: {text} (" + event.action + ")").format(
        id=event.memory_id, text=event.new_text
    )


@app.command("export")
def export(
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file (mode 0600).")] = None,
) -> None:
    """The memories of the user and this project as Markdown, one per line."""
    from co_cli.memory.memory_file import render
    from co_cli.terminal.sessions_cli import _write_private

    store, project = _open(reads_only=True)
    text = render(store.list(project=project), project)
    if output is None:
        typer.echo(printable(text) if sys.stdout.isatty() else text, nl=False)
        return
    _write_private(output, text)
    print(f"exported to {output}", file=sys.stderr)


@app.command("import")
def import_(file: Annotated[Path, typer.Argument(help="A file written by `co memory export` (and edited).")]) -> None:
    """Make the memories what FILE lists: new lines added, changed ones updated, removed ones forgotten."""
    from co_cli.memory.memory_file import parse
    from co_cli.terminal.sessions_cli import _read_import_file

    entries = parse(_read_import_file(file))
    store, project = _open()
    result = store.import_entries(entries, project)
    _out(f"{result.added} added, {result.updated} updated, {result.deleted} forgotten (`co memory undo` reverts).")
