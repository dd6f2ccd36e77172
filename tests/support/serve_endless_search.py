"""`co serve` whose searches never end on their own: each search runs a query that counts forever in place of its
own, so a test sees a search end only because its client went, its deadline passed or the server began to stop.

    python tests/support/serve_endless_search.py serve --port 0
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from co_cli.store import search  # noqa: E402
from co_cli.terminal.cli import main  # noqa: E402

ENDLESS = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"


def endless(
    self: search.Search,
    query: str,
    session_id: str | None = None,
    limit: int = 20,
    stop: Callable[[], bool] | None = None,
) -> list[search.SearchHit]:
    self.db.read(ENDLESS, stop=stop)
    raise AssertionError("a query counting forever ended")


if __name__ == "__main__":
    search.Search.messages = endless  # type: ignore[method-assign]
    main()
