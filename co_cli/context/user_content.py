"""Whether a summary holds anything of what the user wrote.

A small summariser sometimes answers with a copy of one of the assistant's paragraphs, or with headings and
"none": the identifier check can still pass (the copied paragraph names what the assistant named), and the
user's name, project and rules are gone. A summary is rejected when it is mostly a copy of one assistant
message, or when the user wrote something of substance in the stretch and the summary holds none of it: not
one identifier the user typed, not one of the user's words of substance (compared by their first letters, so
"explained" matches "explain").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic_ai.messages import ModelMessage

from co_cli.context.ledger import check_summary, extract_identifiers
from co_cli.context.user_words import user_entries
from co_cli.message_view import answer_text
from co_cli.synthetic import is_ack

__all__ = ["copied_share", "reject_reason", "user_terms"]

COPY_SHARE = 0.7
"""A summary whose word triples are at least this share of one assistant message's is a copy of it."""
MIN_COPY_WORDS = 8
MIN_TERM_CHARS = 4

_WORD_RE = re.compile(r"[^\W\d_][\w'’-]*", re.UNICODE)
_STOP_TEXT = """
    about above after again against also always another answer anything around because been before being below
    between both cannot could does doing done down during each else even every from further have having here
    hers herself himself into itself just know like make many might more most much must myself need never next
    once only other ought ours ourselves over please really same shall should some such than that that's their
    theirs them themselves then there these they this those thing things think through under until very want
    were what when where which while will with without would your yours yourself yourselves hello thanks thank
    okay sure also maybe still well good great right yeah going today tomorrow work working help question
"""
_STOP = frozenset(_STOP_TEXT.split())


def _words(text: str) -> list[str]:
    return [w.casefold().strip("'’-") for w in _WORD_RE.findall(text)]


STEM_CHARS = 6


def _stem(word: str) -> str:
    return word[:STEM_CHARS]


def user_terms(span: Sequence[ModelMessage]) -> set[str]:
    """The stems of the words of substance the user wrote in ``span`` (their messages, and those an earlier
    summary in it carries)."""
    terms: set[str] = set()
    for entry in user_entries(span)[0]:
        terms.update(_stem(w) for w in _words(entry.text) if len(w) >= MIN_TERM_CHARS and w not in _STOP)
    return terms


def _triples(words: list[str]) -> set[tuple[str, str, str]]:
    return {(words[i], words[i + 1], words[i + 2]) for i in range(len(words) - 2)}


def copied_share(summary: str, span: Sequence[ModelMessage]) -> float:
    """The largest share of the summary's word triples found in one assistant answer of ``span``."""
    words = _words(summary)
    if len(words) < MIN_COPY_WORDS:
        return 0.0
    own = _triples(words)
    best = 0.0
    for message in span:
        answer = answer_text(message)
        if answer and not is_ack(message):
            best = max(best, len(own & _triples(_words(answer))) / len(own))
    return best


def reject_reason(summary: str, span: Sequence[ModelMessage]) -> str | None:
    """Why ``summary`` cannot stand for ``span`` (a copy of an assistant message, or none of the user's
    content), or None when it can."""
    if copied_share(summary, span) >= COPY_SHARE:
        return "it is a copy of an assistant message, not a summary"
    typed = [ident for ident in extract_identifiers(span) if ident.source == "user"]
    terms = user_terms(span)
    if not typed and not terms:
        return None  # the user wrote nothing of substance here: nothing to look for
    if typed and check_summary(summary, typed).kept:
        return None
    if terms & {_stem(w) for w in _words(summary)}:
        return None
    return "it holds none of what you wrote (no name, identifier or word of yours)"
