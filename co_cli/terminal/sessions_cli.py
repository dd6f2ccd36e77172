"""``co sessions``: list, show, search, export, import, rename, delete and recover saved sessions, and take
back the files co changed in one (``undo-files``).

CoError is left to propagate: the main CLI prints it as one line with its exit code. What goes to a
terminal passes through ``printable`` (no control sequences); what goes to a file or a pipe is exact.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from co_cli.errors import CoError
from co_cli.terminal_text import counted, printable, printable_line

if TYPE_CHECKING:
    from rich.console import Console

    from co_cli.config import Paths
    from co_cli.store import ChangeRow, Store, TaskSnapshot, UsageTotals

app = typer.Typer(
    name="sessions",
    help="List, show, search, export, import, rename, delete and recover saved sessions.",
    no_args_is_help=True,
    add_completion=False,
)


class ExportFormat(StrEnum):
    md = "md"
    json = "json"


def _console() -> Console:
    from co_cli.terminal.output import output_console

    return output_console()


IMPORT_MAX_BYTES = 256 * 1024 * 1024  # an export is one session's transcript; big tool outputs are offloaded
_C1_AND_DEL = re.compile(r"[\x7f-\x9f]")


def _open_store(*, reads_only: bool = False) -> tuple[Store, Paths]:
    """The store; ``reads_only`` for commands that only read (a database that cannot be written opens read-only)."""
    # Imported here so `co --help` stays fast.
    from co_cli.config import load_settings
    from co_cli.store import Store

    paths = load_settings().paths
    return Store.open(paths.db, reads_only=reads_only), paths


def _json_text(data: object) -> str:
    """JSON that is safe on a terminal and means the same: json.dumps escapes C0 controls in strings; DEL and
    the C1 controls (U+0080-U+009F, which some terminals obey as escape sequences) are escaped here too."""
    text = json.dumps(data, ensure_ascii=False, indent=1)
    return _C1_AND_DEL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _to_terminal() -> bool:
    return sys.stdout.isatty()


def _read_import_file(path: Path) -> str:
    """The text of a regular file of at most IMPORT_MAX_BYTES; devices, FIFOs and directories are refused
    (opened without blocking, so a FIFO with no writer does not hang)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise CoError(f"cannot read {path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise CoError(f"cannot import {path}: not a regular file")
        if info.st_size > IMPORT_MAX_BYTES:
            raise CoError(f"cannot import {path}: larger than {IMPORT_MAX_BYTES // 2**20} MiB")
        chunks: list[bytes] = []
        size = 0
        while size <= IMPORT_MAX_BYTES:  # the file may grow while it is read
            chunk = os.read(fd, min(1 << 20, IMPORT_MAX_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise CoError(f"cannot read {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > IMPORT_MAX_BYTES:
        raise CoError(f"cannot import {path}: larger than {IMPORT_MAX_BYTES // 2**20} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise CoError(f"cannot import {path}: not UTF-8 text") from None


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by the user only (0600), replacing any old content."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise CoError(f"cannot write {path}: {exc.strerror}") from None


def _usage_or_warning(read: Callable[[], dict[str, UsageTotals]]) -> dict[str, UsageTotals]:
    """Usage figures, or none with a one-line warning when the usage table cannot be read (damaged): the
    sessions themselves still list and show."""
    from co_cli.errors import StoreError

    try:
        return read()
    except StoreError as exc:
        print(printable(f"warning: usage not shown: {exc.message}"), file=sys.stderr)
        return {}


def _usage_json(totals: UsageTotals | None) -> dict[str, object] | None:
    """Usage totals for --json: cost_usd is null when any part of it is unknown."""
    if totals is None:
        return None
    return {
        **totals.counts(),
        "cost_known_part_usd": totals.cost_usd,
    }


@app.command("list")
def list_sessions(
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=1_000_000, help="How many sessions to show.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List sessions, most recently updated first."""
    store, _ = _open_store(reads_only=True)

    from co_cli.terminal.views import parent_short_ids

    with store:
        sessions = store.sessions.list(limit=limit)
        total = store.sessions.count()
        parents = parent_short_ids(store, sessions)
        usage = _usage_or_warning(lambda: store.usage.totals([s.id for s in sessions]))
    if as_json:
        typer.echo(_json_text([{**asdict(s), "usage": _usage_json(usage.get(s.id))} for s in sessions]))
        return
    console = _console()
    if not sessions:
        console.print("No saved sessions yet. Start one with `co chat`.", highlight=False, markup=False)
        return
    from co_cli.terminal.views import sessions_table

    console.print(sessions_table(sessions, usage, short_ids=parents), soft_wrap=True, highlight=False)
    if total > len(sessions):
        console.print(f"{len(sessions)} of {total} sessions shown; use --limit to see more.", style="dim")


@app.command("show")
def show(
    session_id: Annotated[str, typer.Argument(help="Session id or unique prefix.")],
    full: Annotated[
        bool, typer.Option("--full", help="Print long prompts, answers and summaries whole (cut at 20,000 characters).")
    ] = False,
) -> None:
    """Show a session's metadata, usage and cost, tool calls, its task list (and the tasks that left it), and its
    transcript (messages numbered #0, #1, ...: the numbers `co chat --resume <id> --fork-at <n>` takes)."""
    from co_cli.terminal.views import format_time, render_transcript, tool_stats, tool_stats_text, usage_lines

    store, _ = _open_store(reads_only=True)
    with store:
        info = store.sessions.get(session_id)
        transcript = store.messages.transcript(info.id)
        compactions = store.compactions.list(info.id)
        usage = _usage_or_warning(lambda: store.usage.by_role(info.id))
        tools = store.tool_calls.by_tool(info.id)
        task_history = store.tasks.history(info.id)
        changes = store.file_changes.of_session(info.id)
        short_id = store.sessions.short_id(info.id)
    console = _console()
    console.print(printable(info.title) or "untitled", style="bold", markup=False, highlight=False)
    details = [
        f"id {info.id}",
        f"updated {format_time(info.updated_at)}",
        f"model {info.model or '?'}",
        counted(info.message_count, "message"),
    ]
    if info.parent_id:
        details.append(f"forked from {info.parent_id} at #{info.fork_seq}")
    if info.compaction_count:
        details.append(counted(info.compaction_count, "compaction"))
    if info.origin != "terminal":
        details.append(f"started via {info.origin}")
    # Metadata lines are not wrapped: a pipe or a narrow terminal gets each on one line, items never split.
    console.print(printable(" · ".join(details)), style="dim", markup=False, highlight=False, soft_wrap=True)
    console.print(printable(f"cwd {info.cwd}"), style="dim", markup=False, highlight=False)
    if usage:
        for line in usage_lines(usage):
            console.print(printable(f"usage {line}"), style="dim", markup=False, highlight=False, soft_wrap=True)
    elif info.input_tokens or info.output_tokens:
        console.print(
            f"usage {info.input_tokens} in / {info.output_tokens} out tokens · cost unknown (saved before co "
            "recorded usage per turn)",
            style="dim",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    stats = tools or tool_stats(transcript)
    if stats:
        console.print(f"tools {tool_stats_text(stats)}", style="dim", markup=False, highlight=False, soft_wrap=True)
    _print_tasks(console, task_history)
    _print_file_changes(console, changes, short_id)
    console.print()
    console.print(render_transcript(transcript, compactions, full=full))


def _print_file_changes(console: Console, changes: list[ChangeRow], short_id: str) -> None:
    """The files co's edit tools changed: each once, with the turns (their prompt's #) that changed it."""
    if not changes:
        return
    by_path: dict[str, list[ChangeRow]] = {}
    for change in changes:
        by_path.setdefault(change.path, []).append(change)

    def say(text: str) -> None:
        console.print(text, style="dim", markup=False, highlight=False, soft_wrap=True)

    say(f"files changed {len(by_path)} (`co sessions undo-files {short_id} --to <n>` takes them back to message #n):")
    for path, rows in by_path.items():
        made = " (created)" if rows[0].before_hash is None else ""
        turns = ", ".join(f"#{row.seq} {row.tool}" for row in rows)
        say("  " + printable_line(f"{path}{made}: {turns}"))


@app.command("undo-files")
def undo_files(
    session_id: Annotated[str, typer.Argument(help="Session id or unique prefix.")],
    to: Annotated[
        int, typer.Option("--to", help="Message number (#n of `co sessions show`); -1: before the first.")
    ] = -1,
) -> None:
    """Take the files co changed in a session back to how they were after message N (default: before any change).
    A file changed since co's edit is overwritten only when you say so on a terminal; elsewhere it is left."""
    import asyncio

    from co_cli.session.checkpoints import files_at, take_back
    from co_cli.terminal.files_back import confirmed

    store, _ = _open_store(reads_only=True)
    with store:
        info = store.sessions.get(session_id)
        files = files_at(store, info.id, to)
    if not files:
        typer.echo("Nothing to take back: the files are as they were at that point.")
        return

    def say(line: str) -> None:
        typer.echo(printable(line))

    async def ask(question: str) -> str | None:
        try:
            return input(printable(question))
        except (EOFError, KeyboardInterrupt):
            return None

    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    for line in take_back(asyncio.run(confirmed(files, ask if interactive else None, say))):
        say(line)


def _print_tasks(console: Console, history: list[TaskSnapshot]) -> None:
    """The task list in force, then the tasks that have left it (done long enough ago, dropped or replaced)."""
    from co_cli.config import load_settings
    from co_cli.session.recorder import stored_tasks
    from co_cli.session.tasks import from_stored
    from co_cli.store import earlier_tasks
    from co_cli.terminal.views import format_time
    from co_cli.tools.tasks import describe_list, in_force, status_word, task_lines

    if not history:
        return
    latest = history[-1]
    now = time.time()
    current = in_force(from_stored(latest.items), now, load_settings().settings.tasks_keep_done_hours)

    def say(text: str, indent: str = "") -> None:  # one line each: a task's text cannot start a line of its own
        console.print(indent + printable_line(text), style="dim", markup=False, highlight=False, soft_wrap=True)

    say(f"tasks {describe_list(current)} · set by the {latest.source} {format_time(latest.created_at, now)}")
    for line in task_lines(current):
        say(line, "  ")
    gone = earlier_tasks(history, stored_tasks(current))
    if gone:
        say("earlier tasks (no longer on the list):")
        for task in gone:
            say(f"{task.text} ({status_word(task.status)}, {format_time(task.updated_at, now)})", "  ")


@app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="Words to find (matched literally, all of them).")],
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=1_000_000, help="Most hits to show.")] = 20,
    session: Annotated[str | None, typer.Option("--session", "-s", help="Search only this session.")] = None,
) -> None:
    """Full-text search over every saved transcript."""
    store, _ = _open_store(reads_only=True)
    with store:
        session_id = store.sessions.get(session).id if session else None
        hits = store.search.messages(query, session_id=session_id, limit=limit)
    console = _console()
    if not hits:
        console.print(f"No messages match {query!r}.", markup=False, highlight=False)
        return
    from co_cli.terminal.views import search_table

    console.print(search_table(hits))


@app.command("export")
def export(
    session_id: Annotated[str | None, typer.Argument(help="Session id or unique prefix.")] = None,
    fmt: Annotated[ExportFormat, typer.Option("--format", "-f", help="md (readable) or json (lossless).")] = (
        ExportFormat.md
    ),
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file (mode 0600).")] = None,
    all_: Annotated[
        bool, typer.Option("--all", help="Every session (not the trash) as JSON lines, for `co sessions import`.")
    ] = False,
) -> None:
    """Export a session as Markdown or JSON (on a terminal without control characters; exact to a file or pipe);
    with --all, every session as JSON lines (one lossless document per line)."""
    from co_cli.store import export_json, export_markdown

    if all_:
        if session_id is not None:
            raise CoError("give a session id or --all, not both", exit_code=2)
        _export_all(output)
        return
    if session_id is None:
        raise CoError("give a session id (`co sessions list`), or --all", exit_code=2)
    store, _ = _open_store(reads_only=True)
    with store:
        info = store.sessions.get(session_id)
        text = export_markdown(store, info.id) if fmt is ExportFormat.md else export_json(store, info.id) + "\n"
    if output is None:
        if _to_terminal():
            text = printable(text) if fmt is ExportFormat.md else _json_text(json.loads(text)) + "\n"
        # Not typer.echo: it strips colour codes from output that is not a terminal, and a pipe gets it exact.
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    _write_private(output, text)
    typer.echo(f"exported {info.id} to {output}", err=True)


def _export_all(output: Path | None) -> None:
    from co_cli.store import export_all_json_lines

    store, _ = _open_store(reads_only=True)
    with store:
        lines = [line + "\n" for line in export_all_json_lines(store)]
    text = "".join(lines)
    if output is None:
        sys.stdout.write(_C1_AND_DEL.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if _to_terminal() else text)
        sys.stdout.flush()
        return
    _write_private(output, text)
    typer.echo(f"exported {counted(len(lines), 'session')} to {output}", err=True)


@app.command("import")
def import_session(
    file: Annotated[Path, typer.Argument(help="A file written by `co sessions export` (-f json, or --all).")],
) -> None:
    """Merge exported sessions: a session already here unchanged is skipped, one that grew elsewhere gets the
    new messages, one that diverged is imported as a fork of the last message both share. Importing the same
    file again changes nothing."""
    from co_cli.context.repair import repair_orphans
    from co_cli.store import merge_import

    text = _read_import_file(file)
    store, _ = _open_store()
    with store:
        report = merge_import(store, text, repair_orphans)
        touched = [*report.imported, *(info for info, _ in report.appended), *(info for info, _ in report.forked)]
        over = _task_lists_over_budget(store, [info.id for info in touched])
    for info in report.imported:
        typer.echo(
            f"imported {info.id} ({printable(info.title) or 'untitled'}, {counted(info.message_count, 'message')})"
        )
    for info, added in report.appended:
        typer.echo(f"appended {counted(added, 'message')} to {info.id} ({printable(info.title) or 'untitled'})")
    for info, local in report.forked:
        typer.echo(f"diverged: imported {info.id} as a fork of {local} at #{info.fork_seq}")
    for session_id in report.busy:
        typer.echo(f"not merged: {session_id} is open in another co; import again after closing it")
    for session_id, warning in over:
        print(printable(f"warning: {session_id}: {warning}"), file=sys.stderr)
    typer.echo(report.summary())


def _task_lists_over_budget(store: Store, session_ids: list[str]) -> list[tuple[str, str]]:
    """(session id, warning) for each imported session whose task list is over this co's tasks_budget_tokens
    (kept: the budget may have been larger where it was made; the model is sent what fits, as /tasks says)."""
    from co_cli.config import load_settings
    from co_cli.session.tasks import from_stored
    from co_cli.tools.tasks import in_force, over_budget

    settings = load_settings().settings
    found: list[tuple[str, str]] = []
    for session_id in session_ids:
        latest = store.tasks.latest(session_id)
        current = in_force(from_stored(latest.items), time.time(), settings.tasks_keep_done_hours) if latest else []
        warning = over_budget(current, settings.tasks_budget_tokens)
        if warning is not None:
            found.append((session_id, warning))
    return found


@app.command("rename")
def rename(
    session_id: Annotated[str, typer.Argument(help="Session id or unique prefix.")],
    title: Annotated[str, typer.Argument(help="The new title.")],
) -> None:
    """Give a session a new title."""
    store, _ = _open_store()
    with store:
        info = store.sessions.get(session_id)
        store.sessions.rename(info.id, title)
        renamed = store.sessions.get(info.id)
    typer.echo(f"renamed {renamed.id} to {renamed.title!r}")


@app.command("delete")
def delete(
    session_id: Annotated[str, typer.Argument(help="Session id or unique prefix.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Move a session to the trash (`co sessions restore` brings it back; `purge` removes it for good)."""
    store, _ = _open_store()
    with store:
        info = store.sessions.get(session_id)
        if not yes:
            title = printable(info.title) or "untitled"
            question = f"Move session {info.id} ({title}, {counted(info.message_count, 'message')}) to the trash?"
            if not typer.confirm(question, default=False):
                typer.echo("not deleted")
                raise typer.Exit(1)
        store.trash.put(info.id)
        short = store.sessions.short_id(info.id)
    typer.echo(f"moved {info.id} to the trash; `co sessions restore {short}` brings it back")


@app.command("trash")
def trash(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List the sessions in the trash, most recently deleted first."""
    from co_cli.config import load_settings
    from co_cli.terminal.views import parent_short_ids, trash_table

    store, paths = _open_store()
    with store:
        store.trash.purge_expired(load_settings().settings.trash_retention_days, paths.tool_outputs)
        items = store.trash.list()
        parents = parent_short_ids(store, [info for info, _ in items])
    if as_json:
        typer.echo(_json_text([{**asdict(info), "deleted_at": when} for info, when in items]))
        return
    console = _console()
    if not items:
        console.print("The trash is empty.", highlight=False, markup=False)
        return
    console.print(trash_table(items, short_ids=parents), soft_wrap=True, highlight=False)
    console.print(
        f"{len(items)} in the trash; `co sessions restore <id>` brings one back, "
        "`co sessions purge <id> --yes` removes it for good.",
        style="dim",
        markup=False,
        highlight=False,
    )


@app.command("restore")
def restore(session_id: Annotated[str, typer.Argument(help="Id or unique prefix of a session in the trash.")]) -> None:
    """Bring a session back from the trash, unchanged."""
    store, _ = _open_store()
    with store:
        info = store.sessions.get(session_id, trashed=True)
        store.trash.restore(info.id)
    typer.echo(f"restored {info.id} ({printable(info.title) or 'untitled'})")


@app.command("purge")
def purge(
    session_id: Annotated[str | None, typer.Argument(help="Id or unique prefix of a session in the trash.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Purge everything in the trash.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Required: purging cannot be undone.")] = False,
) -> None:
    """Remove sessions in the trash for good: their messages, search entries and saved tool outputs."""
    if (session_id is None) == (not all_):
        raise CoError("give one session id from `co sessions trash`, or --all", exit_code=2)
    store, paths = _open_store()
    with store:
        ids = (
            [info.id for info, _ in store.trash.list()]
            if all_
            else [store.sessions.get(session_id or "", trashed=True).id]
        )
        if not yes:
            raise CoError(
                f"purging removes {counted(len(ids), 'session')} for good and cannot be undone; add --yes to do it",
                exit_code=2,
            )
        count = store.trash.purge(ids, files_root=paths.tool_outputs)
    typer.echo(f"purged {counted(count, 'session')}" if all_ else f"purged {ids[0]}")


@app.command("recover")
def recover(
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the recovered sessions here and leave the database in place."),
    ] = None,
) -> None:
    """Save what can still be read from a damaged session database into a new one; the old file is kept.

    Without --output the new database takes the old one's place and the old file is renamed."""
    import time

    from co_cli.config import load_settings
    from co_cli.store import Store

    db = load_settings().paths.db
    stamp = time.strftime("%Y%m%d-%H%M%S")
    if output is None:
        busy = Store.sessions_open_elsewhere(db)
        if busy:
            raise CoError(
                f"{counted(len(busy), 'session')} open in a running co (e.g. {busy[0]}); close it first, "
                "or recover into another file with --output"
            )
    target = output if output is not None else db.with_name(f"{db.stem}.recovered-{stamp}{db.suffix}")
    report = Store.recover(db, target)
    saved = ", ".join(
        (
            counted(report.sessions, "session"),
            counted(report.messages, "message"),
            counted(report.compactions, "compaction"),
        )
    )
    if output is not None:
        typer.echo(f"saved {saved} to {target}; {db} is unchanged")
    else:
        kept = Store.install_recovered(target, db, stamp)
        typer.echo(f"saved {saved} into a new {db}")
        typer.echo(f"the old database is kept as {kept}")
    lost = []
    if report.messages_lost:
        lost.append(counted(report.messages_lost, "message"))
    if report.compactions_lost:
        lost.append(counted(report.compactions_lost, "compaction"))
    if lost:
        damaged = f" (damaged: {', '.join(report.damaged_tables)})" if report.damaged_tables else ""
        typer.echo(f"could not read {' and '.join(lost)}{damaged}")
    else:
        typer.echo("nothing was lost")
    if report.sessions_rebuilt:
        what = "its title and settings and was" if report.sessions_rebuilt == 1 else "their title and settings and were"
        typer.echo(f"{counted(report.sessions_rebuilt, 'session')} lost {what} rebuilt from the messages")
