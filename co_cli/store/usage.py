"""Token usage and cost per turn, as the provider reported them, and the totals read from them.

A cost of ``None`` means unknown (genai-prices does not know the model): it is shown as unknown, never as 0,
and a total that includes an unknown cost is a lower bound.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from co_cli.store.db import Database, Transaction

UsageRole = Literal["chat", "summary", "memory", "title"]
USAGE_ROLES: tuple[UsageRole, ...] = ("chat", "summary", "memory", "title")
GroupBy = Literal["model", "day", "session", "role"]


@dataclass
class TurnUsage:
    """What one model call or run used."""

    role: UsageRole = "chat"
    model: str = ""
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None


@dataclass
class UsageTotals:
    """Sums over many usage rows; ``unpriced`` counts the rows whose cost is unknown."""

    rows: int = 0
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    unpriced: int = 0
    models: set[str] = field(default_factory=set)

    def add(self, usage: TurnUsage) -> None:
        self.rows += 1
        self.requests += usage.requests
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cache_read_tokens += usage.cache_read_tokens
        self.cache_write_tokens += usage.cache_write_tokens
        if usage.cost_usd is None:
            self.unpriced += 1
        else:
            self.cost_usd += usage.cost_usd
        if usage.model:
            self.models.add(usage.model)

    def merge(self, other: UsageTotals) -> None:
        """Add another set of totals to these."""
        self.rows += other.rows
        self.requests += other.requests
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.cost_usd += other.cost_usd
        self.unpriced += other.unpriced
        self.models |= other.models

    def counts(self) -> dict[str, object]:
        """The totals for --json output: ``cost_usd`` is null when any part of the cost is unknown."""
        return {
            "requests": self.requests,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cost_usd": self.cost_usd if self.cost_known else None,
        }

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def cost_known(self) -> bool:
        return self.rows > 0 and self.unpriced == 0


_FIELDS = (
    "role",
    "model",
    "requests",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
)
_COLUMNS = ", ".join(_FIELDS)


def _usage(row: sqlite3.Row) -> TurnUsage:
    cost = row["cost_usd"]
    return TurnUsage(
        role=row["role"],
        model=str(row["model"]),
        requests=int(row["requests"]),
        input_tokens=int(row["input_tokens"]),
        output_tokens=int(row["output_tokens"]),
        cache_read_tokens=int(row["cache_read_tokens"]),
        cache_write_tokens=int(row["cache_write_tokens"]),
        cost_usd=None if cost is None else float(cost),
    )


def insert(tx: Transaction, session_id: str, usage: TurnUsage, now: float | None = None) -> None:
    """Add one usage row inside the caller's transaction."""
    tx.execute(
        f"INSERT INTO turn_usage (session_id, created_at, {_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (session_id, time.time() if now is None else now, *(getattr(usage, name) for name in _FIELDS)),
    )


_GROUP_KEYS: dict[str, str] = {
    "model": "model",
    "day": "date(created_at, 'unixepoch', 'localtime')",
    "session": "session_id",
    "role": "role",
}


class UsageLog:
    """The usage rows of every session, and the totals read from them."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def record(self, session_id: str, usage: TurnUsage) -> None:
        """Save usage that is not part of a turn's messages (the summariser, the memory extractor, titles)."""
        with self.db.transaction() as tx:
            insert(tx, session_id, usage)

    def rows(self, session_id: str) -> list[TurnUsage]:
        """Every usage row of a session, oldest first."""
        return [usage for _, usage in self.timed_rows(session_id)]

    def timed_rows(self, session_id: str) -> list[tuple[float, TurnUsage]]:
        """Every usage row of a session with when it was saved, oldest first (a turn's chat row is saved with the
        turn's messages, at the same time)."""
        rows = self.db.read(
            f"SELECT created_at, {_COLUMNS} FROM turn_usage WHERE session_id = ? ORDER BY id", (session_id,)
        )
        return [(float(row["created_at"]), _usage(row)) for row in rows]

    def totals(self, session_ids: Sequence[str]) -> dict[str, UsageTotals]:
        """Totals per session for the given ids (sessions without usage rows are left out)."""
        totals: dict[str, UsageTotals] = {}
        ids = list(dict.fromkeys(session_ids))
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = self.db.read(
                f"SELECT session_id, {_COLUMNS} FROM turn_usage WHERE session_id IN ({', '.join('?' * len(chunk))})",
                chunk,
            )
            for row in rows:
                totals.setdefault(str(row["session_id"]), UsageTotals()).add(_usage(row))
        return totals

    def report(self, *, since: float | None, by: GroupBy) -> dict[str, UsageTotals]:
        """Totals across sessions (the trash included: money spent stays spent) grouped by model, local day,
        session or role; keys sorted. Summed in SQL: one pass over the usage table."""
        key = _GROUP_KEYS[by]
        where = "WHERE created_at >= ?" if since is not None else ""
        rows = self.db.read(
            f"SELECT {key} AS k, count(*) AS n, sum(requests) AS requests, sum(input_tokens) AS input_tokens, "
            "sum(output_tokens) AS output_tokens, sum(cache_read_tokens) AS cache_read_tokens, "
            "sum(cache_write_tokens) AS cache_write_tokens, total(cost_usd) AS cost_usd, "
            "count(*) - count(cost_usd) AS unpriced, group_concat(DISTINCT model) AS models "
            f"FROM turn_usage {where} GROUP BY k ORDER BY k",
            [since] if since is not None else [],
        )
        groups: dict[str, UsageTotals] = {}
        for row in rows:
            groups[str(row["k"]) if row["k"] else "?"] = UsageTotals(
                rows=int(row["n"]),
                requests=int(row["requests"] or 0),
                input_tokens=int(row["input_tokens"] or 0),
                output_tokens=int(row["output_tokens"] or 0),
                cache_read_tokens=int(row["cache_read_tokens"] or 0),
                cache_write_tokens=int(row["cache_write_tokens"] or 0),
                cost_usd=float(row["cost_usd"] or 0.0),
                unpriced=int(row["unpriced"]),
                models={m for m in str(row["models"] or "").split(",") if m},
            )
        return groups

    def by_role(self, session_id: str) -> dict[str, UsageTotals]:
        """A session's totals per role (chat, summary, memory, title), in that order."""
        totals: dict[str, UsageTotals] = {}
        for usage in self.rows(session_id):
            totals.setdefault(usage.role, UsageTotals()).add(usage)
        return {role: totals[role] for role in USAGE_ROLES if role in totals}
