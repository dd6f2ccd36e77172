"""The line under the prompt: model, session, how full the context window is, the session's cost, its open
tasks and the memory inbox. prompt-toolkit asks for it on every key, so what needs the store is read once per turn."""

from __future__ import annotations

import html
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from co_cli.session import Conversation
    from co_cli.store import Memories, Store

MEMORY_REFRESH_SECONDS = 2.0
"""How often the memory inbox is counted at most: the toolbar asks on every key."""
_inbox: dict[str, tuple[float, int]] = {}  # project -> (when counted, proposals waiting)


class Toolbar:
    """The toolbar's text for a conversation (None while it is still being built)."""

    def __init__(self, spec: str, store: Store) -> None:
        self.spec = spec
        self.store = store
        self._cost_cache: tuple[tuple[str, int], str] | None = None

    def text(self, conv: Conversation | None) -> str:
        if conv is None:
            return html.escape(f" {self.spec} │ loading… ")
        r = conv.resolved
        session = self.store.sessions.short_id(conv.session.id) if conv.session else "new"
        pct = conv.window.percent_used()
        memory = memory_note(conv.workspace.memories, conv.workspace.project)
        cost = self._session_cost(conv)
        tasks = _open_tasks(conv)
        return html.escape(
            f" {r.label} │ session {session} │ context {pct:.0f}% of {r.context_window:,} {cost}{tasks}{memory}"
        )

    def _session_cost(self, conv: Conversation) -> str:
        """ "│ $0.0123 " when the session's whole cost is known, else "" (read once per turn, not per key)."""
        if conv.session is None:
            return ""
        key = (conv.session.id, id(conv.last_usage))
        if self._cost_cache is None or self._cost_cache[0] != key:
            totals = self.store.usage.totals([conv.session.id]).get(conv.session.id)
            label = f"│ ${totals.cost_usd:.4f} " if totals is not None and totals.cost_known else ""
            self._cost_cache = (key, label)
        return self._cost_cache[1]


def _open_tasks(conv: Conversation) -> str:
    """ "│ 2 open tasks " while the session's task list has open tasks, else ""."""
    count = conv.tasks.open_count
    return f"│ {count} open task{'s' if count != 1 else ''} " if count else ""


def memory_note(memories: Memories | None, project: str) -> str:
    """ "│ memory: 2 to review " when proposals (user scope and this project) wait for review; "" when none do or
    memory is off (None). Counted at most every ``MEMORY_REFRESH_SECONDS``."""
    now = time.monotonic()
    cached = _inbox.get(project)
    if cached is None or now - cached[0] > MEMORY_REFRESH_SECONDS:
        try:
            count = memories.counts(project).get("proposed", 0) if memories is not None else 0
        except Exception:  # the toolbar must never fail
            count = 0
        cached = (now, count)
        _inbox[project] = cached
    return f"│ memory: {cached[1]} to review " if cached[1] else ""


def forget_memory_note() -> None:
    """Count the memory inbox again on the next key (after a review changed it)."""
    _inbox.clear()
