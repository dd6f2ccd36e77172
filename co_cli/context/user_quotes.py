"""The user's own sentences quoted into a summary where a small model looks for them.

A summariser writes its own idea of what comes next under its "Pending" heading, and keeps the value the user
later corrected as often as the correction; a small model then answers "what is the next step?" or "which
host is it on now?" from the summary's prose, although the user's words sit beside it. So two kinds of the
user's sentences are quoted into an accepted summary's text: the next step the user named, right under the
summary's "Pending and next step" heading, and the changes the user stated ("Correction: the staging
database moved to staging-db-05"), at the end of the summary, as what holds over anything above them. Pure
functions over the user's entries (``user_words.user_entries``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from co_cli.context.pins import is_question, sentences
from co_cli.context.user_words import Entry, clip_sentence

__all__ = ["CHANGES", "NEXT_STEP", "QuoteKind", "quote_user", "stated"]

_STANDING_HEADING_RE = re.compile(r"^[ \t#*_]*Standing instructions\b.*$", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class QuoteKind:
    """One kind of sentence of the user's that a summary gets quoted into it."""

    heading: str
    """The line above the quotes."""
    sentence: re.Pattern[str]
    """What makes a sentence of the user's one of this kind (questions never are)."""
    limit: int
    """The newest this many are quoted."""
    under: re.Pattern[str] | None = None
    """The summary heading the quotes go right under; without one (or when the summary has none), at the end
    of the summary, before its "Standing instructions" (whose "> " lines become pins)."""


NEXT_STEP = QuoteKind(
    "The next step, as the user stated it:",
    re.compile(r"\bnext (?:step|steps|thing|task)\b", re.IGNORECASE),
    2,
    re.compile(
        r"^[ \t]*(?:#{1,6}[ \t]*|\*\*)?[^\n]{0,30}\b(?:pending|next steps?)\b[^\n]{0,30}$",
        re.IGNORECASE | re.MULTILINE,
    ),
)
CHANGES = QuoteKind(
    "Changed since, as the user stated it (this holds over anything above):",
    re.compile(
        r"^(?:correction|update|actually|change of plan)\b|\b(?:moved|changed|switched|renamed|migrated) "
        r"(?:to|from)\b|\bno longer\b|\binstead of\b|\bnot [\w.-]+ any ?more\b|\bhas been replaced\b",
        re.IGNORECASE,
    ),
    3,
)


def stated(entries: Sequence[Entry], kind: QuoteKind) -> list[str]:
    """The user's sentences of ``kind`` in ``entries`` (their messages, or the shortened lines of older ones),
    each once, the newest last, at most ``kind.limit``."""
    found: list[str] = []
    for entry in entries:
        for sentence in sentences(entry.text.removeprefix("~ ")):
            if kind.sentence.search(sentence) and not is_question(sentence):
                found.append(clip_sentence(sentence))
    return list(dict.fromkeys(found))[-kind.limit :]


def quote_user(body: str, kind: QuoteKind, quotes: Sequence[str]) -> str:
    """A summary ``body`` with ``quotes`` under ``kind``'s heading, placed as ``QuoteKind.under`` says;
    quotes the body already holds (in any case) are not repeated."""
    held = body.casefold()
    new = [quote for quote in quotes if quote.casefold() not in held]
    if not new:
        return body
    block = "\n".join([kind.heading, *(f"> {quote}" for quote in new)])
    under = kind.under.search(body) if kind.under is not None else None
    if under is not None:
        return f"{body[: under.end()]}\n{block}{body[under.end() :]}"
    standing = list(_STANDING_HEADING_RE.finditer(body))
    if standing:
        at = standing[-1].start()
        return f"{body[:at].rstrip()}\n\n{block}\n\n{body[at:]}"
    return f"{body.rstrip()}\n\n{block}"
