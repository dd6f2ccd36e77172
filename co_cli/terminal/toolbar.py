"""The line under the prompt: model, session, how full the context window is, the session's cost, its open
tasks and the memory inbox. prompt-toolkit asks for it on every key, so what needs the store is read once per turn."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from co_cli.session import Conversation
    from co_cli.store import Store


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
        session = conv.session.id[:8] if conv.session else "new"
        pct = conv.window.percent_used()
        from co_cli.memory.status import toolbar_note

        memory = toolbar_note(conv.memories, conv.project)
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
