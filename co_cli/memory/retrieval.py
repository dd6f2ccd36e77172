"""Which memories go into a request: ranking, near-duplicates and the token budget (pure functions).

Score = (1 - w) * relevance + w * exp(-age_days / 30), w = 0.2: relevance is FTS5's BM25 normalised by the
best candidate of the query (so the best match scores 1), recency decays with a 30-day time constant.
A memory that does not match the prompt at all is not a candidate; memories of kind ``instruction`` always
go in first, and a memory about another person comes after the user's own unless the prompt names that
person (``users_first``: read from the memory's ``about``, never from the prompt's pronouns).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from co_cli.memory.grounding import said
from co_cli.text_tokens import estimate_text_tokens

RECENCY_WEIGHT = 0.2
RECENCY_DAYS = 30.0
DUPLICATE_JACCARD = 0.8
MAX_QUERY_TERMS = 32
LINE_OVERHEAD_TOKENS = 3
"""The '- [m12] ' framing of one memory line."""

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
_STOPWORD_TEXT = """
a about above after again against all am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers
herself him himself his how i if in into is it its itself just let me more most my myself no nor not now of
off on once only or other our ours ourselves out over own please same she should so some such than that the
their theirs them themselves then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours yourself yourselves tell know think
want need like get got make use using used ok okay yes hi hello thanks thank
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def query_terms(prompt: str) -> list[str]:
    """The prompt's distinct content words, in order (stopwords and one-letter words dropped)."""
    seen: dict[str, None] = {}
    for word in words(prompt):
        if len(word) > 1 and word not in STOPWORDS:
            seen.setdefault(word, None)
        if len(seen) >= MAX_QUERY_TERMS:
            break
    return list(seen)


def recency(age_days: float) -> float:
    return math.exp(-max(0.0, age_days) / RECENCY_DAYS)


def score(relevance: float, age_days: float, weight: float = RECENCY_WEIGHT) -> float:
    return (1 - weight) * relevance + weight * recency(age_days)


def normalised_relevance(bm25_scores: Sequence[float]) -> list[float]:
    """FTS5's BM25 (negative, lower is better) -> 0..1, the best of the query being 1."""
    magnitudes = [max(0.0, -s) for s in bm25_scores]
    best = max(magnitudes, default=0.0)
    if best <= 0:
        return [1.0 for _ in magnitudes]  # every match equally (ir)relevant: let recency decide
    return [m / best for m in magnitudes]


def near_duplicate(a: str, b: str, threshold: float = DUPLICATE_JACCARD) -> bool:
    """Whether two statements share nearly all their words (Jaccard similarity of their word sets)."""
    wa, wb = set(words(a)), set(words(b))
    if not wa or not wb:
        return a.strip().lower() == b.strip().lower()
    return len(wa & wb) / len(wa | wb) >= threshold


@dataclass(frozen=True)
class Scored:
    id: int
    text: str
    kind: str
    score: float
    about: str | None = None
    """``user``, ``other`` (``person`` names them) or None (not known: read as the user's)."""
    person: str | None = None

    @property
    def label(self) -> str:
        """What the memory's line says besides its text: an instruction, or whom else it is about."""
        if self.kind == "instruction":
            return "(instruction)"
        if self.about == "other":
            return f"(about {self.person})" if self.person else "(about someone else)"
        return ""


def line_tokens(text: str) -> int:
    return estimate_text_tokens(text) + LINE_OVERHEAD_TOKENS


def rank(
    candidates: Iterable[tuple[int, str, str, float, float]], now: float, weight: float = RECENCY_WEIGHT
) -> list[Scored]:
    """Candidates as (id, text, kind, bm25, updated_at) -> best first."""
    items = list(candidates)
    relevance = normalised_relevance([c[3] for c in items])
    scored = [
        Scored(id=c[0], text=c[1], kind=c[2], score=score(rel, (now - c[4]) / 86400.0, weight))
        for c, rel in zip(items, relevance, strict=True)
    ]
    scored.sort(key=lambda s: (-s.score, -s.id))
    return scored


def users_first(ranked: Sequence[Scored], prompt: str) -> list[Scored]:
    """``ranked`` with the memories about another person that ``prompt`` does not name after the rest (in their
    order): a question that names no one else is the user's own, and their facts answer it. A question that
    names the person ranks that person's memories as before."""

    def others(item: Scored) -> bool:
        return item.about == "other" and not (item.person and said(item.person, prompt))

    return sorted(ranked, key=others)


def select(instructions: Sequence[Scored], ranked: Sequence[Scored], budget_tokens: int) -> list[Scored]:
    """Instructions first, then the ranked memories, skipping near-duplicates, within ``budget_tokens``.

    A memory that does not fit is skipped (a shorter one after it may still fit)."""
    chosen: list[Scored] = []
    chosen_words: list[set[str]] = []
    used = 0
    seen: set[int] = set()
    for item in [*instructions, *ranked]:
        if item.id in seen:
            continue
        cost = line_tokens(item.text)
        if used + cost > budget_tokens:
            continue
        item_words = set(words(item.text))
        if any(_similar(item_words, other) for other in chosen_words):
            continue
        chosen.append(item)
        chosen_words.append(item_words)
        seen.add(item.id)
        used += cost
    return chosen


def _similar(a: set[str], b: set[str], threshold: float = DUPLICATE_JACCARD) -> bool:
    return bool(a and b) and len(a & b) / len(a | b) >= threshold
