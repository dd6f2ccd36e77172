"""Saved sessions as the browser view reads them: listings, search hits and one session's whole record.

Everything is read through the store's own readers (the ones `co sessions list`, `show` and `search` use); this
module only turns their rows into JSON. Texts are sent as they are saved, and an answer's text also as its
Markdown's elements (``markdown.py``): the page shows both with ``textContent``, never as markup.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from co_cli.failure_text import retold
from co_cli.message_view import views
from co_cli.serve.markdown import markdown_tree
from co_cli.store import (
    SNIPPET_CLOSE,
    SNIPPET_OPEN,
    CompactionRecord,
    SentMemory,
    SessionInfo,
    Store,
    StoredMessage,
    TurnUsage,
)
from co_cli.synthetic import failure_of

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

PART_SHOWN_CHARS = 20_000
"""A part longer than this (a big tool output) is cut, and says so: the page stays quick on long sessions."""

LIST_LIMIT = 200
SEARCH_LIMIT = 50


def session_summary(info: SessionInfo, short_id: str) -> dict[str, Any]:
    """One session as a listing shows it."""
    return {
        "id": info.id,
        "short_id": short_id,
        "title": info.title,
        "origin": info.origin,
        "model": info.model,
        "cwd": info.cwd,
        "created_at": info.created_at,
        "updated_at": info.updated_at,
        "message_count": info.message_count,
        "compaction_count": info.compaction_count,
        "input_tokens": info.input_tokens,
        "output_tokens": info.output_tokens,
        "cost_usd": info.cost_usd,
        "parent_id": info.parent_id,
        "fork_seq": info.fork_seq,
    }


def session_list(store: Store, limit: int = LIST_LIMIT) -> dict[str, Any]:
    """The most recently updated sessions, and how many there are."""
    sessions = store.sessions.list(limit=limit)
    short = store.sessions.short_ids(s.id for s in sessions)
    return {"sessions": [session_summary(s, short[s.id]) for s in sessions], "total": store.sessions.count()}


def trash_list(store: Store, limit: int = LIST_LIMIT) -> dict[str, Any]:
    """The sessions in the trash, most recently deleted first (as ``co sessions trash`` lists them)."""
    trashed = store.trash.list(limit=limit)
    short = store.sessions.short_ids(info.id for info, _ in trashed)
    return {"sessions": [{**session_summary(info, short[info.id]), "deleted_at": when} for info, when in trashed]}


def search_hits(
    store: Store, query: str, limit: int = SEARCH_LIMIT, stop: Callable[[], bool] | None = None
) -> dict[str, Any]:
    """The full-text search of `co sessions search`, best first; a snippet marks the matched words between
    ``open`` and ``close``. Ends (StoreError) soon after ``stop()`` turns true."""
    hits = store.search.messages(query, limit=limit, stop=stop)
    short = store.sessions.short_ids({hit.session_id for hit in hits})
    return {
        "query": query,
        "open": SNIPPET_OPEN,
        "close": SNIPPET_CLOSE,
        "hits": [
            {
                "session_id": hit.session_id,
                "short_id": short[hit.session_id],
                "title": hit.title,
                "seq": hit.seq,
                "kind": hit.kind,
                "created_at": hit.created_at,
                "snippet": hit.snippet,
            }
            for hit in hits
        ],
    }


def session_record(store: Store, id_or_prefix: str) -> dict[str, Any]:
    """One session: its summary, pins in force, task list, and its transcript with each compaction, each usage
    row and the memories each turn was sent placed where they happened. SessionNotFound as the store raises it."""
    info = store.sessions.get(id_or_prefix)
    transcript = store.messages.transcript(info.id)
    compactions = store.compactions.list(info.id)
    usage = store.usage.timed_rows(info.id)
    tasks = store.tasks.latest(info.id)
    return {
        "session": session_summary(info, store.sessions.short_id(info.id)),
        "pins": [{"id": pin.id, "text": pin.text, "source": pin.source} for pin in store.pins.active(info.id)],
        "tasks": None
        if tasks is None
        else {
            "source": tasks.source,
            "created_at": tasks.created_at,
            "items": [{"text": item.text, "status": item.status} for item in tasks.items],
        },
        "items": transcript_items(transcript, compactions, usage, store.turn_memories.by_prompt(info.id)),
    }


def transcript_items(
    transcript: list[StoredMessage],
    compactions: list[CompactionRecord],
    usage: list[tuple[float, TurnUsage]],
    memories: dict[int, list[SentMemory]] | None = None,
) -> list[dict[str, Any]]:
    """Messages in order; after a turn's prompt, the memories the turn's requests were sent; after each message,
    the usage rows saved with it (a usage row belongs to the last message saved at or before it: a turn's chat
    row is saved with its answer), then the compactions that end at it."""
    after: dict[int, list[dict[str, Any]]] = {}
    for seq, sent in (memories or {}).items():
        after.setdefault(seq, []).append(_memories(seq, sent))
    saved_at = [stored.created_at for stored in transcript]
    for created_at, row in usage:
        at = bisect.bisect_right(saved_at, created_at) - 1
        seq = transcript[at].seq if at >= 0 else (transcript[0].seq if transcript else -1)
        after.setdefault(seq, []).append({"type": "usage", **asdict(row)})
    for record in compactions:
        after.setdefault(record.upto_seq, []).append(_compaction(record))
    items: list[dict[str, Any]] = []
    for stored in transcript:
        items.append(_message(stored))
        items.extend(after.pop(stored.seq, []))
    for rest in after.values():  # a compaction past the last message (a damaged record): still shown
        items.extend(rest)
    return items


def _message(stored: StoredMessage) -> dict[str, Any]:
    parts = []
    for view in views(stored.message):
        text = view.text
        part = {
            "kind": view.kind,
            "text": text[:PART_SHOWN_CHARS],
            "cut": len(text) > PART_SHOWN_CHARS,
            "chars": len(text),
            "tool_name": view.tool_name,
            "outcome": view.outcome,
        }
        if view.kind == "text":  # an answer: its Markdown, as elements the page builds (never as HTML)
            part["markdown"] = markdown_tree(text[:PART_SHOWN_CHARS])
        parts.append(part)
    return {
        "type": "message",
        "seq": stored.seq,
        "created_at": stored.created_at,
        "kind": stored.kind,
        "status": stored.status,
        "error": _failure(stored.message),
        "parts": parts,
    }


def _memories(seq: int, sent: list[SentMemory]) -> dict[str, Any]:
    return {
        "type": "memories",
        "seq": seq,
        "memories": [{"id": m.memory_id, "kind": m.kind, "text": m.text} for m in sent],
    }


def _compaction(record: CompactionRecord) -> dict[str, Any]:
    return {
        "type": "compaction",
        "description": record.describe(),
        "summary": record.summary,
        "method": record.method,
        "trigger": record.trigger,
        "from_seq": max(record.from_seq, 0),
        "upto_seq": record.upto_seq,
        "tokens_before": record.tokens_before,
        "tokens_after": record.tokens_after,
        "created_at": record.created_at,
        "undone": record.undone_at is not None,
    }


def _failure(message: ModelMessage) -> str | None:
    """Why a failed turn failed, with its hints told as they work for the page (no slash commands there)."""
    failure = failure_of(message)
    return retold(failure, "api") if failure else None
