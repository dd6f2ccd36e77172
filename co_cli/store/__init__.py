"""The session store: every conversation and every memory, saved in one SQLite file.

``Store`` opens the file once (``db``, the only way to run SQL) and hands out one object per table: ``sessions`` (and
their ``trash``), ``messages``, ``compactions``, ``pins``, ``usage``, ``search``, ``memories``, ``queue``, ``locks``,
``tasks``, ``tool_calls``, ``turn_memories``, ``readings`` and ``file_changes``. Writes that must commit together (a
whole turn) use the tables' statement-level functions inside one ``store.db.transaction()``.

This module is the store's one door for the front ends and ``memory/``: ``Store`` (``tables.py``; the lock files
and recovery of a database are its methods) and what ``__all__`` offers: the record types, the tables' types,
the pure helpers and words of those records, and the export and import of whole sessions. Never the database,
the lock files, recovery or the schema themselves (``tests/test_architecture.py`` keeps it so).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from co_cli.errors import SessionBusy
from co_cli.store.compactions import CompactionRecord, compactions_by_position
from co_cli.store.file_changes import ChangeRow
from co_cli.store.messages import StoredMessage
from co_cli.store.readings import MessageReading, PartKind, Readings, ReadPart
from co_cli.store.schema import MEMORY_KINDS, MEMORY_SCOPES, MEMORY_STATUSES
from co_cli.store.search import SNIPPET_CLOSE, SNIPPET_OPEN, ListedSession, SearchHit, query_phrases
from co_cli.store.sessions import SessionInfo
from co_cli.store.tables import Store
from co_cli.store.tasks import TaskSnapshot, earlier_tasks
from co_cli.store.tool_calls import ToolStats, summed
from co_cli.store.turn_memories import SentMemory
from co_cli.store.usage import GroupBy, TurnUsage, UsageTotals

if TYPE_CHECKING:
    from co_cli.store.export import export_all_json_lines, export_json, export_markdown
    from co_cli.store.memories import (
        NO_SUBJECT,
        TOPIC_MAX_CHARS,
        Candidate,
        ImportEntry,
        Memories,
        Memory,
        MemoryEvent,
        Subject,
        clean_text,
        parse_ref,
    )
    from co_cli.store.merge import MergeReport, merge_import
    from co_cli.store.queue import ExtractionQueue, QueuedTurn

# Names offered from modules opened on first use (the memory tables compile the secret patterns on import).
_ON_FIRST_USE = {
    **dict.fromkeys(
        (
            "NO_SUBJECT",
            "TOPIC_MAX_CHARS",
            "Candidate",
            "ImportEntry",
            "Memories",
            "Memory",
            "MemoryEvent",
            "Subject",
            "clean_text",
            "parse_ref",
        ),
        "co_cli.store.memories",
    ),
    "ExtractionQueue": "co_cli.store.queue",
    "QueuedTurn": "co_cli.store.queue",
    **dict.fromkeys(("export_all_json_lines", "export_json", "export_markdown"), "co_cli.store.export"),
    "MergeReport": "co_cli.store.merge",
    "merge_import": "co_cli.store.merge",
}


def __getattr__(name: str) -> Any:
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "MEMORY_KINDS",
    "MEMORY_SCOPES",
    "MEMORY_STATUSES",
    "NO_SUBJECT",
    "SNIPPET_CLOSE",
    "SNIPPET_OPEN",
    "TOPIC_MAX_CHARS",
    "Candidate",
    "ChangeRow",
    "CompactionRecord",
    "ExtractionQueue",
    "GroupBy",
    "ImportEntry",
    "ListedSession",
    "Memories",
    "Memory",
    "MemoryEvent",
    "MergeReport",
    "MessageReading",
    "PartKind",
    "QueuedTurn",
    "ReadPart",
    "Readings",
    "SearchHit",
    "SentMemory",
    "SessionBusy",
    "SessionInfo",
    "Store",
    "StoredMessage",
    "Subject",
    "TaskSnapshot",
    "ToolStats",
    "TurnUsage",
    "UsageTotals",
    "clean_text",
    "compactions_by_position",
    "earlier_tasks",
    "export_all_json_lines",
    "export_json",
    "export_markdown",
    "merge_import",
    "parse_ref",
    "query_phrases",
    "summed",
]
