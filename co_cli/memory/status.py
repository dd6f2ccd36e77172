"""What the terminal shows about memory: the toolbar's inbox note, and (once per user) what extraction costs."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from co_cli.store.memories import Memories

TOOLBAR_REFRESH_SECONDS = 2.0
_cache: dict[str, tuple[float, int]] = {}


def inbox_count(memories: Memories | None, project: str) -> int:
    """Proposals waiting for review (user scope and this project); 0 when memory is off (None)."""
    if memories is None:
        return 0
    return memories.counts(project).get("proposed", 0)


def toolbar_note(memories: Memories | None, project: str) -> str:
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


COST_TOLD_FILE = "memory-extraction-cost-told"
"""In co's data directory: its presence says the user was told what memory extraction costs."""


def extraction_cost_notice(data_dir: Path, model_name: str) -> str | None:
    """The line that says what memory extraction costs and how to turn it off, the first time it runs for this
    user (remembered in ``data_dir``); None every later time."""
    told = data_dir / COST_TOLD_FILE
    if told.exists():
        return None
    with contextlib.suppress(OSError):  # if it cannot be remembered, it is told again next time
        told.write_text("told\n")
    return (
        f"Memory: after each answer co sends one more request, to {model_name}, to find facts worth remembering "
        'in your message. To turn that off: memory_extract "off" in your settings (CO_CLI_MEMORY_EXTRACT=off), '
        "or --no-memory for one run."
    )
