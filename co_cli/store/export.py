"""Export a session as Markdown (for people) or JSON (lossless, versioned), and import the JSON back."""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from datetime import datetime
from typing import Any

from co_cli.errors import CoError
from co_cli.store.sessions import (
    CompactionRecord,
    SessionInfo,
    SessionStore,
    StoredMessage,
    prompt_content_text,
)

EXPORT_FORMAT = "co-session"
EXPORT_VERSION = 1

_ROLE_HEADINGS = {
    "user": "User",
    "assistant": "Assistant",
    "tool-call": "Assistant (tool call)",
    "tool-return": "Tool result",
    "summary": "Summary",
    "system": "System",
}


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp).astimezone().isoformat(timespec="seconds")


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
    from pydantic_ai.messages import (
        BaseToolCallPart,
        BaseToolReturnPart,
        CompactionPart,
        ModelRequest,
        RetryFeedbackPart,
        SystemPromptPart,
        TextPart,
        ThinkingPart,
        UserPromptPart,
    )

    heading = _ROLE_HEADINGS.get(stored.kind, stored.kind)
    status = "" if stored.status == "ok" else f" — {stored.status}"
    blocks = [f"### {heading} · #{stored.seq} · {_iso(stored.created_at)}{status}"]
    message = stored.message
    for part in message.parts:
        if isinstance(part, SystemPromptPart):
            if not isinstance(message, ModelRequest) or stored.kind == "system":
                blocks.append(_fence(part.content))
        elif isinstance(part, UserPromptPart):
            blocks.append(prompt_content_text(part.content))
        elif isinstance(part, TextPart):
            blocks.append(part.content)
        elif isinstance(part, ThinkingPart):
            if part.content:
                blocks.append("> " + part.content.replace("\n", "\n> "))
        elif isinstance(part, BaseToolCallPart):
            args = json.dumps(part.args_as_dict(), indent=2, ensure_ascii=False)
            blocks.append(f"Tool call `{part.tool_name}` (id `{part.tool_call_id}`):\n\n{_fence(args, 'json')}")
        elif isinstance(part, BaseToolReturnPart):
            outcome = "" if part.outcome == "success" else f" ({part.outcome})"
            blocks.append(f"Result of `{part.tool_name}`{outcome}:\n\n{_fence(part.model_response_str())}")
        elif isinstance(part, RetryFeedbackPart):
            blocks.append(_fence(part.model_response()))
        elif isinstance(part, CompactionPart) and part.content:
            blocks.append(part.content)
    return "\n\n".join(blocks)


def export_markdown(store: SessionStore, session_id: str) -> str:
    """The whole transcript as readable Markdown: title, metadata, then each message under its role."""
    info = store.get(session_id)
    lines = [
        f"# {info.title or 'Untitled session'}",
        "",
        f"- Session: `{info.id}`",
        f"- Created: {_iso(info.created_at)}",
        f"- Updated: {_iso(info.updated_at)}",
        f"- Model: {info.model or 'unknown'}",
        f"- Directory: `{info.cwd}`",
        f"- Messages: {info.message_count}",
        f"- Tokens: {info.input_tokens} in, {info.output_tokens} out; cost ${info.cost_usd:.4f}",
    ]
    if info.parent_id:
        lines.append(f"- Forked from: `{info.parent_id}` at message #{info.fork_seq}")
    if info.compaction_count:
        lines.append(f"- Compactions: {info.compaction_count}")
    parts = ["\n".join(lines)]
    parts.extend(_message_markdown(stored) for stored in store.transcript(info.id))
    return "\n\n".join(parts) + "\n"


def export_json(store: SessionStore, session_id: str) -> str:
    """Lossless JSON: metadata, every message (pydantic-ai's own JSON form) and every compaction."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    info = store.get(session_id)
    transcript = store.transcript(info.id)
    messages = ModelMessagesTypeAdapter.dump_python([s.message for s in transcript], mode="json")
    compactions = []
    for record in store.compactions(info.id):
        data = asdict(record)
        data["replacement"] = ModelMessagesTypeAdapter.dump_python(record.replacement, mode="json")
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
    return json.dumps(document, ensure_ascii=False, indent=1)


def _invalid(reason: str) -> CoError:
    return CoError(f"not a co session export: {reason}")


def _require(data: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise _invalid(f"{where}.{key} is missing or has the wrong type")
    return value


def _parse_session(data: dict[str, Any]) -> SessionInfo:
    number = (int, float)
    values: dict[str, Any] = {}
    for field in fields(SessionInfo):
        if field.name in ("parent_id", "fork_seq"):
            value = data.get(field.name)
            expected: type | tuple[type, ...] = str if field.name == "parent_id" else int
            if value is not None and not isinstance(value, expected):
                raise _invalid(f"session.{field.name} has the wrong type")
            values[field.name] = value
        elif field.name in ("created_at", "updated_at", "cost_usd"):
            values[field.name] = float(_require(data, field.name, number, "session"))
        elif field.name in ("message_count", "input_tokens", "output_tokens", "compaction_count"):
            values[field.name] = _require(data, field.name, int, "session")
        else:
            values[field.name] = _require(data, field.name, str, "session")
    return SessionInfo(**values)


def import_json(store: SessionStore, text: str) -> SessionInfo:
    """Read an ``export_json`` document back; a taken id is imported under a new one."""
    from pydantic import ValidationError
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _invalid(f"invalid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(document, dict) or document.get("format") != EXPORT_FORMAT:
        raise _invalid(f"expected a JSON object with format {EXPORT_FORMAT!r}")
    version = document.get("version")
    if version != EXPORT_VERSION:
        raise CoError(f"unsupported co session export version {version!r} (this co reads {EXPORT_VERSION})")
    info = _parse_session(_require(document, "session", dict, "document"))
    raw_messages = _require(document, "messages", list, "document")
    raw_compactions = _require(document, "compactions", list, "document")
    try:
        stored: list[StoredMessage] = []
        for index, item in enumerate(raw_messages):
            if not isinstance(item, dict):
                raise _invalid(f"messages[{index}] is not an object")
            seq = _require(item, "seq", int, f"messages[{index}]")
            if seq != index:
                raise _invalid(f"messages[{index}] has seq {seq}; seqs must run 0, 1, 2, ...")
            status = _require(item, "status", str, f"messages[{index}]")
            if status not in ("ok", "failed", "cancelled"):
                raise _invalid(f"messages[{index}] has unknown status {status!r}")
            message = ModelMessagesTypeAdapter.validate_python([item.get("message")])[0]
            created = float(_require(item, "created_at", (int, float), f"messages[{index}]"))
            stored.append(StoredMessage(seq, created, str(item.get("kind", "")), "", status, message))
        records: list[CompactionRecord] = []
        for index, item in enumerate(raw_compactions):
            if not isinstance(item, dict):
                raise _invalid(f"compactions[{index}] is not an object")
            where = f"compactions[{index}]"
            trigger = _require(item, "trigger", str, where)
            if trigger not in ("auto", "manual"):
                raise _invalid(f"{where} has unknown trigger {trigger!r}")
            focus = item.get("focus")
            if focus is not None and not isinstance(focus, str):
                raise _invalid(f"{where}.focus has the wrong type")
            records.append(
                CompactionRecord(
                    from_seq=_require(item, "from_seq", int, where),
                    upto_seq=_require(item, "upto_seq", int, where),
                    summary=_require(item, "summary", str, where),
                    focus=focus,
                    trigger=trigger,
                    tokens_before=_require(item, "tokens_before", int, where),
                    tokens_after=_require(item, "tokens_after", int, where),
                    model=_require(item, "model", str, where),
                    replacement=ModelMessagesTypeAdapter.validate_python(_require(item, "replacement", list, where)),
                    created_at=float(_require(item, "created_at", (int, float), where)),
                )
            )
    except ValidationError as exc:
        raise _invalid(f"a message does not validate ({exc.error_count()} errors)") from None
    return store.import_session(info, stored, records)
