"""Slash commands, one module per concern; importing this package registers them all.

``registry`` holds the table, ``@command``, ``parse``, ``dispatch`` and ``CommandHost``; ``conversation``,
``compaction``, ``sessions``, ``memory``, ``tasks``, ``mcp`` and ``sandbox`` hold the commands, each registering
itself when imported.
"""

from co_cli.terminal.commands import compaction, conversation, mcp, memory, sandbox, sessions, tasks
from co_cli.terminal.commands.registry import (
    HELP_ORDER,
    REGISTRY,
    Command,
    CommandHost,
    command,
    commands,
    dispatch,
    names,
    parse,
)

__all__ = [
    "HELP_ORDER",
    "REGISTRY",
    "Command",
    "CommandHost",
    "command",
    "commands",
    "compaction",
    "conversation",
    "dispatch",
    "mcp",
    "memory",
    "names",
    "parse",
    "sandbox",
    "sessions",
    "tasks",
]
