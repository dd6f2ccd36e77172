"""The slash-command registry: one table, so dispatch, /help and tab completion agree.

A command registers itself with ``@command`` in the module of its concern (``commands/conversation.py``, ...)
and works over ``CommandHost``: the few things a command needs from the terminal side (the conversation, the
store, output, a confirmation question, a cancellable task).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from co_cli.errors import CoError

if TYPE_CHECKING:
    from rich.console import Console

    from co_cli.config import LoadedSettings
    from co_cli.session import Conversation, TurnOutcome
    from co_cli.store import Store

T = TypeVar("T")


class CommandHost(Protocol):
    """What a slash command may use."""

    store: Store
    saving: bool
    loaded: LoadedSettings
    console: Console
    interactive: bool
    running: bool

    @property
    def conv(self) -> Conversation: ...
    def info(self, message: str) -> None: ...
    def note(self, message: str) -> None: ...
    def error(self, message: str) -> None: ...
    def show(self, renderable: object) -> None: ...
    def show_resumed(self) -> None: ...
    async def confirm(self, question: str) -> bool: ...
    async def ask(self, question: str, default: str = "") -> str | None: ...
    async def cancellable(self, work: Coroutine[Any, Any, T], status: str) -> T | None: ...
    async def turn(self, prompt: str, words: str | None = None) -> TurnOutcome: ...


Handler = Callable[["CommandHost", str], Awaitable[None]]
Completer = Callable[["CommandHost"], "list[str] | list[tuple[str, str]]"]
"""A command's argument completions: values, or (value, what it is) pairs shown beside them."""


@dataclass(frozen=True)
class Command:
    name: str
    args: str
    help: str
    handler: Handler
    complete: Completer | None = None
    aliases: tuple[str, ...] = ()


REGISTRY: dict[str, Command] = {}
"""Every name a command answers to (aliases included) -> the command."""


def command(
    name: str, args: str, help: str, complete: Completer | None = None, aliases: tuple[str, ...] = ()
) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        cmd = Command(name, args, help, handler, complete, aliases)
        for key in (name, *aliases):
            REGISTRY[key] = cmd
        return handler

    return register


HELP_ORDER = (
    "help", "quit", "new", "clear", "model", "retry", "last", "compact", "context", "sessions", "resume", "fork",
    "rename", "delete", "pin", "pins", "unpin", "uncompact", "memory", "remember", "forget", "rewind", "usage",
    "tasks", "mcp", "sandbox",
)  # fmt: skip
"""The order /help lists the commands and completion offers them, whichever module registered them."""


def commands() -> list[Command]:
    """Each command once, in ``HELP_ORDER`` (a command missing from it comes last, in registration order)."""
    unique = list(dict.fromkeys(REGISTRY.values()))
    rank = {name: i for i, name in enumerate(HELP_ORDER)}
    return sorted(unique, key=lambda cmd: rank.get(cmd.name, len(rank)))


def names() -> list[str]:
    """Every name a command answers to, each command's aliases right after it, for completion."""
    return [name for cmd in commands() for name in (cmd.name, *cmd.aliases)]


def parse(line: str) -> tuple[str, str]:
    """'/name  some args' -> ('name', 'some args')."""
    name, _, arg = line.strip()[1:].partition(" ")
    return name.lower(), arg.strip()


async def dispatch(host: CommandHost, line: str) -> None:
    name, arg = parse(line)
    cmd = REGISTRY.get(name)
    if cmd is None:
        import difflib

        close = difflib.get_close_matches(name, names(), n=1, cutoff=0.6)
        guess = f"did you mean /{close[0]}? " if close else ""
        host.error(f"unknown command /{name}; {guess}/help lists them; nothing was sent to the model")
        return
    try:
        await cmd.handler(host, arg)
    except CoError as exc:
        host.error(exc.message)
