"""Memories as Markdown, one per line, readable and diffable like a ``MEMORY.md``:

    - m12 [user, preference] The user prefers tabs over spaces.
    - m14 [project, instruction] Run `make check` before committing.

``co memory export`` writes it; ``co memory import`` reads it back (a line without an id is a new memory;
``- text`` alone is a user fact). Headings, blank lines and HTML comments are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from co_cli.errors import CoError
from co_cli.store import MEMORY_KINDS, MEMORY_SCOPES, ImportEntry, Memory, clean_text

_LINE = re.compile(
    r"^[-*]\s+(?:m(?P<id>\d{1,18})\s+)?(?:\[(?P<scope>[a-z]+)(?:\s*,\s*(?P<kind>[a-z]+))?\]\s+)?(?P<text>\S.*)$"
)


class BadMemoryFile(CoError):
    exit_code = 2


def render(memories: Sequence[Memory], project: str) -> str:
    lines = [
        "# co memories",
        "",
        f"<!-- user memories and those of the project {project}; one per line: `- m<id> [scope, kind] text`. "
        "Edit, delete or add lines (`- [user, fact] text`), then `co memory import` this file. -->",
        "",
    ]
    lines += [f"- {m.ref} [{m.scope}, {m.kind}] {m.text}" for m in memories]
    return "\n".join(lines) + "\n"


def parse(text: str) -> list[ImportEntry]:
    """The entries of a memory file; BadMemoryFile names the first bad line."""
    entries: list[ImportEntry] = []
    seen: set[int] = set()
    in_comment = False
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if in_comment:
            in_comment = "-->" not in line
            continue
        if line.startswith("<!--"):
            in_comment = "-->" not in line
            continue
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            raise BadMemoryFile(f"line {number}: not a memory line (expected `- m12 [user, fact] text`)")
        scope = match.group("scope") or "user"
        kind = match.group("kind") or "fact"
        if scope not in MEMORY_SCOPES:
            raise BadMemoryFile(f"line {number}: unknown scope {scope!r} (user or project)")
        if kind not in MEMORY_KINDS:
            raise BadMemoryFile(f"line {number}: unknown kind {kind!r} ({', '.join(MEMORY_KINDS)})")
        memory_id = int(match.group("id")) if match.group("id") else None
        if memory_id is not None:
            if memory_id in seen:
                raise BadMemoryFile(f"line {number}: m{memory_id} appears twice")
            seen.add(memory_id)
        try:
            cleaned = clean_text(match.group("text"))
        except CoError as exc:
            raise BadMemoryFile(f"line {number}: {exc.message}") from None
        entries.append(ImportEntry(line=number, id=memory_id, scope=scope, kind=kind, text=cleaned))
    return entries
