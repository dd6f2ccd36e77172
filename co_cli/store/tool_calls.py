"""The tool_calls table: one row per tool call of a turn (which tool, how it ended, how long it ran), saved
with the turn; summed per tool for ``/usage``, ``co sessions show`` and ``co usage --by tool``."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from co_cli.store.db import Database, Transaction


@dataclass(frozen=True)
class ToolCallRow:
    tool: str
    outcome: str
    """"ok", "failed" or "denied" (``vocabulary.ToolOutcome``)."""
    seconds: float = 0.0


@dataclass
class ToolStats:
    """Calls of one tool, how many failed or were denied, and the time they ran."""

    calls: int = 0
    failed: int = 0
    denied: int = 0
    seconds: float = 0.0

    def merge(self, other: ToolStats) -> None:
        self.calls += other.calls
        self.failed += other.failed
        self.denied += other.denied
        self.seconds += other.seconds

    def counts(self) -> dict[str, object]:
        return {"calls": self.calls, "failed": self.failed, "denied": self.denied, "seconds": round(self.seconds, 3)}


def summed(calls: Sequence[ToolCallRow]) -> dict[str, ToolStats]:
    """Calls summed per tool, by name."""
    stats: dict[str, ToolStats] = {}
    for call in calls:
        stats.setdefault(call.tool, ToolStats()).merge(
            ToolStats(1, int(call.outcome == "failed"), int(call.outcome == "denied"), call.seconds)
        )
    return dict(sorted(stats.items()))


def insert(tx: Transaction, session_id: str, seq: int, calls: Sequence[ToolCallRow], now: float | None = None) -> None:
    """Save the tool calls of the turn whose prompt is message ``seq``."""
    now = time.time() if now is None else now
    tx.executemany(
        "INSERT INTO tool_calls (session_id, seq, created_at, tool, outcome, seconds) VALUES (?, ?, ?, ?, ?, ?)",
        [(session_id, seq, now, call.tool, call.outcome, call.seconds) for call in calls],
    )


_SUMS = (
    "tool, count(*) AS calls, sum(outcome = 'failed') AS failed, sum(outcome = 'denied') AS denied, "
    "total(seconds) AS seconds"
)


def _grouped(rows: Sequence[Any]) -> dict[str, ToolStats]:
    return {
        str(row["tool"]): ToolStats(int(row["calls"]), int(row["failed"]), int(row["denied"]), float(row["seconds"]))
        for row in rows
    }


class ToolCalls:
    def __init__(self, db: Database) -> None:
        self.db = db

    def by_tool(self, session_id: str) -> dict[str, ToolStats]:
        """The session's tool calls summed per tool, by name."""
        rows = self.db.read(
            f"SELECT {_SUMS} FROM tool_calls WHERE session_id = ? GROUP BY tool ORDER BY tool", (session_id,)
        )
        return _grouped(rows)

    def report(self, *, since: float | None) -> dict[str, ToolStats]:
        """Every session's tool calls (the trash included) summed per tool, by name."""
        where = "WHERE created_at >= ?" if since is not None else ""
        rows = self.db.read(
            f"SELECT {_SUMS} FROM tool_calls {where} GROUP BY tool ORDER BY tool", [since] if since is not None else []
        )
        return _grouped(rows)
