"""Read a session export (``co sessions export -f json``) strictly: every field checked for type and range.

An import must not put into the database anything a live co would not have written: a time that cannot
be shown, a count SQLite cannot store, an id that is not an id, a message pydantic-ai cannot read, a
compaction pointing outside the transcript, a task list the set_tasks tool would refuse (too many tasks, an
empty, repeated or overlong one, an unknown status: ``store.tasks.checked_items``). Anything like that is
refused with one line naming the field. A list over the importing co's ``tasks_budget_tokens`` is not refused
(the budget is a setting, which may have been larger where the session was made): the import says so, as
``/tasks`` does of a list over a lowered budget.
"""

from __future__ import annotations

import json
import math
from dataclasses import fields
from typing import TYPE_CHECKING, Any, NamedTuple

from co_cli.errors import CoError
from co_cli.store.codec import valid_utf8
from co_cli.store.compactions import CompactionRecord
from co_cli.store.messages import StoredMessage
from co_cli.store.schema import MESSAGE_KINDS, MESSAGE_STATUSES
from co_cli.store.sessions import SessionInfo, is_session_id
from co_cli.store.tasks import StoredTask, TaskSnapshot, checked_items
from co_cli.vocabulary import SESSION_ORIGINS

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

EXPORT_FORMAT = "co-session"
EXPORT_VERSION = 1
MAX_TIMESTAMP = 2.0**32  # seconds since the epoch: early 2106
MAX_COUNT = 2**53  # tokens and counts: exact in a float, far inside SQLite's 64-bit integers
MAX_COST_USD = 1e12


def invalid(reason: str) -> CoError:
    return CoError(f"not a co session export: {reason}")


def _require(data: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise invalid(f"{where}.{key} is missing or has the wrong type")
    return value


def _text(data: dict[str, Any], key: str, where: str) -> str:
    return valid_utf8(_require(data, key, str, where))


def _timestamp(data: dict[str, Any], key: str, where: str) -> float:
    value = float(_require(data, key, (int, float), where))
    if not math.isfinite(value) or not 0 <= value < MAX_TIMESTAMP:
        raise invalid(f"{where}.{key} is not a time co can show ({value!r})")
    return value


def _count(data: dict[str, Any], key: str, where: str, low: int = 0, high: int = MAX_COUNT) -> int:
    value: int = _require(data, key, int, where)
    if not low <= value <= high:
        raise invalid(f"{where}.{key} is out of range ({value})")
    return value


def _parse_session(data: dict[str, Any]) -> SessionInfo:
    where = "session"
    values: dict[str, Any] = {}
    for field in fields(SessionInfo):
        name = field.name
        if name == "parent_id":
            parent = data.get(name)
            if parent is not None and not (isinstance(parent, str) and is_session_id(parent)):
                raise invalid("session.parent_id is not a session id")
            values[name] = parent
        elif name == "fork_seq":
            values[name] = None if data.get(name) is None else _count(data, name, where, low=-1)
        elif name in ("created_at", "updated_at"):
            values[name] = _timestamp(data, name, where)
        elif name == "cost_usd":
            cost = float(_require(data, name, (int, float), where))
            if not math.isfinite(cost) or not 0 <= cost <= MAX_COST_USD:
                raise invalid(f"session.cost_usd is out of range ({cost!r})")
            values[name] = cost
        elif name in ("message_count", "input_tokens", "output_tokens", "compaction_count"):
            values[name] = _count(data, name, where)
        elif name == "origin":  # documents exported before sessions had an origin are the terminal's
            origin = data.get(name, "terminal")
            if origin not in SESSION_ORIGINS:
                raise invalid(f"session.origin is not one of {', '.join(SESSION_ORIGINS)}")
            values[name] = origin
        else:
            values[name] = _text(data, name, where)
    return SessionInfo(**values)


def _validate_messages(items: list[Any], where: str) -> list[ModelMessage]:
    from pydantic import ValidationError
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    try:
        return ModelMessagesTypeAdapter.validate_python(items)
    except ValidationError as exc:
        raise invalid(f"{where} does not validate as a message ({exc.error_count()} errors)") from None


def _parse_message(item: Any, index: int) -> StoredMessage:
    where = f"messages[{index}]"
    if not isinstance(item, dict):
        raise invalid(f"{where} is not an object")
    seq = _require(item, "seq", int, where)
    if seq != index:
        raise invalid(f"{where} has seq {seq}; seqs must run 0, 1, 2, ...")
    status = _require(item, "status", str, where)
    if status not in MESSAGE_STATUSES:
        raise invalid(f"{where} has unknown status {status!r}")
    kind = item.get("kind", "")
    if kind and kind not in MESSAGE_KINDS:
        raise invalid(f"{where} has unknown kind {kind!r}")
    created = _timestamp(item, "created_at", where)
    message = _validate_messages([item.get("message")], f"{where}.message")[0]
    return StoredMessage(seq, created, str(kind), "", status, message)


def _parse_compaction(item: Any, index: int, message_count: int) -> CompactionRecord:
    where = f"compactions[{index}]"
    if not isinstance(item, dict):
        raise invalid(f"{where} is not an object")
    trigger = _require(item, "trigger", str, where)
    if trigger not in ("auto", "manual"):
        raise invalid(f"{where} has unknown trigger {trigger!r}")
    focus = item.get("focus")
    if focus is not None and not isinstance(focus, str):
        raise invalid(f"{where}.focus has the wrong type")
    upto = _count(item, "upto_seq", where, low=-1, high=message_count - 1)
    start = _count(item, "from_seq", where, low=-1, high=upto)
    replacement = _validate_messages(_require(item, "replacement", list, where), f"{where}.replacement")
    return CompactionRecord(
        from_seq=start,
        upto_seq=upto,
        summary=_text(item, "summary", where),
        focus=None if focus is None else valid_utf8(focus),
        trigger=trigger,
        tokens_before=_count(item, "tokens_before", where),
        tokens_after=_count(item, "tokens_after", where),
        model=_text(item, "model", where),
        replacement=replacement,
        created_at=_timestamp(item, "created_at", where),
        method=_optional_text(item, "method", where, "summary"),
        detail=_optional_text(item, "detail", where, ""),
        ledger=_optional_text(item, "ledger", where, ""),
        tiers=_optional_text(item, "tiers", where, ""),
        undone_at=None if item.get("undone_at") is None else _timestamp(item, "undone_at", where),
    )


def _parse_task_list(item: Any, index: int, message_count: int) -> TaskSnapshot:
    where = f"task_lists[{index}]"
    if not isinstance(item, dict):
        raise invalid(f"{where} is not an object")
    source = _require(item, "source", str, where)
    if source not in ("model", "user"):
        raise invalid(f"{where} has unknown source {source!r}")
    tasks: list[StoredTask] = []
    for n, task in enumerate(_require(item, "items", list, where)):
        at = f"{where}.items[{n}]"
        if not isinstance(task, dict):
            raise invalid(f"{at} is not an object")
        status = _require(task, "status", str, at)
        created, updated = _timestamp(task, "created_at", at), _timestamp(task, "updated_at", at)
        tasks.append(StoredTask(_text(task, "text", at), status, created, updated))
    try:  # the rules the set_tasks tool and /tasks keep, so no list comes in that they would refuse
        cleaned = checked_items([(task.text, task.status) for task in tasks])
    except CoError as exc:
        raise invalid(f"{where}: {exc.message}") from None
    tasks = [task._replace(text=text) for task, (text, _) in zip(tasks, cleaned, strict=True)]
    seq = _count(item, "seq", where, low=-1, high=message_count - 1)
    return TaskSnapshot(seq, _timestamp(item, "created_at", where), source, tasks)


def _optional_text(item: dict[str, Any], key: str, where: str, default: str) -> str:
    """A text field that exports of earlier versions lack."""
    return default if item.get(key) is None else _text(item, key, where)


class ParsedExport(NamedTuple):
    info: SessionInfo
    messages: list[StoredMessage]
    compactions: list[CompactionRecord]
    task_lists: list[TaskSnapshot]
    """Every version of the task list (none in exports from before co kept one)."""


def parse_export(text: str) -> ParsedExport:
    """The session, its messages, compactions and task lists from an export; CoError naming the first bad
    field."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise invalid(f"invalid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise invalid("the JSON is nested too deeply") from None
    if not isinstance(document, dict) or document.get("format") != EXPORT_FORMAT:
        raise invalid(f"expected a JSON object with format {EXPORT_FORMAT!r}")
    version = document.get("version")
    if version != EXPORT_VERSION:
        raise CoError(f"unsupported co session export version {version!r} (this co reads {EXPORT_VERSION})")
    info = _parse_session(_require(document, "session", dict, "document"))
    raw_messages = _require(document, "messages", list, "document")
    raw_compactions = _require(document, "compactions", list, "document")
    if not raw_messages:
        raise invalid("the session has no messages")
    messages = [_parse_message(item, index) for index, item in enumerate(raw_messages)]
    if info.fork_seq is not None and info.fork_seq >= len(messages):
        raise invalid(f"session.fork_seq is out of range ({info.fork_seq})")
    compactions = [_parse_compaction(item, index, len(messages)) for index, item in enumerate(raw_compactions)]
    raw_lists = document.get("task_lists", [])
    if not isinstance(raw_lists, list):
        raise invalid("document.task_lists has the wrong type")
    task_lists = [_parse_task_list(item, index, len(messages)) for index, item in enumerate(raw_lists)]
    return ParsedExport(info, messages, compactions, task_lists)
