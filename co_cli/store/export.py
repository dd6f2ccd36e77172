"""Export a session as Markdown (for people) or JSON (lossless, versioned), and import the JSON back."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from typing import TYPE_CHECKING

from co_cli.store.compactions import CompactionRecord, compactions_by_position
from co_cli.store.import_document import EXPORT_FORMAT, EXPORT_VERSION, parse_export
from co_cli.store.messages import StoredMessage
from co_cli.store.redact import without_credentials
from co_cli.store.sessions import SessionInfo
from co_cli.store.usage import format_cost

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

    from co_cli.store import Store

_ROLE_HEADINGS = {
    "user": "User",
    "assistant": "Assistant",
    "tool-call": "Assistant (tool call)",
    "tool-return": "Tool result",
    "summary": "Summary",
    "system": "System",
}


def _iso(timestamp: float) -> str:
    """Local ISO time; a value that is no time (from an odd database) as it is, not an error."""
    try:
        return datetime.fromtimestamp(timestamp).astimezone().isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError, TypeError):
        return f"(time {timestamp!r})"


def _fence(text: str, lang: str = "") -> str:
    """A fenced block whose fence is longer than any backtick run inside the text."""
    longest = max((len(run) for run in text.split("\n") for run in _backtick_runs(run)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def _backtick_runs(line: str) -> list[str]:
    runs: list[str] = []
    current = ""
    for char in line:
        if char == "`":
            current += char
        elif current:
            runs.append(current)
            current = ""
    if current:
        runs.append(current)
    return runs


def _message_markdown(stored: StoredMessage) -> str:
    from co_cli.message_view import pretty_args, views

    heading = _ROLE_HEADINGS.get(stored.kind, stored.kind)
    status = "" if stored.status == "ok" else f" — {stored.status}"
    blocks = [f"### {heading} · #{stored.seq} · {_iso(stored.created_at)}{status}"]
    for view in views(stored.message):
        if view.kind == "system":
            if stored.kind == "system":
                blocks.append(_fence(view.text))
        elif view.kind in ("user", "text", "compaction"):
            if view.text:
                blocks.append(view.text)
        elif view.kind == "thinking":
            if view.text:
                blocks.append("> " + view.text.replace("\n", "\n> "))
        elif view.kind == "tool-call":
            call = f"Tool call `{view.tool_name}` (id `{view.tool_call_id}`):"
            blocks.append(f"{call}\n\n{_fence(pretty_args(view), 'json')}")
        elif view.kind == "tool-return":
            outcome = "" if view.outcome in (None, "success") else f" ({view.outcome})"
            blocks.append(f"Result of `{view.tool_name}`{outcome}:\n\n{_fence(view.text)}")
        elif view.kind == "retry":
            blocks.append(_fence(view.text))
    return "\n\n".join(blocks)


def export_markdown(store: Store, session_id: str) -> str:
    """The whole transcript as readable Markdown: title, metadata, then each message under its role."""
    info = store.sessions.get(session_id)
    lines = [
        f"# {info.title or 'Untitled session'}",
        "",
        f"- Session: `{info.id}`",
        f"- Created: {_iso(info.created_at)}",
        f"- Updated: {_iso(info.updated_at)}",
        f"- Model: {info.model or 'unknown'}",
        f"- Directory: `{info.cwd}`",
        f"- Messages: {info.message_count}",
        f"- Tokens: {info.input_tokens} in, {info.output_tokens} out; cost "
        + format_cost(store.usage.totals([info.id]).get(info.id)),
    ]
    if info.parent_id:
        lines.append(f"- Forked from: `{info.parent_id}` at message #{info.fork_seq}")
    if info.compaction_count:
        lines.append(f"- Compactions: {info.compaction_count}")
    parts = ["\n".join(lines)]
    placed = compactions_by_position(store.compactions.list(info.id))
    for stored in store.messages.transcript(info.id):
        parts.append(_message_markdown(stored))
        for record in placed.get(stored.seq, []):
            summary = record.summary.replace("\n", "\n> ")
            parts.append(f"> **{record.describe()}**\n>\n> {summary}")
    return "\n\n".join(parts) + "\n"


def export_json(store: Store, session_id: str) -> str:
    """Lossless JSON: metadata, every message (pydantic-ai's own JSON form) and every compaction."""
    return json.dumps(export_document(store, session_id), ensure_ascii=False, indent=1)


def export_json_line(store: Store, session_id: str) -> str:
    """The same document on one line (for JSON lines: ``co sessions export --all``)."""
    return json.dumps(export_document(store, session_id), ensure_ascii=False, separators=(",", ":"))


def export_document(store: Store, session_id: str) -> dict[str, object]:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    info = store.sessions.get(session_id)
    transcript = store.messages.transcript(info.id)
    # Saving strips credentials already; stripping again covers databases written before it did.
    messages = ModelMessagesTypeAdapter.dump_python(without_credentials([s.message for s in transcript]), mode="json")
    compactions = []
    for record in store.compactions.list(info.id):
        data = asdict(record)
        data["replacement"] = ModelMessagesTypeAdapter.dump_python(without_credentials(record.replacement), mode="json")
        compactions.append(data)
    document = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "session": asdict(info),
        "messages": [
            {"seq": s.seq, "created_at": s.created_at, "kind": s.kind, "status": s.status, "message": message}
            for s, message in zip(transcript, messages, strict=True)
        ],
        "compactions": compactions,
    }
    return document


Repair = Callable[[list["ModelMessage"]], list["ModelMessage"]]
"""Makes a history sendable: answers tool calls left unanswered (the context package's ``repair_orphans``)."""


def resumable(
    messages: list[StoredMessage], compactions: list[CompactionRecord], repair: Repair
) -> tuple[list[StoredMessage], list[CompactionRecord]]:
    """Close what a live co would have closed: tool calls left unanswered at the end of the transcript (after
    its failed turns, which a resume skips) or at the end of a compaction's replacement get the same
    "interrupted" result a cancelled turn saves (``repair``), so the session can be continued."""
    from pydantic_ai.messages import ModelResponse

    kept = [m for m in messages if m.status != "failed"]
    if kept and isinstance(kept[-1].message, ModelResponse):
        last = kept[-1]
        closing = repair([last.message])[1:]
        messages = messages + [
            StoredMessage(len(messages) + i, last.created_at, "", "", "ok", message)
            for i, message in enumerate(closing)
        ]
    for record in compactions:
        record.replacement = repair(record.replacement)
    return messages, compactions


def import_json(store: Store, text: str, repair: Repair) -> SessionInfo:
    """Read an ``export_json`` document back; a taken id is imported under a new one.

    Every field is checked (``parse_export``) and the transcript closed so it can be continued (``resumable``)."""
    info, messages, compactions = parse_export(text)
    messages, compactions = resumable(messages, compactions, repair)
    return store.import_session(info, messages, compactions)
