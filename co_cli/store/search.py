"""Full-text search of the transcripts (FTS5), for ``co sessions search``, ``/sessions``, the history tool and
the session picker.

A search's work is bounded whatever the words and the messages: it scores the newest ``MAX_RANKED_MATCHES``
matching messages only, and cuts the snippets of the hits it returns in bounded pieces (``snippets``), never with
FTS5's ``snippet()`` over a whole message (quadratic in that message's matches).

The picker asks for little at a time: every live session once (a few columns, no messages), the newest
matching messages per keystroke, all of them in the background on a connection of its own, and the text
of the few messages whose snippets are on screen.
"""

from __future__ import annotations

import builtins
import re
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from co_cli.errors import StoreError
from co_cli.store.codec import valid_utf8
from co_cli.store.db import Database, open_connection, translated_errors
from co_cli.store.snippets import SNIPPET_CLOSE as SNIPPET_CLOSE
from co_cli.store.snippets import SNIPPET_OPEN as SNIPPET_OPEN
from co_cli.store.snippets import SNIPPET_SCAN_CHARS, Snippets

MAX_RANKED_MATCHES = 10_000
"""A search scores the newest this many messages that match it and returns the best of those: a word found in
every message costs no more than one found in 10,000."""
TEXT_BATCH = 200
"""Hits whose text is read at once, for their snippets."""


@dataclass
class SearchHit:
    session_id: str
    title: str
    seq: int
    kind: str
    created_at: float
    snippet: str
    rank: float


@dataclass(frozen=True)
class ListedSession:
    """A live session as the picker lists it."""

    id: str
    title: str
    updated_at: float
    message_count: int
    model: str
    cwd: str
    parent_id: str | None = None
    """The session this one was forked from, and at which of its messages."""
    fork_seq: int | None = None


MAX_QUERY_TERMS = 16
MAX_TERM_CHARS = 64
_WORD = re.compile(r"[^\W_]+")
"""What FTS5's unicode61 tokenizer keeps of a term: letters and digits; everything else separates words."""


def query_phrases(text: str) -> builtins.list[str]:
    """The terms of a search, each as a quoted FTS5 phrase of its words (so FTS5 syntax in user text is matched
    literally): a repeated term once, at most ``MAX_QUERY_TERMS`` terms of at most ``MAX_TERM_CHARS``
    characters. A query repeating one word hundreds of times made FTS5 superlinear (minutes over 100k
    messages); what is left finds the same messages."""
    phrases: builtins.list[str] = []
    seen: set[str] = set()
    for term in valid_utf8(text).replace("\x00", " ").split():
        words = _WORD.findall(term[:MAX_TERM_CHARS])
        if not words:
            continue
        phrase = " ".join(words)
        if phrase.casefold() in seen:
            continue
        seen.add(phrase.casefold())
        phrases.append(f'"{phrase}"')
        if len(phrases) == MAX_QUERY_TERMS:
            break
    return phrases


def fts_query(text: str) -> str:
    """An FTS5 query matching messages that hold every term of ``text`` (``query_phrases``)."""
    return " ".join(query_phrases(text))


class Search:
    """Queries over the search index and the listings built on it."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def messages(
        self,
        query: str,
        session_id: str | None = None,
        limit: int = 20,
        stop: Callable[[], bool] | None = None,
    ) -> builtins.list[SearchHit]:
        """Full-text search of every transcript (or one): the best ``limit`` of the newest ``MAX_RANKED_MATCHES``
        matching messages, best first, each with a snippet (``Snippets``). Its work is bounded whatever the words
        and the messages; it ends soon after ``stop()`` turns true (StoreError)."""
        phrases = query_phrases(query)
        if not phrases:
            return []
        match = " ".join(phrases)
        ranked = self._ranked(match, session_id, max(1, min(limit, MAX_RANKED_MATCHES)), stop)
        snippets = Snippets(match, phrases)
        hits: builtins.list[SearchHit] = []
        try:
            for start in range(0, len(ranked), TEXT_BATCH):
                batch = ranked[start : start + TEXT_BATCH]
                heads = self._heads([int(row["id"]) for row in batch], stop)
                for row in batch:
                    if stop is not None and stop():
                        raise StoreError(f"the search of {self.db.path} was stopped")
                    text, chars = heads.get(int(row["id"]), ("", 0))
                    with translated_errors(self.db.path):
                        snippet = snippets.make(text, chars)
                    hits.append(
                        SearchHit(
                            session_id=row["session_id"],
                            title=row["title"],
                            seq=row["seq"],
                            kind=row["kind"],
                            created_at=row["created_at"],
                            snippet=snippet,
                            rank=row["rank"],
                        )
                    )
        finally:
            snippets.close()
        return hits

    def _ranked(
        self, match: str, session_id: str | None, limit: int, stop: Callable[[], bool] | None
    ) -> builtins.list[sqlite3.Row]:
        """The best ``limit`` of the newest ``MAX_RANKED_MATCHES`` messages matching ``match``: FTS5 reads its
        matches newest first and stops there, so only that many are scored."""
        where = "messages_fts MATCH ? AND s.deleted_at IS NULL" + (" AND m.session_id = ?" if session_id else "")
        params: builtins.list[Any] = [match, *([session_id] if session_id else []), MAX_RANKED_MATCHES, limit]
        return self.db.read(
            "SELECT m.id, m.session_id, s.title, m.seq, m.kind, m.created_at, hit.rank FROM ("
            "SELECT m.id AS id, bm25(messages_fts) AS rank FROM messages_fts "
            "JOIN messages m ON m.id = messages_fts.rowid JOIN sessions s ON s.id = m.session_id "
            f"WHERE {where} ORDER BY messages_fts.rowid DESC LIMIT ?) hit "
            "JOIN messages m ON m.id = hit.id JOIN sessions s ON s.id = m.session_id "
            "ORDER BY hit.rank, m.id DESC LIMIT ?",
            params,
            stop=stop,
        )

    def _heads(self, ids: builtins.list[int], stop: Callable[[], bool] | None) -> dict[int, tuple[str, int]]:
        """Message id -> (its first ``SNIPPET_SCAN_CHARS`` characters, its length)."""
        rows = self.db.read(
            "SELECT id, substr(text, 1, ?) AS head, length(text) AS chars FROM messages "
            f"WHERE id IN ({', '.join('?' * len(ids))})",
            [SNIPPET_SCAN_CHARS, *ids],
            stop=stop,
        )
        return {int(row["id"]): (str(row["head"]), int(row["chars"])) for row in rows}

    def sessions_with_prompt(self, prompt: str, limit: int = 20) -> builtins.list[str]:
        """Ids of the live sessions holding a user prompt that is exactly ``prompt``, most recently updated
        first (the full-text index finds the candidates)."""
        match = fts_query(prompt)
        if not match:
            return []
        rows = self.db.read(
            "SELECT m.session_id FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid "
            "JOIN sessions s ON s.id = m.session_id "
            "WHERE messages_fts MATCH ? AND m.kind = 'user' AND m.text = ? AND s.deleted_at IS NULL "
            "GROUP BY m.session_id ORDER BY max(s.updated_at) DESC LIMIT ?",
            (match, valid_utf8(prompt), limit),
        )
        return [str(row["session_id"]) for row in rows]

    def sessions(self) -> builtins.list[ListedSession]:
        """Every live session with messages, most recently updated first."""
        rows = self.db.read(
            "SELECT id, title, updated_at, message_count, model, cwd, parent_id, fork_seq FROM sessions "
            "WHERE message_count > 0 AND deleted_at IS NULL ORDER BY updated_at DESC, id DESC"
        )
        return [
            ListedSession(
                id=row["id"],
                title=row["title"],
                updated_at=row["updated_at"],
                message_count=row["message_count"],
                model=row["model"],
                cwd=row["cwd"],
                parent_id=row["parent_id"],
                fork_seq=row["fork_seq"],
            )
            for row in rows
        ]

    def newest_matches(self, match: str, limit: int) -> builtins.list[tuple[str, int]]:
        """(session id, message id) of the newest ``limit`` messages matching the FTS5 query ``match``."""
        rows = self.db.read(
            "SELECT m.session_id, m.id FROM (SELECT rowid AS r FROM messages_fts WHERE messages_fts MATCH ? "
            "ORDER BY rowid DESC LIMIT ?) f JOIN messages m ON m.id = f.r",
            (match, limit),
        )
        return [(str(row["session_id"]), int(row["id"])) for row in rows]

    def every_match(self, match: str) -> dict[str, int]:
        """Session id -> its newest message matching ``match``, over every message. Runs on a connection of its
        own, so a long search in another thread does not hold up the shared one; nothing on any error."""
        return newest_match_per_session(self.db.path, match)

    def texts(self, message_ids: Sequence[int]) -> dict[int, str]:
        """The first ``SNIPPET_SCAN_CHARS`` characters of these messages' plain text (by message id), in one
        primary-key query: what a snippet is cut from."""
        if not message_ids:
            return {}
        rows = self.db.read(
            f"SELECT id, substr(text, 1, ?) AS text FROM messages WHERE id IN ({', '.join('?' * len(message_ids))})",
            [SNIPPET_SCAN_CHARS, *message_ids],
        )
        return {int(row["id"]): str(row["text"]) for row in rows}


def newest_match_per_session(path: Path, match: str) -> dict[str, int]:
    """``Search.every_match`` on a connection of its own to the database at ``path``."""
    conn = open_connection(path)
    try:
        rows = conn.execute(
            "SELECT m.session_id, max(m.id) AS newest FROM (SELECT rowid AS r FROM messages_fts "
            "WHERE messages_fts MATCH ? ORDER BY rowid DESC) f JOIN messages m ON m.id = f.r GROUP BY m.session_id",
            (match,),
        ).fetchall()
    except sqlite3.Error:
        rows = []
    finally:
        conn.close()
    return {str(row["session_id"]): int(row["newest"]) for row in rows}
