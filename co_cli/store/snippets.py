"""The snippets of a search's hits, cut in bounded work whatever the message holds.

FTS5's own ``snippet()`` scores a window at every match of a row against every other match of that row: its
time grows with the square of the row's matches (a message repeating one word 20,000 times took 3 s, one of
200,000 matching lines minutes), and it runs inside one SQLite step, where no progress handler or interrupt
reaches it. Here a hit's snippet is cut from at most ``SNIPPET_SCAN_CHARS`` of its message, split at whitespace
into pieces of at most ``PIECE_CHARS`` that an in-memory FTS5 table with the index's own tokenizer matches
(so stemming and word boundaries are the index's): ``snippet()`` then only ever sees one small piece. A whole
search gives at most ``SNIPPET_BUDGET_CHARS`` to snippets; the hits past that show their message's first words.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from co_cli.store.db import open_connection

SNIPPET_OPEN = "«"
SNIPPET_CLOSE = "»"
SNIPPET_TOKENS = 16
"""Words a snippet shows around its matches."""
SNIPPET_SCAN_CHARS = 65_536
"""Characters of a message looked at for its snippet: a match past them is not shown (the message's first words
are)."""
PIECE_CHARS = 1_024
"""At most this many characters go to FTS5's ``snippet()`` at once (at most ~500 words: its square is small)."""
SNIPPET_BUDGET_CHARS = 4 * 1024 * 1024
"""Characters looked at for the snippets of one search, over all its hits."""
TOKENIZER = "porter unicode61"
"""The tokenizer of ``messages_fts`` (schema version 1): a piece is matched as the index matched its message."""
ELLIPSIS = "…"


def head(text: str) -> str:
    """The first ``SNIPPET_TOKENS`` words of ``text``, with an ellipsis when there is more."""
    words = text[: SNIPPET_TOKENS * 64].split()
    shown = " ".join(words[:SNIPPET_TOKENS])
    return shown + (f" {ELLIPSIS}" if len(words) > SNIPPET_TOKENS or len(text) > SNIPPET_TOKENS * 64 else "")


def pieces(text: str, size: int = PIECE_CHARS) -> list[str]:
    """``text`` in consecutive pieces of at most ``size`` characters, each cut after a space or line break in its
    second half when there is one (a word is split only where none is)."""
    out: list[str] = []
    start, end_of_text = 0, len(text)
    while start < end_of_text:
        end = start + size
        if end < end_of_text:
            cut = max(text.rfind(" ", start + size // 2, end), text.rfind("\n", start + size // 2, end))
            end = cut + 1 if cut >= 0 else end
        out.append(text[start:end])
        start = end
    return out


class Snippets:
    """The snippets of one search (``make`` per hit, best hit first), then ``close``. ``match`` is the search's
    FTS5 query (every term); ``phrases`` its terms (a snippet marks any of them)."""

    def __init__(self, match: str, phrases: Sequence[str]) -> None:
        self.match = match
        self.any_term = " OR ".join(phrases)
        self.budget = SNIPPET_BUDGET_CHARS
        """Characters the search may still look at for its snippets."""
        self._conn: sqlite3.Connection | None = None

    def _scratch(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = open_connection(":memory:")
            self._conn.execute(f"CREATE VIRTUAL TABLE piece USING fts5 (text, tokenize='{TOKENIZER}')")
        return self._conn

    def make(self, text: str, whole_chars: int) -> str:
        """The snippet of a hit whose message begins with ``text`` (at most ``SNIPPET_SCAN_CHARS`` of it) and is
        ``whole_chars`` long: around the first piece holding every term, else the first holding any, marked
        with SNIPPET_OPEN and SNIPPET_CLOSE; the message's first words when the scan finds no match or the
        search's budget is spent."""
        text = text[:SNIPPET_SCAN_CHARS]
        if self.budget <= 0 or not self.any_term:
            return head(text)
        self.budget -= max(len(text), 1)
        parts = pieces(text)
        conn = self._scratch()
        conn.execute("DELETE FROM piece")
        conn.executemany("INSERT INTO piece (rowid, text) VALUES (?, ?)", enumerate(parts))
        found = None
        for query in (self.match, self.any_term):
            found = conn.execute(
                "SELECT rowid FROM piece WHERE piece MATCH ? ORDER BY rowid LIMIT 1", (query,)
            ).fetchone()
            if found is not None:
                break
        if found is None:
            return head(text)
        index = int(found[0])
        row = conn.execute(
            "SELECT snippet(piece, 0, ?, ?, ?, ?) FROM piece WHERE piece MATCH ? AND rowid = ?",
            (SNIPPET_OPEN, SNIPPET_CLOSE, ELLIPSIS, SNIPPET_TOKENS, self.any_term, index),
        ).fetchone()
        snippet = str(row[0]).strip() if row is not None else ""
        if not snippet:
            return head(text)
        if index > 0 and not snippet.startswith(ELLIPSIS):
            snippet = f"{ELLIPSIS} {snippet}"
        more = index < len(parts) - 1 or whole_chars > len(text)
        if more and not snippet.endswith(ELLIPSIS):
            snippet = f"{snippet} {ELLIPSIS}"
        return snippet

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
