"""Find tool calls in the plain text a small local model writes.

A local model has no tool-call channel: it is told to answer with
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` and, being small, sometimes writes the
JSON fenced or bare instead. ``parse_tool_calls`` accepts all three; anything that is not a well-formed
call to a known tool stays text. ``could_be_tool_call_prefix`` and ``streamable_length`` decide, while
a response streams, which text may still turn into a call and must be held back.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
FENCE = "```"
_FENCE_LANGUAGES = frozenset({"", "json", "tool_call", "tool_code", "javascript", "js"})
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")

_DECODER = json.JSONDecoder()
_TOOL_CALL_TAG = re.compile(r"<tool_call>\s*", re.IGNORECASE)
_CLOSING_TAG = re.compile(r"\s*</tool_call>", re.IGNORECASE)
_FENCED_BLOCK = re.compile(r"```[ \t]*([A-Za-z_]*)[ \t]*\n?(.*?)```", re.DOTALL)
_BLANK_LINES = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")


@dataclass(frozen=True)
class ParsedCall:
    """One tool call found in the text: the tool's name and its arguments."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


def parse_tool_calls(text: str, tool_names: set[str]) -> tuple[str, list[ParsedCall]]:
    """Split ``text`` into the prose left over and the calls to tools in ``tool_names``, in order."""
    spans: list[tuple[int, int, list[ParsedCall]]] = []
    if tool_names:
        _collect_tagged(text, tool_names, spans)
        _collect_fenced(text, tool_names, spans)
        _collect_bare(text, tool_names, spans)
    if not spans:
        return text, []
    spans.sort(key=lambda span: span[0])
    calls: list[ParsedCall] = []
    pieces: list[str] = []
    position = 0
    for start, end, found in spans:
        pieces.append(text[position:start])
        calls.extend(found)
        position = end
    pieces.append(text[position:])
    leftover = _BLANK_LINES.sub("\n\n", "".join(pieces)).strip()
    return leftover, calls


def could_be_tool_call_prefix(text: str) -> bool:
    """Whether ``text`` (the start of a response, or of a line in it) may still turn into a tool call."""
    stripped = text.lstrip()
    if not stripped:
        return True
    if stripped[0] == "<":
        return _could_be_tagged(stripped)
    if stripped[0] == "`":
        return _could_be_fenced(stripped)
    if stripped[0] in "{[":
        return _could_be_json_call(stripped)
    return False


def streamable_length(text: str) -> int:
    """How many leading characters of ``text`` are surely prose and can be shown now.

    A call may start anywhere a ``<tool_call>`` tag may, or at the start of a line for a fence or bare
    JSON; text from the first such place that may still become a call is held back.
    """
    for index in _candidate_starts(text):
        if could_be_tool_call_prefix(text[index:]):
            return index
    return len(text)


def _candidate_starts(text: str) -> list[int]:
    starts = [0]
    for index, char in enumerate(text):
        if index == 0:
            continue
        if char == "<" or (char in "`{[" and _at_line_start(text, index)):
            starts.append(index)
    return starts


def _at_line_start(text: str, index: int) -> bool:
    line_start = text.rfind("\n", 0, index) + 1
    return line_start > 0 and not text[line_start:index].strip()


def _could_be_tagged(text: str) -> bool:
    head = text[: len(TOOL_CALL_OPEN)].lower()
    return TOOL_CALL_OPEN.startswith(head)


def _could_be_fenced(text: str) -> bool:
    if len(text) < len(FENCE):
        return FENCE.startswith(text)
    if not text.startswith(FENCE):
        return False
    after = text[len(FENCE) :]
    newline = after.find("\n")
    if newline < 0:
        return after.strip().lower() in _FENCE_LANGUAGES or _is_language_prefix(after.strip().lower())
    language = after[:newline].strip().lower()
    if language not in _FENCE_LANGUAGES:
        return False
    body = after[newline + 1 :]
    closing = body.find(FENCE)
    if closing >= 0:
        return _contains_call_shape(body[:closing])
    return could_be_tool_call_prefix(body) if body.strip() else True


def _is_language_prefix(word: str) -> bool:
    return any(language.startswith(word) for language in _FENCE_LANGUAGES)


def _could_be_json_call(text: str) -> bool:
    try:
        value, _ = _DECODER.raw_decode(text)
    except json.JSONDecodeError:
        return _looks_like_json_start(text)
    return _has_call_shape(value)


def _looks_like_json_start(text: str) -> bool:
    """An unfinished object whose first key is still to come or is a string: JSON, not prose in braces."""
    rest = text[1:].lstrip()
    if text[0] == "[":
        return not rest or rest[0] == "{" and _looks_like_json_start(rest)
    return not rest or rest[0] == '"'


def _contains_call_shape(body: str) -> bool:
    try:
        value = json.loads(body)
    except json.JSONDecodeError:
        return False
    return _has_call_shape(value)


def _has_call_shape(value: Any) -> bool:
    if isinstance(value, list):
        return bool(value) and all(_has_call_shape(item) for item in value)
    if not isinstance(value, dict):
        return False
    if isinstance(value.get("function"), dict):
        return _has_call_shape(value["function"])
    return isinstance(value.get("name"), str)


def _to_calls(value: Any, tool_names: set[str]) -> list[ParsedCall] | None:
    """The calls ``value`` stands for, or None when it is not entirely calls to known tools."""
    items = value if isinstance(value, list) else [value]
    if not items:
        return None
    calls: list[ParsedCall] = []
    for item in items:
        call = _to_call(item, tool_names)
        if call is None:
            return None
        calls.append(call)
    return calls


def _to_call(item: Any, tool_names: set[str]) -> ParsedCall | None:
    if not isinstance(item, dict):
        return None
    if isinstance(item.get("function"), dict):
        item = item["function"]
    name = item.get("name")
    if not isinstance(name, str) or name not in tool_names:
        return None
    raw_arguments: Any = next((item[key] for key in _ARGUMENT_KEYS if key in item), {})
    if isinstance(raw_arguments, str):
        if not raw_arguments.strip():
            raw_arguments = {}
        else:
            try:
                raw_arguments = json.loads(raw_arguments)
            except json.JSONDecodeError:
                return None
    if raw_arguments is None:
        raw_arguments = {}
    if not isinstance(raw_arguments, dict):
        return None
    return ParsedCall(name=name, arguments=raw_arguments)


def _overlaps(spans: list[tuple[int, int, list[ParsedCall]]], start: int, end: int) -> bool:
    return any(start < taken_end and taken_start < end for taken_start, taken_end, _ in spans)


def _collect_tagged(text: str, tool_names: set[str], spans: list[tuple[int, int, list[ParsedCall]]]) -> None:
    for match in _TOOL_CALL_TAG.finditer(text):
        try:
            value, end = _DECODER.raw_decode(text, match.end())
        except json.JSONDecodeError:
            continue
        calls = _to_calls(value, tool_names)
        if calls is None:
            continue
        closing = _CLOSING_TAG.match(text, end)
        if closing:
            end = closing.end()
        if not _overlaps(spans, match.start(), end):
            spans.append((match.start(), end, calls))


def _collect_fenced(text: str, tool_names: set[str], spans: list[tuple[int, int, list[ParsedCall]]]) -> None:
    for match in _FENCED_BLOCK.finditer(text):
        if match.group(1).lower() not in _FENCE_LANGUAGES or _overlaps(spans, match.start(), match.end()):
            continue
        body = _TOOL_CALL_TAG.sub("", _CLOSING_TAG.sub("", match.group(2))).strip()
        try:
            value = json.loads(body)
        except json.JSONDecodeError:
            continue
        calls = _to_calls(value, tool_names)
        if calls is not None:
            spans.append((match.start(), match.end(), calls))


def _collect_bare(text: str, tool_names: set[str], spans: list[tuple[int, int, list[ParsedCall]]]) -> None:
    index = 0
    while index < len(text):
        char = text[index]
        if char not in "{[" or _overlaps(spans, index, index + 1):
            index += 1
            continue
        try:
            value, end = _DECODER.raw_decode(text, index)
        except json.JSONDecodeError:
            index += 1
            continue
        calls = _to_calls(value, tool_names)
        if calls is not None and not _overlaps(spans, index, end):
            spans.append((index, end, calls))
        index = end
