"""The summariser's quotes checked against what the user typed: only the user's own words are acted on.

The summariser's typed answer names the user's standing instructions, the changes they stated and the next
step, each as a quote of the user's words. A model invents quotes, paraphrases and lifts fragments, so co
keeps a quote only when it really occurs in what the user wrote in the summarised stretch, and then acts on
the user's sentence that holds it, as the user wrote it (a fragment is widened to its sentence, a quote over
several sentences to that run of sentences). Whether it is a rule, a change or the next step is the model's
classification; nothing here reads the meaning of the words.

A quote is compared with the user's text under Unicode compatibility normalisation (NFKC equivalence:
full-width forms, ligatures and composed accents compare equal), case-folded, with whitespace, punctuation
and symbols ignored, so it is found in any script, Chinese and Japanese text without spaces included.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "MAX_QUOTE_CHARS",
    "Verified",
    "find_quote",
    "normalise",
    "occurs",
    "sentence_spans",
    "sentences",
    "verify_quotes",
]

MAX_QUOTE_CHARS = 400
"""A longer sentence (a paragraph without stops) is not widened to: the quote itself is kept, as the user
wrote it."""
MIN_QUOTE_CHARS = 4
"""A shorter quote (letters and digits counted) would be found almost anywhere."""

_BULLET_RE = re.compile(r"^\s*(?:[-*•>]+|\d+[.)])\s+")
_SENTENCE_END_RE = re.compile(r"[.!?][\"'”’)\]]*(?=\s)|[。！？][\"'”’)\]」』）]*")
_KEPT_CATEGORIES = frozenset("LNM")
"""Letters, numbers and combining marks are compared; whitespace, punctuation and symbols are not."""


def _folded(text: str) -> tuple[str, list[int]]:
    """``text`` normalised for comparison, and for each of its characters the index in ``text`` it comes
    from. NFKD per character is NFKC-equivalent for comparing, and keeps each character's origin."""
    chars: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        for folded in unicodedata.normalize("NFKD", char).casefold():
            if unicodedata.category(folded)[0] in _KEPT_CATEGORIES:
                chars.append(folded)
                origin.append(index)
    return "".join(chars), origin


def normalise(text: str) -> str:
    """``text`` as quotes are compared: compatibility-normalised, case-folded, letters and digits only."""
    return _folded(text)[0]


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Where the sentences of ``text`` are: (start, end) offsets, list markers and surrounding whitespace
    left out. A line break ends a sentence; so do ".", "!" and "?" before a space and a word that does not
    start in lower case ("e.g. this" stays one), and "。", "！" and "？" anywhere."""
    spans: list[tuple[int, int]] = []
    offset = 0
    for line in text.split("\n"):
        bullet = _BULLET_RE.match(line)
        begin = bullet.end() if bullet else 0
        for match in _SENTENCE_END_RE.finditer(line, begin):
            rest = line[match.end() :].lstrip()
            if not rest or (match.group(0)[0] in ".!?" and rest[0].islower()):
                continue
            spans.append((offset + begin, offset + match.end()))
            begin = match.end()
        spans.append((offset + begin, offset + len(line)))
        offset += len(line) + 1
    trimmed: list[tuple[int, int]] = []
    for start, end in spans:
        piece = text[start:end]
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            trimmed.append((start + lead, start + len(piece.rstrip())))
    return trimmed


def sentences(text: str) -> list[str]:
    """The sentences of a message, each on one line with whitespace collapsed and list markers removed."""
    return [" ".join(text[start:end].split()) for start, end in sentence_spans(text)]


def _widened(text: str, start: int, end: int) -> str:
    """The sentence (or run of sentences) of ``text`` holding ``text[start:end]``, whitespace collapsed; the
    span itself when that would be longer than ``MAX_QUOTE_CHARS``."""
    spans = [span for span in sentence_spans(text) if span[1] > start and span[0] < end]
    whole = " ".join(" ".join(text[s:e].split()) for s, e in spans)
    if spans and len(whole) <= MAX_QUOTE_CHARS:
        return whole
    return " ".join(text[start:end].split())


def find_quote(quote: str, texts: Sequence[str]) -> str | None:
    """The user's own sentence(s) holding ``quote``, verbatim, from the newest of ``texts`` that holds it;
    None when no text holds it (or it is too short to tell)."""
    wanted = normalise(quote)
    if len(wanted) < MIN_QUOTE_CHARS:
        return None
    for text in reversed(texts):
        folded, origin = _folded(text)
        at = folded.find(wanted)
        if at >= 0:
            return _widened(text, origin[at], origin[at + len(wanted) - 1] + 1)
    return None


QUESTION_MARKS = ("?", "？", "؟")
"""Question marks: ASCII (Latin and Cyrillic scripts), full width (Chinese, Japanese, Korean) and Arabic."""


def asked(text: str) -> bool:
    """Whether ``text`` is said as a question: it ends with a question mark (closing quotes and brackets aside)."""
    return text.rstrip(" \t\"'”’»」』)]").endswith(QUESTION_MARKS)


def occurs(words: str, texts: Sequence[str]) -> bool:
    """Whether ``words`` (a name, say) occur in one of ``texts``, compared as quotes are."""
    wanted = normalise(words)
    return bool(wanted) and any(wanted in normalise(text) for text in texts)


@dataclass(frozen=True)
class Verified:
    """The quotes found in the user's text, each widened to the user's sentence, and how many were not."""

    kept: tuple[str, ...] = ()
    dropped: int = 0


def verify_quotes(quotes: Sequence[str], texts: Sequence[str]) -> Verified:
    """The user's sentences that ``quotes`` come from (in the order of ``quotes``, each once), and the count
    of quotes found in none of ``texts``."""
    kept: list[str] = []
    seen: set[str] = set()
    dropped = 0
    for quote in quotes:
        found = find_quote(quote, texts)
        if found is None:
            dropped += 1
            continue
        key = normalise(found)
        if key not in seen:
            seen.add(key)
            kept.append(found)
    return Verified(tuple(kept), dropped)
