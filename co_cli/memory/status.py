"""What the terminal shows about memory: the toolbar's inbox note."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from co_cli.memory.store import MemoryStore

TOOLBAR_REFRESH_SECONDS = 2.0
_cache: dict[str, tuple[float, int]] = {}


def inbox_count(memories: MemoryStore | None, project: str) -> int:
    """Proposals waiting for review (user scope and this project); 0 when memory is off (None)."""
    if memories is None:
        return 0
    return memories.counts(project).get("proposed", 0)


def toolbar_note(memories: MemoryStore | None, project: str) -> str:
    """'│ memory: 2 to review' when proposals wait (counted at most every 2 s: the toolbar asks on every key)."""
    now = time.monotonic()
    cached = _cache.get(project)
    if cached is None or now - cached[0] > TOOLBAR_REFRESH_SECONDS:
        try:
            count = inbox_count(memories, project)
        except Exception:  # the toolbar must never fail
            count = 0
        cached = (now, count)
        _cache[project] = cached
    return f"│ memory: {cached[1]} to review " if cached[1] else ""


def forget_toolbar_cache() -> None:
    _cache.clear()
