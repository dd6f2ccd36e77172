"""Edit tools: write_file and edit_file, confined to the working directory, each shown to the user as a diff.

A call is planned first: the path is checked (inside the working directory, not co's own files, through
symlinks and hard links as ``read_file`` checks them), the file read as text (not binary, at most
``EDIT_MAX_BYTES``, its encoding and line endings found) and the new content made. The plan's unified diff goes
to the user with ``ApprovalRequired``; nothing is written before the answer. Approved, the plan is made again
and written only if the file is still what the diff was made from. The file's previous content (or its absence)
is committed to the session's store first (``CoDeps.keep_file_change``), then the new content is written to a
temporary file beside it and moved over it (``os.replace``): a crash leaves the old file or the new one, never
half of one, and never a new one without its way back.
"""

from __future__ import annotations

import contextlib
import difflib
import glob
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic_ai import ApprovalRequired, RunContext

from co_cli.deps import CoDeps
from co_cli.store.file_changes import FileChange, content_hash, unified_diff
from co_cli.terminal_text import one_line
from co_cli.tools.blocking import off_loop, run_blocking
from co_cli.tools.files import GREP_MAX_FILE_BYTES, is_binary, tool_errors
from co_cli.tools.paths import (
    OUTSIDE_CWD_REASON,
    PRIVATE_REASON,
    PathError,
    display_path,
    is_inside,
    own_files,
    resolve_path,
    working_dir,
)

EDIT_MAX_BYTES = GREP_MAX_FILE_BYTES
"""The largest file an edit tool reads or writes (as large as grep searches)."""
EDIT_REASON = "changes a file"
CANDIDATES_SHOWN = 10
NEW_FILE_MODE = 0o644
TEMPORARY_SUFFIX = ".co-tmp"
STALE_TEMPORARY_SECONDS = 60.0
EDIT_TOOL_NAMES = ("write_file", "edit_file")


@dataclass(frozen=True)
class TextFile:
    """A file's content as text: LF line ends (CRLF files are turned back on writing), its encoding kept."""

    raw: bytes | None
    """The bytes on disk (None: the file does not exist)."""
    text: str
    encoding: str = "utf-8"
    crlf: bool = False

    def encode(self, text: str) -> bytes:
        """``text`` as this file writes it: in its encoding, with its line ends."""
        if self.crlf:
            text = text.replace("\r\n", "\n").replace("\n", "\r\n")
        try:
            return text.encode(self.encoding)
        except UnicodeEncodeError as exc:
            raise PathError(
                f"Error: the new text has characters the file's encoding ({self.encoding}) cannot hold: "
                f"{exc.object[exc.start : exc.end]!r}."
            ) from None


@dataclass(frozen=True)
class Plan:
    """An edit ready to be shown and made."""

    resolved: Path
    shown: str
    """The path as the user reads it (relative to the working directory)."""
    before: bytes | None
    after: bytes
    diff: str
    summary: str


def _target(ctx: RunContext[CoDeps], path: str) -> Path:
    """The resolved path an edit tool may change: inside the working directory, not co's own files (a symlink
    is followed to where it leads, a hard link to one of co's files is refused)."""
    cwd = working_dir(ctx.deps)
    resolved = resolve_path(cwd, path)
    if own_files(ctx.deps).holds(resolved):
        raise PathError(f"Error: {path} is {PRIVATE_REASON}; the edit tools never change it.")
    if not is_inside(cwd, resolved) or resolved == cwd:
        raise PathError(f"Error: {path} is {OUTSIDE_CWD_REASON}; the edit tools change files only inside it.")
    return resolved


def read_text(resolved: Path, path: str) -> TextFile:
    """The file as text (an absent one as empty); PathError for a directory, a special or binary file, a file
    too large."""
    if not resolved.exists():
        return TextFile(None, "")
    if not resolved.is_file():
        raise PathError(f"Error: {path} is not a regular file.")
    size = resolved.stat().st_size
    if size > EDIT_MAX_BYTES:
        raise PathError(f"Error: {path} is {size} bytes; the edit tools change files up to {EDIT_MAX_BYTES} bytes.")
    if is_binary(resolved):
        raise PathError(f"Error: {path} is a binary file; the edit tools change text files only.")
    raw = resolved.read_bytes()
    if raw.startswith(b"\xef\xbb\xbf"):
        encoding = "utf-8-sig"
    else:
        try:
            raw.decode("utf-8")
            encoding = "utf-8"
        except UnicodeDecodeError:
            encoding = "latin-1"  # every byte is a character: what the edit leaves alone stays byte for byte
    text = raw.decode(encoding)
    crlf = b"\r\n" in raw and raw.count(b"\r\n") == raw.count(b"\n")
    return TextFile(raw, text.replace("\r\n", "\n") if crlf else text, encoding, crlf)


def _counts(diff: str) -> str:
    added = sum(1 for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in diff.splitlines() if line.startswith("-") and not line.startswith("---"))
    return f"+{added} -{removed} lines"


def _plan(resolved: Path, shown: str, current: TextFile, new_text: str, verb: str) -> Plan:
    after = current.encode(new_text)
    if after == current.raw:
        raise PathError(f"Error: {shown} already holds exactly this text; nothing to change.")
    if len(after) > EDIT_MAX_BYTES:
        raise PathError(f"Error: the new {shown} would be {len(after)} bytes; the limit is {EDIT_MAX_BYTES}.")
    diff = unified_diff(shown, None if current.raw is None else current.text, new_text)
    what = "new file" if current.raw is None else _counts(diff)
    return Plan(resolved, shown, current.raw, after, diff, f"{verb} {shown} ({what})")


def plan_write(ctx: RunContext[CoDeps], path: str, content: str) -> Plan:
    resolved = _target(ctx, path)
    shown = display_path(working_dir(ctx.deps), resolved)
    current = read_text(resolved, path)
    return _plan(resolved, shown, current, content, "Wrote")


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _candidates(text: str, old: str) -> str:
    """Where the text looks most like ``old``'s first line, for a model whose string was not found."""
    wanted = next((line.strip() for line in old.splitlines() if line.strip()), "")
    lines = text.splitlines()
    stripped = [line.strip() for line in lines]
    close = difflib.get_close_matches(wanted, stripped, n=CANDIDATES_SHOWN // 2, cutoff=0.6) if wanted else []
    found = [f"  line {number + 1}: {line}" for number, line in enumerate(lines) if stripped[number] in close]
    return "\n".join(found[:CANDIDATES_SHOWN])


def plan_edit(ctx: RunContext[CoDeps], path: str, old_string: str, new_string: str) -> Plan:
    resolved = _target(ctx, path)
    shown = display_path(working_dir(ctx.deps), resolved)
    current = read_text(resolved, path)
    if current.raw is None:
        raise PathError(f"Error: {path} does not exist; use write_file to create it.")
    if not old_string:
        raise PathError("Error: old_string is empty; give the exact text to replace (write_file writes a whole file).")
    if old_string == new_string:
        raise PathError("Error: old_string and new_string are the same; nothing to change.")
    old, new = old_string.replace("\r\n", "\n"), new_string.replace("\r\n", "\n")
    text = current.text
    starts = []
    start = text.find(old)
    while start >= 0:
        starts.append(start)
        start = text.find(old, start + 1)
    if not starts:
        near = _candidates(text, old)
        hint = f" The closest lines:\n{near}" if near else ""
        raise PathError(f"Error: old_string was not found in {shown}; it must match exactly, spaces included.{hint}")
    if len(starts) > 1:
        where = "\n".join(
            f"  line {_line_of(text, s)}: {text.splitlines()[_line_of(text, s) - 1]}" for s in starts[:CANDIDATES_SHOWN]
        )
        raise PathError(
            f"Error: old_string occurs {len(starts)} times in {shown}; include more of the surrounding text so it "
            f"matches once:\n{where}"
        )
    new_text = text[: starts[0]] + new + text[starts[0] + len(old) :]
    return _plan(resolved, shown, current, new_text, "Edited")


def write_atomically(path: Path, data: bytes | None) -> None:
    """Make ``path`` hold ``data`` (None: remove it) all at once: a temporary file beside it, flushed to disk,
    then moved over it; an existing file's permissions are kept. A temporary file a killed co left beside it
    is removed."""
    if data is None:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    for left in path.parent.glob(f".{glob.escape(path.name)}.*{TEMPORARY_SUFFIX}"):
        with contextlib.suppress(OSError):  # a write cut off by a kill (another co's is younger than a minute)
            if time.time() - left.lstat().st_mtime > STALE_TEMPORARY_SECONDS:
                left.unlink()
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = NEW_FILE_MODE
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def apply_plan(ctx: RunContext[CoDeps], plan: Plan, tool: str) -> str:
    keep = ctx.deps.keep_file_change
    if keep is None:
        return "Error: no session to keep the file's previous content in; nothing was changed."
    keep(FileChange(str(plan.resolved), plan.before, plan.after, tool))
    write_atomically(plan.resolved, plan.after)
    return plan.summary + "."


async def _edit(ctx: RunContext[CoDeps], path: str, tool: str, make: Callable[[], Plan]) -> str:
    """Plan the edit; ask for approval with its diff; approved, plan again and make it (committed first, then
    written, even when the turn is cancelled meanwhile)."""
    plan = await run_blocking(lambda stop: tool_errors(path, make))
    if isinstance(plan, str):
        return plan
    before = content_hash(plan.before) or "absent"
    if not ctx.tool_call_approved:
        raise ApprovalRequired(
            metadata={
                "reason": EDIT_REASON,
                "diff": plan.diff,
                "before": before,
                "always": f"edit:{plan.resolved}",
                "always_label": f"edits of {one_line(plan.shown)}",
            }
        )
    shown_before = (ctx.tool_call_metadata or {}).get("before")
    if shown_before is not None and shown_before != before:
        return f"Error: {plan.shown} changed after the diff was shown; nothing was written. Read it again."
    ready = plan
    return await off_loop(lambda: tool_errors(path, lambda: apply_plan(ctx, ready, tool)))


async def write_file(ctx: RunContext[CoDeps], path: str, content: str) -> str:
    """Create a text file, or replace a whole one, with `content`. The user sees the change as a diff and
    approves it. Keeps an existing file's encoding and line endings. Prefer edit_file for a change to part of
    an existing file.

    Args:
        path: File path, relative to the working directory (missing parent directories are created).
        content: The file's whole new text.
    """
    return await _edit(ctx, path, "write_file", lambda: plan_write(ctx, path, content))


async def edit_file(ctx: RunContext[CoDeps], path: str, old_string: str, new_string: str) -> str:
    """Replace one exact piece of a text file: `old_string` must occur exactly once (whitespace and
    indentation included; read the file first). The user sees the change as a diff and approves it. When the
    text is not found or occurs more than once, the result lists the candidate lines.

    Args:
        path: File path, relative to the working directory.
        old_string: The exact text to replace; include enough surrounding lines to make it unique.
        new_string: The text to put in its place.
    """
    return await _edit(ctx, path, "edit_file", lambda: plan_edit(ctx, path, old_string, new_string))
