"""File tools: read_file, list_dir and grep, confined to the working directory.

Each tool's work runs in a thread that a cancelled turn abandons (``run_blocking``) and stops at its next
step. Every result is bounded: read_file in lines, bytes per line and characters per call; list_dir in
entries; grep in matches and time, with RE2 (linear-time) regular expressions so no pattern can hang it.
"""

from __future__ import annotations

import fnmatch
import math
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import re2  # type: ignore[import-untyped]
from pydantic_ai import RunContext

from co_cli.config import OwnFiles
from co_cli.deps import CoDeps
from co_cli.tools.blocking import StopFlag, run_blocking
from co_cli.tools.paths import (
    OUTSIDE_CWD_REASON,
    PRIVATE_REASON,
    PathError,
    confined_path,
    display_path,
    is_inside,
    own_files,
    resolve_path,
    working_dir,
)

BINARY_SNIFF_BYTES = 8192
MAX_LINE_CHARS = 2000
MAX_LINE_BYTES = 4 * MAX_LINE_CHARS  # enough for MAX_LINE_CHARS characters of UTF-8
READ_OUTPUT_CHARS = 50_000
SKIP_CHUNK_BYTES = 1 << 16
LIST_DIR_CAP = 500
GREP_MATCH_CAP = 200
GREP_LINE_CHARS = 300
GREP_MAX_FILE_BYTES = 10 * 1024 * 1024
GREP_TIME_BUDGET = 15.0
SEARCH_WINDOW = 64 * 1024
RE2_MAX_MEM = 64 << 20
"""RE2's memory for a pattern. With RE2's default (8 MB) a pattern like ``(?:\\w{1,100}){10}z`` fills its fast
engine's cache after a few searches, and RE2 falls back to its slow one: 14 s over a 400 KB line, 37 s over
1 MB. With 64 MB the same searches take milliseconds."""
SKIPPED_DIRS = frozenset({".git", ".venv", "node_modules", "__pycache__"})

T = TypeVar("T")


def is_binary(path: Path) -> bool:
    """A file is binary when its first bytes contain a NUL byte."""
    with path.open("rb") as handle:
        return b"\0" in handle.read(BINARY_SNIFF_BYTES)


def _clip(line: str, limit: int) -> str:
    if len(line) <= limit:
        return line
    return f"{line[:limit]}... [{len(line) - limit} more characters]"


def tool_errors(path: str, work: Callable[[], T]) -> T | str:
    """``work()``, with a bad path or a failed file system call turned into an error for the model."""
    try:
        return work()
    except PathError as exc:
        return exc.message
    except OSError as exc:
        return f"Error: cannot access {path}: {exc.strerror or exc}"


# read_file


def _read_bounded_line(handle: BinaryIO) -> tuple[bytes, int] | None:
    """The next line (without its line break), at most ``MAX_LINE_BYTES`` of it, and how many bytes of it
    were skipped; None at the end of the file. Memory stays bounded however long the line is."""
    raw = handle.readline(MAX_LINE_BYTES)
    if not raw:
        return None
    skipped = 0
    if not raw.endswith(b"\n") and len(raw) == MAX_LINE_BYTES:
        while chunk := handle.readline(SKIP_CHUNK_BYTES):
            if chunk.endswith(b"\n"):
                skipped += len(chunk) - 1
                break
            skipped += len(chunk)
    return raw.rstrip(b"\n").rstrip(b"\r"), skipped


def _shown_line(raw: bytes, skipped: int) -> str:
    text = raw.decode("utf-8", errors="replace")
    if skipped:
        kept = text[:MAX_LINE_CHARS]
        rest = len(raw) - len(kept.encode("utf-8", errors="replace")) + skipped
        return f"{kept}... [{max(rest, skipped)} more bytes]"
    return _clip(text, MAX_LINE_CHARS)


def unreadable(resolved: Path) -> str | None:
    """Why ``resolved`` cannot be read as text ("does not exist", "is a directory", ...), or None."""
    if not resolved.exists():
        return "does not exist"
    if resolved.is_dir():
        return "is a directory"
    if not resolved.is_file():  # a FIFO or device would block or never end
        return "is not a regular file"
    if is_binary(resolved):
        return f"is a binary file ({resolved.stat().st_size} bytes); it cannot be shown as text"
    return None


def _read_file(ctx: RunContext[CoDeps], path: str, offset: int, limit: int, stop: StopFlag) -> str:
    resolved = confined_path(ctx, path)
    problem = unreadable(resolved)
    if problem == "is a directory":
        return f"Error: {path} is a directory; use list_dir to see its entries."
    if problem is not None:
        return f"Error: {path} {problem}."
    if offset < 0 or limit < 1:
        return "Error: offset must be >= 0 and limit >= 1."
    return read_lines(resolved, path, offset, limit, stop)


def read_lines(resolved: Path, path: str, offset: int, limit: int, stop: StopFlag) -> str:
    """Numbered lines of the text file ``resolved`` (named ``path``) as ``read_file`` returns them: lines cut at
    ``MAX_LINE_CHARS``, at most ``READ_OUTPUT_CHARS`` characters, a last line saying where to continue."""
    shown: list[str] = []
    chars = 0
    stopped_at_budget = False
    more = False
    total = 0
    with resolved.open("rb") as handle:
        while (line := _read_bounded_line(handle)) is not None:
            stop.check()
            total += 1
            if total <= offset:
                continue
            if len(shown) >= limit:
                more = True
                break
            numbered = f"{total:>6}\t{_shown_line(*line)}"
            if shown and chars + len(numbered) + 1 > READ_OUTPUT_CHARS:
                stopped_at_budget = more = True
                break
            shown.append(numbered)
            chars += len(numbered) + 1
    if not shown:
        if total == 0:
            return f"{path} is empty."
        return f"{path} has {total} lines; offset {offset} is past the end."
    text = "\n".join(shown)
    next_offset = offset + len(shown)
    if stopped_at_budget:
        text += (
            f"\n[stopped after line {next_offset}: one call returns at most {READ_OUTPUT_CHARS} characters; "
            f"call read_file with offset={next_offset} to continue]"
        )
    elif more:
        text += f"\n[more lines remain: call read_file with offset={next_offset} to continue]"
    else:
        text += f"\n[end of file: {total} lines]"
    return text


READ_FILE_LIMIT = 400
"""Lines ``read_file`` returns by default (and an ``@path`` in a prompt brings)."""


def read_for_prompt(cwd: Path, own: OwnFiles, path: str) -> str:
    """``path`` (an ``@path`` the user typed) as ``read_file`` would return it unasked: inside the working
    directory (symlinks followed), never co's own files, a text file, the same bounds. Raises ``PathError``
    (its message says why, to the user) when it may not or cannot be read."""
    resolved = resolve_path(cwd, path)
    if own.holds(resolved):
        raise PathError(f"{path} is one of co's own files ({PRIVATE_REASON})")
    if not is_inside(cwd, resolved):
        raise PathError(f"{path} is {OUTSIDE_CWD_REASON} (ask the model to read it: it asks you first)")
    problem = unreadable(resolved)
    if problem is not None:
        raise PathError(f"{path} {problem}")
    try:
        return read_lines(resolved, path, 0, READ_FILE_LIMIT, StopFlag())
    except OSError as exc:
        raise PathError(f"cannot read {path}: {exc.strerror or exc}") from None


def path_completions(cwd: Path, own: OwnFiles, partial: str, limit: int = 200) -> list[str]:
    """Paths inside the working directory that start with ``partial`` (a directory ends in "/"), as an
    ``@path`` completes: nothing outside it or of co's own files, no hidden entry unless asked for."""
    folder, _, stem = partial.rpartition("/")
    try:
        base = resolve_path(cwd, folder or ".")
    except PathError:
        return []
    if not is_inside(cwd, base) or own.holds(base) or not base.is_dir():
        return []
    found: list[str] = []
    try:
        entries = sorted(os.scandir(base), key=lambda entry: entry.name)
    except OSError:
        return []
    for entry in entries:
        if not entry.name.startswith(stem) or (entry.name.startswith(".") and not stem.startswith(".")):
            continue
        resolved = Path(entry.path).resolve()
        if not is_inside(cwd, resolved) or own.holds(resolved):
            continue
        name = f"{folder}/{entry.name}" if folder else entry.name
        found.append(name + "/" if resolved.is_dir() else name)
        if len(found) >= limit:
            break
    return found


async def read_file(ctx: RunContext[CoDeps], path: str, offset: int = 0, limit: int = READ_FILE_LIMIT) -> str:
    """Read a text file, returning numbered lines.

    Lines longer than 2000 characters are cut, and one call returns at most 50000 characters; the result
    says where to continue.

    Args:
        path: File path, relative to the working directory.
        offset: Number of lines to skip (0 starts at the first line).
        limit: Maximum number of lines to return.
    """
    return await run_blocking(lambda stop: tool_errors(path, lambda: _read_file(ctx, path, offset, limit, stop)))


# list_dir


def _describe_entry(entry: os.DirEntry[str]) -> str:
    """One line: type, size in bytes ("-" when not a file) and name; symlinks are not followed."""
    kind, size, name = "other", "-", entry.name
    try:
        if entry.is_symlink():
            kind, name = "link", f"{entry.name} -> {os.readlink(entry.path)}"
        elif entry.is_dir(follow_symlinks=False):
            kind, name = "dir", entry.name + "/"
        elif entry.is_file(follow_symlinks=False):
            kind, size = "file", str(entry.stat(follow_symlinks=False).st_size)
    except OSError:
        kind = "?"
    return f"{kind:<5} {size:>10}  {name}"


def _list_dir(ctx: RunContext[CoDeps], path: str, stop: StopFlag) -> str:
    resolved = confined_path(ctx, path)
    if not resolved.exists():
        return f"Error: {path} does not exist."
    if not resolved.is_dir():
        return f"Error: {path} is not a directory; use read_file to read it."
    entries: list[os.DirEntry[str]] = []
    try:
        with os.scandir(resolved) as scan:
            for entry in scan:
                stop.check()
                entries.append(entry)
    except OSError as exc:
        return f"Error: cannot list {path}: {exc.strerror or exc}"
    if not entries:
        return f"{path} is empty."
    entries.sort(key=lambda entry: entry.name)
    lines = [_describe_entry(entry) for entry in entries[:LIST_DIR_CAP]]
    if len(entries) > LIST_DIR_CAP:
        lines.append(f"[{len(entries) - LIST_DIR_CAP} more entries not shown; {len(entries)} in total]")
    return "\n".join(lines)


async def list_dir(ctx: RunContext[CoDeps], path: str = ".") -> str:
    """List a directory's entries (type, size in bytes, name), sorted by name.

    Args:
        path: Directory path, relative to the working directory.
    """
    return await run_blocking(lambda stop: tool_errors(path, lambda: _list_dir(ctx, path, stop)))


# grep


def _walk_files(root: Path, cwd: Path, confined: bool, private: OwnFiles) -> Iterator[Path]:
    """Files under ``root`` in sorted order, skipping tool and VCS directories.

    Symlinked directories are not followed; when ``confined``, symlinked files that lead outside
    ``cwd`` are skipped. co's own config and data (``private``), and hard links to their files, are skipped
    unless ``root`` lies in them (the user approved searching there).
    """
    skip_private = not private.contains(root)
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = sorted(
            name
            for name in dirnames
            if name not in SKIPPED_DIRS and not (skip_private and private.contains(here / name))
        )
        for name in sorted(filenames):
            file_path = here / name
            if file_path.is_symlink():
                target = file_path.resolve()
                if (confined and not is_inside(cwd, target)) or (skip_private and private.holds(target)):
                    continue
            elif skip_private and private.holds(file_path):
                continue
            yield file_path


def _glob_matches(glob: str, file_path: Path, root: Path) -> bool:
    relative = file_path.relative_to(root).as_posix() if file_path != root else file_path.name
    return fnmatch.fnmatch(file_path.name, glob) or fnmatch.fnmatch(relative, glob)


def _searchable(file_path: Path) -> bool:
    try:
        return file_path.is_file() and file_path.stat().st_size <= GREP_MAX_FILE_BYTES and not is_binary(file_path)
    except OSError:
        return False


def _re2_options() -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 would print each invalid pattern to stderr
    options.never_capture = True  # grep only asks where a line matches
    options.never_nl = True  # a match never spans lines
    options.max_mem = RE2_MAX_MEM
    return options


def compile_pattern(pattern: str) -> Any:
    """An RE2 regular expression matching ``pattern`` within lines (``^`` and ``$`` at each line's ends).

    RE2 matches in time linear in the text and with bounded memory, whatever the pattern, so a model
    cannot hang co with one; like ripgrep's default engine it has no lookaround or backreferences.
    Raises ``re2.error`` (message in bytes) for an invalid pattern.
    """
    try:
        return re2.compile("(?m)" + pattern, _re2_options())
    except re2.error:
        re2.compile(pattern, _re2_options())  # raise the error about the pattern as written
        raise


def _pattern_error(pattern: str, exc: Exception) -> str:
    detail = exc.args[0] if exc.args else exc
    if isinstance(detail, bytes):
        detail = detail.decode("utf-8", errors="replace")
    return (
        f"Error: invalid regular expression {pattern!r}: {detail}. grep uses RE2 syntax (as ripgrep does): "
        "no lookaround or backreferences, \\z instead of \\Z, repetition counts up to 1000. "
        "Fix the pattern and try again."
    )


class OutOfTime(Exception):
    """The search's time budget ran out (inside a file)."""


def matching_lines(regex: Any, data: bytes, stop: StopFlag, deadline: float = math.inf) -> Iterator[tuple[int, str]]:
    r"""(line number, line) for each line of ``data`` (UTF-8, any line ends) where ``regex`` matches.

    One RE2 search per matching line, not one call per line: most lines of most files do not match, and a
    call costs far more than RE2's scan. A call covers whole lines of at most ``SEARCH_WINDOW`` bytes
    (or one longer line), so the stop flag and the ``deadline`` (``OutOfTime``) are looked at between calls.
    """
    data = data.replace(b"\r\n", b"\n")
    size, position, number, counted = len(data), 0, 1, 0
    while position <= size:
        stop.check()
        if time.monotonic() > deadline:
            raise OutOfTime
        end = _window_end(data, position)
        found = regex.search(data, position, end)
        if found is None:
            if end >= size:
                return
            position = end + 1
            continue
        start = found.start()
        if start == size and (size == 0 or data.endswith(b"\n")):
            return  # an empty match after the last line break is not a line
        line_start = data.rfind(b"\n", 0, start) + 1
        line_end = data.find(b"\n", start)
        line_end = size if line_end < 0 else line_end
        number += data.count(b"\n", counted, line_start)
        counted = line_start
        yield number, data[line_start:line_end].decode("utf-8", errors="replace")
        position = line_end + 1


def _window_end(data: bytes, position: int) -> int:
    """Where one search from ``position`` stops: at the last line end within ``SEARCH_WINDOW`` bytes, or at the
    end of the line when one line is longer than that (a line is always searched whole)."""
    end = position + SEARCH_WINDOW
    if end >= len(data):
        return len(data)
    newline = data.rfind(b"\n", position, end)
    if newline < 0:
        newline = data.find(b"\n", end)
    return len(data) if newline < 0 else newline


def _grep(ctx: RunContext[CoDeps], pattern: str, path: str, glob: str | None, stop: StopFlag) -> str:
    try:
        regex = compile_pattern(pattern)
    except re2.error as exc:
        return _pattern_error(pattern, exc)
    resolved = confined_path(ctx, path)
    if not resolved.exists():
        return f"Error: {path} does not exist."
    cwd = working_dir(ctx.deps)
    if resolved.is_dir():
        files: Iterator[Path] = _walk_files(
            resolved, cwd, confined=is_inside(cwd, resolved), private=own_files(ctx.deps)
        )
    else:
        files = iter([resolved])
    deadline = time.monotonic() + GREP_TIME_BUDGET
    matches: list[str] = []
    capped = out_of_time = False
    searched = 0
    for file_path in files:
        stop.check()
        if time.monotonic() > deadline:
            out_of_time = True
            break
        if glob and not _glob_matches(glob, file_path, resolved):
            continue
        if not _searchable(file_path):
            continue
        searched += 1
        shown = display_path(cwd, file_path)
        try:
            data = file_path.read_bytes()[:GREP_MAX_FILE_BYTES]
        except OSError:
            continue
        try:
            for number, line in matching_lines(regex, data, stop, deadline):
                if len(matches) >= GREP_MATCH_CAP:
                    capped = True
                    break
                matches.append(f"{shown}:{number}: {_clip(line.rstrip(), GREP_LINE_CHARS)}")
        except OutOfTime:
            out_of_time = True
        if capped or out_of_time:
            break
    where = f" in files matching {glob!r}" if glob else ""
    if out_of_time:
        note = f"[stopped after {GREP_TIME_BUDGET:g} s, having searched {searched} files: narrow the path or glob]"
        if not matches:
            return f"Error: no matches for {pattern!r} in {path}{where} before the time limit. {note}"
        matches.append(note)
        return "\n".join(matches)
    if not matches:
        return f"No matches for {pattern!r} in {path}{where}."
    if capped:
        matches.append(f"[stopped at {GREP_MATCH_CAP} matches; narrow the pattern, path or glob]")
    return "\n".join(matches)


async def grep(ctx: RunContext[CoDeps], pattern: str, path: str = ".", glob: str | None = None) -> str:
    """Search text files for a regular expression (RE2 syntax, as in ripgrep: no lookaround or
    backreferences); prints `file:line: text` per match.

    Binary files and .git, .venv, node_modules are skipped. A search stops after 15 seconds.

    Args:
        pattern: Regular expression to search for.
        path: File or directory to search, relative to the working directory.
        glob: Only search files whose name or relative path matches this glob, e.g. `*.py`.
    """
    return await run_blocking(lambda stop: tool_errors(path, lambda: _grep(ctx, pattern, path, glob, stop)))
