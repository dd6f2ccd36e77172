"""Words co stores and compares, each defined once as a ``Literal`` type."""

from __future__ import annotations

from typing import Literal, get_args

MessageStatus = Literal["ok", "failed", "cancelled"]
"""A saved message's turn: answered, failed (kept out of the working context), or cut off (kept, marked)."""
MESSAGE_STATUSES: tuple[str, ...] = get_args(MessageStatus)

CompactionTrigger = Literal["auto", "manual"]
"""What made a compaction: co before a request (auto, including after a context overflow), or /compact."""
COMPACTION_TRIGGERS: tuple[str, ...] = get_args(CompactionTrigger)

TaskStatus = Literal["pending", "in_progress", "done"]
"""Where an item of the session's task list stands."""
TASK_STATUSES: tuple[str, ...] = get_args(TaskStatus)

ToolOutcome = Literal["ok", "failed", "denied"]
"""How a tool call ended: it ran, it failed (an error or a malformed call sent back to the model), or the user
(or a non-interactive run) denied it."""
TOOL_OUTCOMES: tuple[str, ...] = get_args(ToolOutcome)

SessionOrigin = Literal["terminal", "serve"]
"""Where a session was started: in the terminal (`co chat`), or through `co serve` (an API client, the browser)."""
SESSION_ORIGINS: tuple[str, ...] = get_args(SessionOrigin)

WAITING_FOR_MODEL = "waiting for the model"
"""What a live view says while a request to the model is out."""
COMPACTING = "compacting the conversation"
"""What a live view says while the governor summarises the context before a request."""
MEMORY_EXTRACTION = "finishing the memory extraction of the last turn"
"""What a live view says while co, leaving, waits for the memory extraction of the last turn."""
MCP_TOOL_PREFIX = "mcp__"
"""How the name of a tool offered from an MCP server starts (``mcp__<server>__<tool>``), wherever it is read:
the toolset that offers it, and the ``/context`` breakdown of a history whose server may be long gone."""
