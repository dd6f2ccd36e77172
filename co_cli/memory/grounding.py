"""Whether what a model read from the user's message is in the message: checks that hold in any language.

A model asked what a message says about the user may answer with what it knows itself ("Lyon is a city in
France"), with a quote it made up, or with a number the user never wrote. These checks read the message only
as characters, never as words of a language, so they hold for a German, Spanish or Japanese message alike:

- a fact's quote must occur in the message, compared after NFKC normalisation and case folding with whitespace
  and punctuation ignored (so a quote of a Japanese or Chinese message, which has no spaces, is found too);
- the numbers of a fact's text must be the message's, exactly; its names (a capitalised word that does not
  start a sentence, a word joined by ``-``, ``_``, ``.`` or ``/``, a word with a capital inside, words in quotes)
  must be found in the message, a name with another ending (a possessive, a case ending) included;
- nothing is taken from a sentence of the message that holds a secret.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Sequence

from co_cli.context import pins
from co_cli.secrets import find_secret

MIN_QUOTE_CHARS = 2
MIN_NAME_CHARS = 2
ENDING_CHARS = 2
"""A name may differ from the message's word in its last characters ("Dana's", "Danas", "Москве" for "Москва")."""
MIN_STEM_CHARS = 3

_QUOTED = re.compile(r"`([^`]+)`|[\"“„«「『]([^\"”“»」』]+)[\"”“»」』]")
_TOKEN = re.compile(r"\S+")
_SENTENCE_END = re.compile(r"[.!?。！？]$")
_JOINED = re.compile(r"\w[-_./]\w", re.UNICODE)
_DIGITS = re.compile(r"\d+")
_RUN = re.compile(r"[^\W_]+", re.UNICODE)
_CLAUSE_END = re.compile(r"[.!?;。！？；\n]+")


def normalise(text: str) -> str:
    """``text`` compared as characters: as compaction compares quotes (``context.pins.normalise``: NFKC-equivalent,
    case folded, letters, digits and marks only), recomposed (NFC) so that a letter and its accent are one
    character when endings are compared by length ("Ольгой" and "Ольга")."""
    return unicodedata.normalize("NFC", pins.normalise(text))


def quoted(quote: str, message: str) -> bool:
    """Whether ``quote`` occurs in ``message`` (normalised as ``normalise`` says)."""
    wanted = normalise(quote)
    return len(wanted) >= MIN_QUOTE_CHARS and wanted in normalise(message)


def numbers(text: str) -> list[str]:
    """The digit runs of ``text`` (after NFKC: full-width digits are digits)."""
    return _DIGITS.findall(unicodedata.normalize("NFKC", text))


def names(text: str, *, starts: bool = False) -> list[str]:
    """The names of ``text``: words in quotes or backticks, words joined by ``-_./`` ("my-app", "api.example.com"),
    words with a capital inside ("iTerm", "AWS"), and capitalised words that do not start a sentence (with
    ``starts``, those that do too: "Zed is my editor")."""
    found = [m.group(1) or m.group(2) for m in _QUOTED.finditer(text)]
    sentence_start = True
    for match in _TOKEN.finditer(_QUOTED.sub(" ", text)):
        token = match.group().strip("\"'“”‘’„«»()[]{}<>,;:!?.。、！？")
        at_start = sentence_start and not starts
        sentence_start = bool(_SENTENCE_END.search(match.group()))
        first = _RUN.search(token)
        if first is None or len(first.group()) < MIN_NAME_CHARS or not any(ch.isalpha() for ch in token):
            continue  # no name: a number, a sign, or a one-letter word ("I'm")
        if _JOINED.search(token) or any(ch.isupper() for ch in token[1:]) or (token[0].isupper() and not at_start):
            found.append(token)
    return found


def _runs(text: str) -> list[str]:
    return [normalise(r) for r in _RUN.findall(unicodedata.normalize("NFKC", text))]


def said(name: str, message: str) -> bool:
    """Whether ``name`` is in ``message``: as it is (normalised), or each of its words as a word of the message
    that differs at most in its last ENDING_CHARS characters."""
    whole = normalise(name)
    if whole and whole in normalise(message):
        return True
    words = _runs(message)
    parts = [p for p in _runs(name) if len(p) >= MIN_NAME_CHARS]
    return all(any(_same_word(part, word) for word in words) for part in parts)


def shares_a_word(terms: Sequence[str], text: str) -> bool:
    """Whether one of ``terms`` is a word of ``text`` or begins as one does (MIN_STEM_CHARS characters: "moved"
    and "moving"), read as characters. The full-text index stems words as English, so a name can match a short
    word: "Ines" is stemmed to "in" and matched every memory holding "in"."""
    runs = _runs(text)
    return any(
        run == word or len(os.path.commonprefix([run, word])) >= MIN_STEM_CHARS
        for word in map(normalise, terms)
        for run in runs
    )


def in_their_words(text: str, source: str) -> bool:
    """Whether more than half the distinct words of ``text`` are words of ``source`` (an ending aside; a run of a
    script written without spaces counts when it occurs in ``source``): a memory is kept in the user's words and
    language, and a small model asked so still writes some of a German message's facts in English."""
    wanted = {run for run in _runs(text) if len(run) >= MIN_NAME_CHARS}
    if not wanted:
        return True
    runs, whole = _runs(source), normalise(source)
    found = sum(1 for run in wanted if (run in whole if _wide(run) else any(_same_word(run, w) for w in runs)))
    return found * 2 > len(wanted)


def wide(ch: str) -> bool:
    """Whether ``ch`` is a wide character (CJK), written without spaces between words."""
    return unicodedata.east_asian_width(ch) in "WF"


def _wide(run: str) -> bool:
    return any(map(wide, run))


def _same_word(a: str, b: str) -> bool:
    common = len(os.path.commonprefix([a, b]))
    return a == b or (common >= MIN_STEM_CHARS and max(len(a), len(b)) - common <= ENDING_CHARS)


def grounded(text: str, source: str) -> bool:
    """Whether every number and name of ``text`` is in ``source`` (the user's message, and for a replacement
    the memory it replaces)."""
    if not set(numbers(text)) <= set(numbers(source)):
        return False
    return all(said(name, source) for name in names(text))


def from_a_secret(quote: str, message: str) -> bool:
    """Whether ``quote`` is (part of) a sentence or clause of ``message`` that holds a secret ("The staging
    password is tulip42"), or holds one itself."""
    if find_secret(quote) is not None:
        return True
    wanted = normalise(quote)
    for clause in _CLAUSE_END.split(message):
        if find_secret(clause) is None:
            continue
        near = normalise(clause)
        if wanted and (wanted in near or near in wanted):
            return True
    return False
