"""What the session picker shows: every session, filtered by title and by full-text search of the messages.

No terminal here (the screen is ``co_cli.terminal.picker``), so the filtering is tested and measured on its own.
Every live session is loaded once (a few columns, no messages). A filter keystroke matches the titles in
memory and asks FTS5 for the newest FAST_MATCHES matching messages only, which fills a screen in a few
milliseconds however common the words are; when that was not every match, ``complete_filter`` (run in the
background on its own connection) finds the rest. Snippets are read only for the rows on screen. The queries
are ``co_cli.store.search``'s.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from co_cli.errors import StoreError
from co_cli.store import SNIPPET_CLOSE, SNIPPET_OPEN, ListedSession, query_phrases

if TYPE_CHECKING:
    from co_cli.store import Store

SNIPPET_TOKENS = 12
FAST_MATCHES = 500


@dataclass
class Match:
    row: ListedSession
    message_rowid: int | None = None
    """A message that matched the filter (its search-index rowid), for the snippet; None: the title matched."""


def match_query(text: str) -> str:
    """An FTS5 query for what the user typed (``query_phrases``); the last word as a prefix, so results come
    while a word is being typed."""
    phrases = query_phrases(text)
    if not phrases:
        return ""
    last = query_phrases(text.split()[-1])
    if not text[-1:].isspace() and last:
        phrases = [p for p in phrases if p.casefold() != last[0].casefold()] + [last[0] + "*"]
    return " ".join(phrases)


def same_directory(a: str, b: str) -> bool:
    return os.path.normpath(a) == os.path.normpath(b)


@dataclass
class PickerModel:
    store: Store
    cwd: str
    this_directory_only: bool = False
    rows: list[ListedSession] = field(default_factory=list)
    open_elsewhere: set[str] = field(default_factory=set)
    complete: bool = True
    """Whether the last ``filter`` found every match (else ``complete_filter`` has the rest)."""
    _snippets: dict[tuple[str, int], str] = field(default_factory=dict)
    _folded: list[str] = field(default_factory=list)

    def load(self) -> None:
        """Read every live session with messages, most recently updated first, and which are open elsewhere."""
        self.rows = self.store.search.sessions()
        self._folded = [row.title.casefold() for row in self.rows]
        self.open_elsewhere = self.store.locks.open_elsewhere()

    def remove(self, session_id: str) -> None:
        kept = [(row, folded) for row, folded in zip(self.rows, self._folded, strict=True) if row.id != session_id]
        self.rows = [row for row, _ in kept]
        self._folded = [folded for _, folded in kept]

    def filter(self, text: str) -> list[Match]:
        """The sessions to show for ``text``: all (in this directory, if toggled) when it is empty; else those
        whose title holds every word, or that have a message matching them, in the listing's order. Only the
        newest FAST_MATCHES messages are searched: ``complete`` says whether that found them all."""
        query = match_query(text)
        hits: dict[str, int] = {}
        self.complete = True
        if query:
            hits = self._message_hits(query, FAST_MATCHES)
            self.complete = self._last_hit_rows < FAST_MATCHES
        return self._merge(text, hits)

    def complete_filter(self, text: str) -> list[Match]:
        """``filter`` over every matching message, on a connection of its own (safe in another thread)."""
        query = match_query(text)
        if not query:
            return self._merge(text, {})
        return self._merge(text, self.store.search.every_match(query))

    def _merge(self, text: str, hits: dict[str, int]) -> list[Match]:
        pairs = list(zip(self.rows, self._folded, strict=True))
        if self.this_directory_only:
            here = os.path.normpath(self.cwd)
            pairs = [(row, folded) for row, folded in pairs if os.path.normpath(row.cwd) == here]
        if not match_query(text):
            return [Match(row) for row, _ in pairs]
        words = [w.casefold() for w in text.split()]
        matches: list[Match] = []
        for row, folded in pairs:
            rowid = hits.get(row.id)
            if rowid is not None:
                matches.append(Match(row, rowid))
            elif all(w in folded for w in words):
                matches.append(Match(row))
        return matches

    _last_hit_rows: int = 0

    def _message_hits(self, query: str, limit: int) -> dict[str, int]:
        """Session id -> its newest message matching ``query`` among the newest ``limit`` matching messages."""
        try:
            found = self.store.search.newest_matches(query, limit)
        except StoreError:  # a query FTS5 rejects (it should not, as every word is quoted): no message matches
            found = []
        self._last_hit_rows = len(found)
        hits: dict[str, int] = {}
        for sid, rowid in found:
            hits[str(sid)] = max(hits.get(str(sid), 0), int(rowid))
        return hits

    def snippet(self, text: str, match: Match) -> str:
        """The matching part of the message (terms between SNIPPET_OPEN and SNIPPET_CLOSE), '' for a title match."""
        if match.message_rowid is None:
            return ""
        query = match_query(text)
        if (query, match.message_rowid) not in self._snippets:
            self.prefetch_snippets(text, [match])
        return self._snippets.get((query, match.message_rowid), "")

    def prefetch_snippets(self, text: str, matches: list[Match]) -> None:
        """Make the snippets of these matches (the rows about to be drawn) from their messages' text, read in one
        primary-key query: asking FTS5 for snippets would run the whole match again for each."""
        query = match_query(text)
        wanted = [m.message_rowid for m in matches if m.message_rowid is not None]
        wanted = [rowid for rowid in wanted if (query, rowid) not in self._snippets]
        if not query or not wanted:
            return
        found = self.store.search.texts(wanted)
        words = [w.casefold() for w in text.split()]
        for rowid in wanted:
            self._snippets[(query, rowid)] = ""
        for rowid, message_text in found.items():
            self._snippets[(query, rowid)] = make_snippet(message_text, words)


def make_snippet(text: str, words: list[str], size: int = SNIPPET_TOKENS) -> str:
    """About ``size`` words of ``text`` around the first that holds one of ``words`` (case-insensitive), each
    such word between SNIPPET_OPEN and SNIPPET_CLOSE; '…' where text was left out."""
    tokens = text.split()
    if not tokens:
        return ""
    hit = [any(w in token.casefold() for w in words) for token in tokens]
    first = hit.index(True) if True in hit else 0
    start = max(0, first - size // 3)
    end = min(len(tokens), start + size)
    shown = [f"{SNIPPET_OPEN}{t}{SNIPPET_CLOSE}" if hit[i] else t for i, t in enumerate(tokens[start:end], start)]
    return ("… " if start else "") + " ".join(shown) + (" …" if end < len(tokens) else "")
