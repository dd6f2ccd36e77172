"""Slash commands: one registry, so /help and tab completion come from the same table."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from co_cli.errors import CoError

if TYPE_CHECKING:
    from co_cli.repl.app import ChatApp

Handler = Callable[["ChatApp", str], Awaitable[None]]
Completer = Callable[["ChatApp"], list[str]]


@dataclass(frozen=True)
class Command:
    name: str
    args: str
    help: str
    handler: Handler
    complete: Completer | None = None


REGISTRY: dict[str, Command] = {}


def command(name: str, args: str, help: str, complete: Completer | None = None) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        REGISTRY[name] = Command(name, args, help, handler, complete)
        return handler

    return register


def parse(line: str) -> tuple[str, str]:
    """'/name  some args' -> ('name', 'some args')."""
    name, _, arg = line.strip()[1:].partition(" ")
    return name.lower(), arg.strip()


async def dispatch(app: ChatApp, line: str) -> None:
    name, arg = parse(line)
    cmd = REGISTRY.get(name)
    if cmd is None:
        app.error(f"unknown command /{name} (type /help for the list); nothing was sent to the model")
        return
    try:
        await cmd.handler(app, arg)
    except CoError as exc:
        app.error(exc.message)


def _session_ids(app: ChatApp) -> list[str]:
    if app.store is None:
        return []
    return [s.id for s in app.store.list(limit=30)]


@command("help", "", "show the commands")
async def _help(app: ChatApp, arg: str) -> None:
    table = Table(show_header=False, box=None, pad_edge=False)
    for cmd in REGISTRY.values():
        table.add_row(Text(f"/{cmd.name} {cmd.args}".rstrip(), style="bold cyan"), cmd.help)
    app.console.print(table)
    app.console.print(
        Text(
            "Enter sends · Esc-Enter or Alt-Enter adds a newline · Ctrl-C cancels a turn · Ctrl-D quits",
            style="dim",
        )
    )


@command("quit", "", "leave co (Ctrl-D does the same)")
async def _quit(app: ChatApp, arg: str) -> None:
    app.running = False


@command("exit", "", "leave co")
async def _exit(app: ChatApp, arg: str) -> None:
    app.running = False


@command("new", "", "start a new conversation (the current one stays saved)")
async def _new(app: ChatApp, arg: str) -> None:
    app.conv.new()
    app.info("New conversation.")


@command("clear", "", "clear the screen and start a new conversation")
async def _clear(app: ChatApp, arg: str) -> None:
    app.console.clear()
    app.conv.new()
    app.info("New conversation.")


@command("model", "[name]", "show the model, or switch to another for this session")
async def _model(app: ChatApp, arg: str) -> None:
    if not arg:
        r = app.conv.resolved
        app.info(f"Model: {r.label} ({r.choice.reason}); context window {r.context_window:,} ({r.window_source})")
        return
    app.switch_model(arg)


@command("retry", "", "send the last prompt again (after an error)")
async def _retry(app: ChatApp, arg: str) -> None:
    if not app.conv.last_prompt:
        app.error("nothing to retry yet")
        return
    await app.turn(app.conv.last_prompt)


@command("compact", "[focus]", "summarise the conversation now; optional focus steers the summary")
async def _compact(app: ChatApp, arg: str) -> None:
    await app.compact(arg)


@command("context", "", "how full the context window is, and with what")
async def _context(app: ChatApp, arg: str) -> None:
    app.show_context()


@command("sessions", "[query]", "list saved sessions, or search them", complete=None)
async def _sessions(app: ChatApp, arg: str) -> None:
    app.show_sessions(arg)


@command("resume", "<id>", "switch to a saved session", complete=_session_ids)
async def _resume(app: ChatApp, arg: str) -> None:
    if not arg:
        app.error("usage: /resume <id or prefix> (see /sessions)")
        return
    app.resume(arg)


@command("fork", "", "continue in a copy of this session; the original stays as it is")
async def _fork(app: ChatApp, arg: str) -> None:
    app.fork()


@command("rename", "<title>", "rename this session")
async def _rename(app: ChatApp, arg: str) -> None:
    app.rename(arg)


@command("delete", "<id>", "delete a saved session (asks to confirm)", complete=_session_ids)
async def _delete(app: ChatApp, arg: str) -> None:
    await app.delete(arg)
