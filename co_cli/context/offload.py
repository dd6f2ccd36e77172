"""Save very large tool results to private files; the context keeps a head/tail preview and a reference.

The transcript keeps the same: a turn is saved with its outputs bounded (``bound_for_transcript``), so a
preview and its reference are what the session holds, and the file holds the whole output. A request whose
output was replaced says so in its metadata (``OFFLOADED_KEY``: tool call id -> ref, never sent to a model),
so a preview is never offloaded again, whatever the threshold is later.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart

from co_cli.context.memo import MISS, MessageMemo
from co_cli.context.trim import is_plain_tool_return
from co_cli.message_view import content_text

HEAD_LINES = 20
TAIL_LINES = 10
HEAD_CHARS = 1500
TAIL_CHARS = 700
MAX_READ_LIMIT = 50_000
SUFFIX = ".txt"
READER_TOOL = "read_tool_output"
"""Its results are pages of an offloaded output (at most ``MAX_READ_LIMIT`` chars): never offloaded again,
or the model would get another ref instead of the text it asked for."""
REFERENCE = "[Full output ({n} chars) saved as ref={ref}; call read_tool_output(ref, offset, limit) to read it]"
OFFLOADED_KEY = "co_cli_offloaded"
STORED_OUTPUT_CEILING = 1_000_000
"""Characters of one tool output the transcript keeps whole at most, even when offloading is off."""

_SAFE_REF = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}$")
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9_.-]")


def ref_for(tool_call_id: str) -> str:
    """A file-name-safe reference derived from a tool call id (the id itself when it is already safe)."""
    if _SAFE_REF.match(tool_call_id) and ".." not in tool_call_id:
        return tool_call_id
    digest = hashlib.sha256(tool_call_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    stem = _UNSAFE_CHARS.sub("_", tool_call_id).strip("._")[:40]
    return f"{stem}-{digest}" if stem else digest


def _content_ref(tool_call_id: str, text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{ref_for(tool_call_id)[:55]}-{digest}"


def _ensure_private_dir(directory: Path) -> None:
    """Create ``directory`` and any missing parent 0700 (mkdir's mode is reduced by the umask)."""
    missing: list[Path] = []
    current = directory
    while not current.exists() and current.parent != current:
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
        os.chmod(path, 0o700)
    if directory.stat().st_mode & 0o777 != 0o700:
        os.chmod(directory, 0o700)


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _store(directory: Path, tool_call_id: str, text: str) -> str:
    """Write ``text`` once under a ref derived from the tool call id; return the ref."""
    data = text.encode("utf-8", "replace")
    ref = ref_for(tool_call_id)
    path = directory / (ref + SUFFIX)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        size = None
    if size is not None and size != len(data):
        # The same id for a different output (some local servers reuse ids): keep both.
        ref = _content_ref(tool_call_id, text)
        path = directory / (ref + SUFFIX)
        size = path.stat().st_size if path.exists() else None
    if size is None:
        _ensure_private_dir(directory)
        _write_private(path, data)
    return ref


def preview(text: str, ref: str) -> str:
    """The first and last lines of ``text`` (capped in characters) and the reference to the full output."""
    line_count = text.count("\n") + 1
    if line_count > HEAD_LINES + TAIL_LINES:
        head = "\n".join(text.split("\n", HEAD_LINES)[:HEAD_LINES])
        tail = "\n".join(text.rsplit("\n", TAIL_LINES)[-TAIL_LINES:])
    else:
        lines = text.split("\n")
        half = max(len(lines) // 2, 1)
        head = "\n".join(lines[:half])
        tail = "\n".join(lines[half:])
    head = head[:HEAD_CHARS]
    tail = tail[-TAIL_CHARS:] if tail else ""
    omitted = len(text) - len(head) - len(tail)
    pieces = [head, f"[… {omitted} chars omitted …]"]
    if tail:
        pieces.append(tail)
    pieces.append(REFERENCE.format(n=len(text), ref=ref))
    return "\n".join(pieces)


def offloaded_refs(msg: ModelMessage) -> dict[str, str]:
    """The outputs of ``msg`` already replaced by their preview: tool call id -> ref."""
    refs = (msg.metadata or {}).get(OFFLOADED_KEY) if isinstance(msg, ModelRequest) else None
    return refs if isinstance(refs, dict) else {}


def _offload_message(msg: ModelRequest, threshold: int, directory: Path, *, keep_unsaved: bool = False) -> ModelRequest:
    """``msg`` with its outputs past ``threshold`` saved and previewed. An output that cannot be saved raises
    OSError, or with ``keep_unsaved`` stays whole (nothing is lost)."""
    new_parts = None
    done = offloaded_refs(msg)
    refs: dict[str, str] = {}
    for part_index, part in enumerate(msg.parts):
        if not is_plain_tool_return(part) or part.tool_name == READER_TOOL or part.tool_call_id in done:
            continue
        content = part.content
        if isinstance(content, str) and len(content) <= threshold:
            continue
        text = content_text(content)
        if len(text) <= threshold:
            continue
        try:
            ref = _store(directory, part.tool_call_id, text)
        except OSError:
            if not keep_unsaved:
                raise
            continue
        shown = preview(text, ref)
        if len(shown) >= len(text):
            continue
        if new_parts is None:
            new_parts = list(msg.parts)
        new_parts[part_index] = replace(part, content=shown)
        refs[part.tool_call_id] = ref
    if new_parts is None:
        return msg
    metadata = {**(msg.metadata or {}), OFFLOADED_KEY: {**done, **refs}}
    return replace(msg, parts=new_parts, metadata=metadata)


def offload_large_outputs(
    messages: Sequence[ModelMessage], threshold: int, directory: Path, *, memo: MessageMemo | None = None
) -> list[ModelMessage]:
    """Copy of ``messages`` where every tool result longer than ``threshold`` characters is saved under
    ``directory`` and replaced by a preview (pages read back with ``read_tool_output`` excepted).
    ``threshold`` 0 disables; the input is never mutated.

    ``memo`` (optional) carries results between calls on the same growing history, so each output is
    saved and previewed once.
    """
    if threshold <= 0:
        return list(messages)
    result = list(messages)
    if memo is not None:
        memo.bind((threshold, directory))
    for index, msg in enumerate(messages):
        if not isinstance(msg, ModelRequest):
            continue
        offloaded: Any = memo.get(msg) if memo is not None else MISS
        if offloaded is MISS:
            offloaded = _offload_message(msg, threshold, directory)
            if memo is not None:
                memo.put(msg, offloaded)
        result[index] = offloaded
    if memo is not None:
        memo.prune(messages)
    return result


def stored_threshold(offload_threshold: int) -> int:
    """Characters past which a tool output is saved in the transcript as its preview and reference: the offload
    threshold (so the transcript holds what the model was sent), never more than ``STORED_OUTPUT_CEILING``."""
    return min(offload_threshold, STORED_OUTPUT_CEILING) if offload_threshold > 0 else STORED_OUTPUT_CEILING


def bound_for_transcript(
    messages: Sequence[ModelMessage], offload_threshold: int, directory: Path
) -> list[ModelMessage]:
    """``messages`` as the transcript keeps them: every tool output past ``stored_threshold`` saved whole under
    ``directory`` (0600) and replaced by the preview that names it (the one the model is sent). An output that
    cannot be saved there (the directory is broken, the disk full) is kept whole: the turn is still saved."""
    threshold = stored_threshold(offload_threshold)
    return [
        _offload_message(msg, threshold, directory, keep_unsaved=True) if isinstance(msg, ModelRequest) else msg
        for msg in messages
    ]


def _resolve(directory: Path, ref: str) -> Path | None:
    if not _SAFE_REF.match(ref) or ".." in ref:
        return None
    base = directory.resolve()
    path = (base / (ref + SUFFIX)).resolve()
    return path if path.parent == base else None


def read_tool_output(directory: Path, ref: str, offset: int = 0, limit: int = 4000) -> str:
    """Up to ``limit`` characters of an offloaded output from ``offset``, with where to continue."""
    ref = ref.strip()
    if ref.endswith(SUFFIX):
        ref = ref[: -len(SUFFIX)]
    path = _resolve(directory, ref)
    if path is None:
        return f"Error: invalid ref {ref!r}: a ref is a name like the one shown after 'ref=' in a preview."
    if not path.is_file():
        known = [name for name, _ in list_offloaded(directory)]
        hint = f" Known refs: {', '.join(known[:20])}." if known else " No outputs have been saved."
        return f"Error: unknown ref {ref!r}.{hint}"
    if offset < 0 or limit <= 0:
        return "Error: offset must be >= 0 and limit > 0."
    limit = min(limit, MAX_READ_LIMIT)
    text = path.read_text(encoding="utf-8", errors="replace")
    total = len(text)
    if offset >= total:
        return f"[ref={ref}: offset {offset} is past the end; the output has {total} chars]"
    end = min(offset + limit, total)
    chunk = text[offset:end]
    if end < total:
        footer = f"[ref={ref}: chars {offset}-{end} of {total}; next offset={end}]"
    else:
        footer = f"[ref={ref}: chars {offset}-{end} of {total}; end of output]"
    return f"{chunk}\n{footer}"


def list_offloaded(directory: Path) -> list[tuple[str, int]]:
    """(ref, size in characters) of every saved output, sorted by ref."""
    if not directory.is_dir():
        return []
    found: list[tuple[str, int]] = []
    for path in sorted(directory.glob("*" + SUFFIX)):
        if path.name.startswith(".") or not path.is_file():
            continue
        found.append((path.name[: -len(SUFFIX)], len(path.read_text(encoding="utf-8", errors="replace"))))
    return found


@dataclass(frozen=True)
class ToolOutput:
    """One tool's output whole: from its offloaded file when it was offloaded (``ref``), else as kept."""

    tool_name: str
    text: str
    ref: str | None = None


def last_tool_output(messages: Sequence[ModelMessage], directory: Path) -> ToolOutput | None:
    """The latest tool output of ``messages``, whole: an offloaded one is read back from its file under
    ``directory`` (its preview stands in when the file is gone). None when no tool has returned."""
    for msg in reversed(messages):
        if not isinstance(msg, ModelRequest):
            continue
        refs = offloaded_refs(msg)
        for part in reversed(msg.parts):
            if not isinstance(part, ToolReturnPart):
                continue
            ref = refs.get(part.tool_call_id)
            path = _resolve(directory, ref) if ref else None
            if path is not None and path.is_file():
                return ToolOutput(part.tool_name, path.read_text(encoding="utf-8", errors="replace"), ref)
            return ToolOutput(part.tool_name, content_text(part.content), ref)
    return None
