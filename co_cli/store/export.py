"""Export a session as Markdown (for people) or JSON (lossless, versioned), and import the JSON back."""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from co_cli.errors import StoreError
from co_cli.store.compactions import CompactionRecord, compactions_by_position
from co_cli.store.import_document import EXPORT_FORMAT, EXPORT_VERSION, parse_export
from co_cli.store.messages import SavedRow, StoredMessage
from co_cli.store.redact import as_saved, as_saved_json, url_without_credentials
from co_cli.store.sessions import SessionInfo
from co_cli.store.tasks import StoredTask, TaskSnapshot, earlier_tasks
from co_cli.terminal_text import format_cost

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

    from co_cli.store.tables import Store

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


_MARKDOWN_SPECIAL = str.maketrans({c: f"\\{c}" for c in "\\`*_[]<>#|~"})


def _task_markdown(task: StoredTask) -> str:
    """A Markdown task-list item; the text stays plain text (Markdown's own characters escaped)."""
    note = " (in progress)" if task.status == "in_progress" else ""
    return f"- [{'x' if task.status == 'done' else ' '}] {task.text.translate(_MARKDOWN_SPECIAL)}{note}"


def _tasks_markdown(history: list[TaskSnapshot]) -> str:
    """The task list as it stands last, then every task that left it."""
    latest = history[-1]
    lines = [f"## Tasks\n\nSet by the {latest.source} at {_iso(latest.created_at)}:", ""]
    lines += [_task_markdown(task) for task in latest.items] or ["(the list is empty)"]
    gone = earlier_tasks(history, latest.items)
    if gone:
        lines += ["", "Earlier tasks (no longer on the list):", ""]
        lines += [_task_markdown(task) for task in gone]
    return "\n".join(lines)


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
    task_history = store.tasks.history(info.id)
    if task_history:
        parts.append(_tasks_markdown(task_history))
    changes = store.file_changes.with_diffs(info.id)
    if changes:
        parts.append(
            "## Files changed\n\n"
            + "\n\n".join(
                f"`{row.path}` ({row.tool}, turn #{row.seq}):\n\n{_fence(diff, 'diff')}" for row, diff in changes
            )
        )
    placed = compactions_by_position(store.compactions.list(info.id))
    for stored in store.messages.transcript(info.id):
        parts.append(_message_markdown(stored))
        for record in placed.get(stored.seq, []):
            summary = record.summary.replace("\n", "\n> ")
            parts.append(f"> **{record.describe()}**\n>\n> {summary}")
    return "\n\n".join(parts) + "\n"


def export_json(store: Store, session_id: str) -> str:
    """Lossless JSON: metadata, every message (pydantic-ai's own JSON form), every compaction and every task list."""
    return json.dumps(export_document(store, session_id), ensure_ascii=False, indent=1)


def export_json_line(store: Store, session_id: str) -> str:
    """The same document on one line (for JSON lines: ``co sessions export --all``)."""
    info = store.sessions.get(session_id)
    return _json_line(store, info, store.messages.saved_rows(info.id), has_compactions=True)


def export_all_json_lines(store: Store) -> Iterator[str]:
    """``export_json_line`` of every session outside the trash, most recently updated first, reading the
    messages of them all in one query."""
    sessions = store.sessions.list(limit=2**62)
    rows = store.messages.saved_rows_by_session()
    compacted = store.compactions.session_ids()
    for info in sessions:
        yield _json_line(store, info, rows.get(info.id, []), has_compactions=info.id in compacted)


def _json_line(store: Store, info: SessionInfo, rows: list[SavedRow], *, has_compactions: bool) -> str:
    """The messages' saved JSON is written as it is (compact, as saved) unless it needs redacting, not parsed
    and encoded again: that was the bulk of an export of every session."""
    placeholder = f"messages-{uuid.uuid4().hex}"
    document = _document(store, info, placeholder, has_compactions=has_compactions)
    line = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    entries = ",".join(_entry_line(row) for row in rows)
    return line.replace(json.dumps(placeholder), f"[{entries}]", 1)


def _entry_line(row: SavedRow) -> str:
    message = row.json[1:-1] if row.json.startswith("[") and row.json.endswith("]") else ""
    if not message or _needs_redacting(message):
        message = json.dumps(_saved_message(row), ensure_ascii=False, separators=(",", ":"))
    kind = row.kind if _PLAIN_WORD.fullmatch(row.kind) else json.dumps(row.kind, ensure_ascii=False)[1:-1]
    status = row.status if _PLAIN_WORD.fullmatch(row.status) else json.dumps(row.status, ensure_ascii=False)[1:-1]
    return (
        f'{{"seq":{_number(row.seq)},"created_at":{_number(row.created_at)},"kind":"{kind}","status":"{status}",'
        f'"message":{message}}}'
    )


_PLAIN_WORD = re.compile(r"[a-z-]+")


def _number(value: object) -> str:
    """``value`` as ``json.dumps`` writes it, without its per-call cost for the common finite number."""
    if type(value) is int or (type(value) is float and math.isfinite(value)):
        return repr(value)
    return json.dumps(value)


_PROVIDER_URL = re.compile(r'"provider_url":"((?:[^"\\]|\\.)*)"')


def _needs_redacting(message: str) -> bool:
    """Whether saved JSON holds instructions or a provider URL with credentials (saved before co left them
    out)."""
    if '"instructions":"' in message:
        return True
    found = _PROVIDER_URL.search(message)
    return found is not None and url_without_credentials(json.loads(f'"{found.group(1)}"')) != json.loads(
        f'"{found.group(1)}"'
    )


def _saved_message(row: SavedRow) -> dict[str, Any]:
    """The message of a saved row in pydantic-ai's JSON form, without what saving leaves out."""
    try:
        [message] = json.loads(row.json)
    except (ValueError, TypeError):
        raise StoreError(f"message #{row.seq} holds JSON this co cannot read") from None
    return as_saved_json(message)


def export_document(store: Store, session_id: str) -> dict[str, object]:
    """The export of one session as a JSON-ready document."""
    info = store.sessions.get(session_id)
    # Saving strips credentials and instructions already; stripping again covers databases written before.
    messages = [
        {
            "seq": row.seq,
            "created_at": row.created_at,
            "kind": row.kind,
            "status": row.status,
            "message": _saved_message(row),
        }
        for row in store.messages.saved_rows(info.id)
    ]
    return _document(store, info, messages, has_compactions=True)


def _document(store: Store, info: SessionInfo, messages: object, *, has_compactions: bool) -> dict[str, object]:
    compactions = []
    for record in store.compactions.list(info.id) if has_compactions else []:
        from pydantic_ai.messages import ModelMessagesTypeAdapter  # only here: importing it takes a second

        data = asdict(record)
        data["replacement"] = ModelMessagesTypeAdapter.dump_python(as_saved(record.replacement), mode="json")
        compactions.append(data)
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "session": {field.name: getattr(info, field.name) for field in fields(info)},
        "messages": messages,
        "compactions": compactions,
        "task_lists": [
            {**snapshot._asdict(), "items": [item._asdict() for item in snapshot.items]}
            for snapshot in store.tasks.history(info.id)
        ],
        "file_changes": [
            {"seq": row.seq, "created_at": row.created_at, "path": row.path, "tool": row.tool, "diff": diff}
            for row, diff in store.file_changes.with_diffs(info.id)
        ],
    }


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
    info, messages, compactions, task_lists = parse_export(text)
    messages, compactions = resumable(messages, compactions, repair)
    return store.import_session(info, messages, compactions, task_lists)
