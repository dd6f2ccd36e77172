"""What the terminal shows about memory: the toolbar's inbox note and the /memory overview."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from co_cli.memory.inject import memory_on, project_key

if TYPE_CHECKING:
    from co_cli.session import Conversation

TOOLBAR_REFRESH_SECONDS = 2.0
_cache: dict[int, tuple[float, int]] = {}


def inbox_count(conv: Conversation) -> int:
    """Proposals waiting for review (user scope and this project)."""
    if conv.store is None or not memory_on(conv.deps):
        return 0
    return conv.store.memories.counts(project_key(conv.deps)).get("proposed", 0)


def toolbar_note(conv: Conversation) -> str:
    """'│ memory: 2 to review' when proposals wait (counted at most every 2 s: the toolbar asks on every key)."""
    now = time.monotonic()
    cached = _cache.get(id(conv))
    if cached is None or now - cached[0] > TOOLBAR_REFRESH_SECONDS:
        try:
            count = inbox_count(conv)
        except Exception:  # the toolbar must never fail
            count = 0
        cached = (now, count)
        _cache[id(conv)] = cached
    return f"│ memory: {cached[1]} to review " if cached[1] else ""


def forget_toolbar_cache() -> None:
    _cache.clear()
