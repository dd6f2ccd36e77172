"""File tools: read_file, list_dir and grep, confined to the working directory."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from pathlib import Path

from pydantic_ai import RunContext

from co_cli.deps import CoDeps
from co_cli.tools.paths import confined_path, display_path, is_inside, working_dir

BINARY_SNIFF_BYTES = 8192
MAX_LINE_CHARS = 2000
LIST_DIR_CAP = 500
GREP_MATCH_CAP = 200
GREP_LINE_CHARS = 300
GREP_MAX_FILE_BYTES = 10 * 1024 * 1024
SKIPPED_DIRS = frozenset({".git", ".venv", "node_modules", "__pycache__"})


def is_binary(path: Path) -> bool:
    """A file is binary when its first bytes contain a NUL byte."""
    with path.open("rb") as handle:
        return b"\0" in handle.read(BINARY_SNIFF_BYTES)


def _clip(line: str, limit: int) -> str:
    if len(line) <= limit:
        return line
    return f"{line[:limit]}... [{len(line) - limit} more characters]"


def read_file(ctx: RunContext[CoDeps], path: str, offset: int = 0, limit: int = 400) -> str:
    """Read a text file, returning numbered lines.

    Args:
        path: File path, relative to the working directory.
        offset: Number of lines to skip (0 starts at the first line).
        limit: Maximum number of lines to return.
    """
    resolved = confined_path(ctx, path)
    if not resolved.exists():
        return f"Error: {path} does not exist."
    if resolved.is_dir():
        return f"Error: {path} is a directory; use list_dir to see its entries."
    if not resolved.is_file():  # a FIFO or device would block or never end
        return f"Error: {path} is not a regular file."
    if offset < 0 or limit < 1:
        return "Error: offset must be >= 0 and limit >= 1."
    try:
        if is_binary(resolved):
            size = resolved.stat().st_size
            return f"Error: {path} is a binary file ({size} bytes); it cannot be shown as text."
        shown: list[str] = []
        more = False
        total = 0
        with resolved.open(encoding="utf-8", errors="replace") as handle:
            for index, line in enumerate(handle):
                total = index + 1
                if index < offset:
                    continue
                if len(shown) >= limit:
                    more = True
                    break
                content = _clip(line.rstrip("\n"), MAX_LINE_CHARS)
                shown.append(f"{index + 1:>6}\t{content}")
    except OSError as exc:
        return f"Error: cannot read {path}: {exc.strerror or exc}"
    if not shown:
        if total == 0:
            return f"{path} is empty."
        return f"{path} has {total} lines; offset {offset} is past the end."
    text = "\n".join(shown)
    if more:
        next_offset = offset + len(shown)
        text += f"\n[more lines remain: call read_file with offset={next_offset} to continue]"
    else:
        text += f"\n[end of file: {total} lines]"
    return text


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


def list_dir(ctx: RunContext[CoDeps], path: str = ".") -> str:
    """List a directory's entries (type, size in bytes, name), sorted by name.

    Args:
        path: Directory path, relative to the working directory.
    """
    resolved = confined_path(ctx, path)
    if not resolved.exists():
        return f"Error: {path} does not exist."
    if not resolved.is_dir():
        return f"Error: {path} is not a directory; use read_file to read it."
    try:
        with os.scandir(resolved) as scan:
            entries = sorted(scan, key=lambda entry: entry.name)
    except OSError as exc:
        return f"Error: cannot list {path}: {exc.strerror or exc}"
    if not entries:
        return f"{path} is empty."
    lines = [_describe_entry(entry) for entry in entries[:LIST_DIR_CAP]]
    if len(entries) > LIST_DIR_CAP:
        lines.append(f"[{len(entries) - LIST_DIR_CAP} more entries not shown; {len(entries)} in total]")
    return "\n".join(lines)


def _walk_files(root: Path, cwd: Path, confined: bool) -> Iterator[Path]:
    """Files under ``root`` in sorted order, skipping tool and VCS directories.

    Symlinked directories are not followed; when ``confined``, symlinked files that lead outside
    ``cwd`` are skipped.
    """
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(name for name in dirnames if name not in SKIPPED_DIRS)
        for name in sorted(filenames):
            file_path = Path(dirpath) / name
            if confined and file_path.is_symlink() and not is_inside(cwd, file_path.resolve()):
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


def grep(ctx: RunContext[CoDeps], pattern: str, path: str = ".", glob: str | None = None) -> str:
    """Search text files for a regular expression (Python syntax); prints `file:line: text` per match.

    Binary files and .git, .venv, node_modules are skipped.

    Args:
        pattern: Regular expression to search for.
        path: File or directory to search, relative to the working directory.
        glob: Only search files whose name or relative path matches this glob, e.g. `*.py`.
    """
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        return f"Error: invalid regular expression {pattern!r}: {exc}. Fix the pattern and try again."
    resolved = confined_path(ctx, path)
    if not resolved.exists():
        return f"Error: {path} does not exist."
    cwd = working_dir(ctx.deps)
    if resolved.is_dir():
        files: Iterator[Path] = _walk_files(resolved, cwd, confined=is_inside(cwd, resolved))
    else:
        files = iter([resolved])
    matches: list[str] = []
    capped = False
    for file_path in files:
        if glob and not _glob_matches(glob, file_path, resolved):
            continue
        if not _searchable(file_path):
            continue
        shown = display_path(cwd, file_path)
        try:
            with file_path.open(encoding="utf-8", errors="replace") as handle:
                for number, line in enumerate(handle, start=1):
                    if regex.search(line):
                        if len(matches) >= GREP_MATCH_CAP:
                            capped = True
                            break
                        matches.append(f"{shown}:{number}: {_clip(line.rstrip(), GREP_LINE_CHARS)}")
        except OSError:
            continue
        if capped:
            break
    if not matches:
        where = f" in files matching {glob!r}" if glob else ""
        return f"No matches for {pattern!r} in {path}{where}."
    if capped:
        matches.append(f"[stopped at {GREP_MATCH_CAP} matches; narrow the pattern, path or glob]")
    return "\n".join(matches)
