"""What the session picker shows: every session, filtered by title and by full-text search of the messages.

No terminal here (the screen is ``co_cli.repl.picker``), so the filtering is tested and measured on its own.
Every live session is loaded once (a few columns, no messages); a filter keystroke runs one FTS5 query that
finds the sessions with a matching message, and the snippet is read only for the rows on screen.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from co_cli.errors import StoreError
from co_cli.store.sessions import SNIPPET_CLOSE, SNIPPET_OPEN, valid_utf8

if TYPE_CHECKING:
    from co_cli.store.sessions import SessionStore

SNIPPET_TOKENS = 12


@dataclass(frozen=True)
class PickerRow:
    id: str
    title: str
    updated_at: float
    message_count: int
    model: str
    cwd: str


@dataclass
class Match:
    row: PickerRow
    message_rowid: int | None = None
    """A message that matched the filter (its search-index rowid), for the snippet; None: the title matched."""


def match_query(text: str) -> str:
    """An FTS5 query for what the user typed: every word quoted (matched literally); the last one as a prefix,
    so results come while a word is being typed."""
    terms = [t.replace('"', '""') for t in valid_utf8(text).replace("\x00", " ").split() if t.strip('"')]
    if not terms:
        return ""
    quoted = [f'"{t}"' for t in terms]
    if not text[-1:].isspace():
        quoted[-1] += "*"
    return " ".join(quoted)


def same_directory(a: str, b: str) -> bool:
    return os.path.normpath(a) == os.path.normpath(b)


@dataclass
class PickerModel:
    store: SessionStore
    cwd: str
    this_directory_only: bool = False
    rows: list[PickerRow] = field(default_factory=list)
    open_elsewhere: set[str] = field(default_factory=set)
    _snippets: dict[tuple[str, int], str] = field(default_factory=dict)

    def load(self) -> None:
        """Read every live session with messages, most recently updated first, and which are open elsewhere."""
        found = self.store._read(
            "SELECT id, title, updated_at, message_count, model, cwd FROM sessions "
            "WHERE message_count > 0 AND deleted_at IS NULL ORDER BY updated_at DESC, id DESC"
        )
        self.rows = [PickerRow(*row) for row in found]
        self.open_elsewhere = self.store.open_elsewhere()

    def remove(self, session_id: str) -> None:
        self.rows = [row for row in self.rows if row.id != session_id]

    def filter(self, text: str) -> list[Match]:
        """The sessions to show for ``text``: all (in this directory, if toggled) when it is empty; else those
        whose title holds every word, or that have a message matching them, in the listing's order."""
        rows = [r for r in self.rows if same_directory(r.cwd, self.cwd)] if self.this_directory_only else self.rows
        query = match_query(text)
        if not query:
            return [Match(row) for row in rows]
        words = [w.casefold() for w in text.split()]
        hits = self._message_hits(query)
        matches: list[Match] = []
        for row in rows:
            rowid = hits.get(row.id)
            if rowid is not None:
                matches.append(Match(row, rowid))
            elif all(w in row.title.casefold() for w in words):
                matches.append(Match(row))
        return matches

    def _message_hits(self, query: str) -> dict[str, int]:
        """Session id -> its newest message matching ``query`` (one FTS5 pass, grouped in SQL)."""
        try:
            found = self.store._read(
                "SELECT m.session_id, max(m.id) FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid "
                "WHERE messages_fts MATCH ? GROUP BY m.session_id",
                (query,),
            )
        except StoreError:  # a query FTS5 rejects (it should not, as every word is quoted): no message matches
            return {}
        return {str(sid): int(rowid) for sid, rowid in found}

    def snippet(self, text: str, match: Match) -> str:
        """The matching part of the message (terms between SNIPPET_OPEN and SNIPPET_CLOSE), '' for a title match."""
        if match.message_rowid is None:
            return ""
        query = match_query(text)
        key = (query, match.message_rowid)
        if key not in self._snippets:
            found = self.store._read(
                f"SELECT snippet(messages_fts, 0, '{SNIPPET_OPEN}', '{SNIPPET_CLOSE}', '…', {SNIPPET_TOKENS}) "
                "FROM messages_fts WHERE messages_fts MATCH ? AND rowid = ?",
                (query, match.message_rowid),
            )
            self._snippets[key] = str(found[0][0]) if found else ""
        return self._snippets[key]
