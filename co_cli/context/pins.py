"""Verification of the standing instructions a summariser proposes to pin.

``detect_standing_instructions`` finds the user's rules and preferences without any model: sentences that
start "always …", "never …", "don't …", "please always …", or say "from now on", "hard rule", "I prefer". A
summariser asked for the user's standing instructions returns quotes; a small model invents some and
lifts topic phrases out of questions ("exponential backoff" from "how does exponential backoff work?").
``verify_pins`` keeps a quote only when it really occurs in a message the user typed in the stretch
(compared with case, whitespace and quote characters normalised) and the sentence it comes from is a whole
instruction; a fragment of such a sentence is widened to the whole sentence, as the user wrote it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pydantic_ai.messages import ModelMessage

from co_cli.message_view import user_text

__all__ = [
    "MAX_PIN_CHARS",
    "detect_standing_instructions",
    "is_instruction",
    "is_question",
    "is_standing",
    "sentences",
    "verify_pins",
]

MAX_PIN_CHARS = 400
"""A longer "sentence" (a paragraph without stops) is not a pin."""
MIN_QUOTE_WORDS = 2
MIN_QUOTE_CHARS = 8
WHOLE_SENTENCE_SHARE = 0.8
"""A quote without an instruction word must cover this share of its sentence (a stated constraint quoted
whole, such as "Our staging region is us-east-1.")."""

_QUOTE_CHARS = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"', "`": None, "*": None})
"""Curly quotes compare as straight ones; Markdown code and emphasis marks are ignored."""
_BULLET_RE = re.compile(r"^\s*(?:[-*•>]+|\d+[.)])\s+")
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[^a-z\s])")
_WORD_RE = re.compile(r"[\w'’-]+")

_RULE_RE = re.compile(
    r"\b(?:always|never|must|mustn't|must not|don't|do not|dont|please|should|shouldn't|should not|avoid|"
    r"prefer|ensure|make sure|be sure|remember|required?|forbidden|not allowed|only ever|no longer|instead of|"
    r"rather than|need to|needs to|have to|has to|stick to|use)\b",
    re.IGNORECASE,
)
_WANT_RE = re.compile(
    r"\b(?:i|we)(?:'d| would)? (?:want|need|like)\b(?! to (?:know|understand|learn|see|ask|hear))", re.IGNORECASE
)
_IMPERATIVE_STARTS_TEXT = """
    use add write run put call name format leave reply answer respond check test commit push deploy target indent
    limit keep wrap sort mention include exclude skip ignore send ask tell log store save return raise follow stick
    treat default prefer avoid make be stop remember ensure never always only pin document explain cite quote show
    print prefix suffix start end stay respect read rename refer let no don't dont pick choose put set give
"""
_IMPERATIVE_STARTS = frozenset(_IMPERATIVE_STARTS_TEXT.split())
_INTERROGATIVE_STARTS_TEXT = """
    how what why when where which who whom whose is are was were does did can could would will shall may might
    have has should am
"""
_INTERROGATIVE_STARTS = frozenset(_INTERROGATIVE_STARTS_TEXT.split())
_SUBJECTS = frozenset({"you", "we", "i", "they", "it", "he", "she"})


def _normalise(text: str) -> str:
    return " ".join(text.translate(_QUOTE_CHARS).casefold().split())


def _strip_quote(text: str) -> str:
    text = _BULLET_RE.sub("", text.strip())
    return text.strip().strip("\"'“”‘’`").strip().rstrip(".!;:,").strip()


def sentences(text: str) -> list[str]:
    """The sentences of a message, each on one line with whitespace collapsed and list markers removed."""
    out: list[str] = []
    for line in text.split("\n"):
        line = _BULLET_RE.sub("", line).strip()
        if not line:
            continue
        for piece in _SENTENCE_END_RE.split(line):
            piece = " ".join(piece.split())
            if piece:
                out.append(piece)
    return out


def _words(text: str) -> list[str]:
    return [word.lower().replace("’", "'") for word in _WORD_RE.findall(text)]


def is_question(sentence: str) -> bool:
    if sentence.rstrip("\"')]").endswith("?"):
        return True
    words = _words(sentence)
    if not words:
        return False
    first = words[0]
    if first in _INTERROGATIVE_STARTS:
        return True
    return first == "do" and len(words) > 1 and words[1] in _SUBJECTS


def _has_rule_shape(sentence: str) -> bool:
    words = _words(sentence)
    if len(words) < 2:
        return False
    if is_question(sentence):
        return "please" in words and not sentence.rstrip().endswith("?")
    return words[0] in _IMPERATIVE_STARTS or bool(_RULE_RE.search(sentence)) or bool(_WANT_RE.search(sentence))


def is_instruction(sentence: str) -> bool:
    """Whether a sentence reads as a standing instruction or rule (not a question, not a fragment)."""
    return len(sentence) <= MAX_PIN_CHARS and _has_rule_shape(sentence)


def _is_stated_constraint(sentence: str) -> bool:
    """A complete statement (not a question) of at least four words that ends a clause."""
    if len(sentence) > MAX_PIN_CHARS or is_question(sentence):
        return False
    return len(_words(sentence)) >= 4 and sentence.rstrip("\"')]").endswith((".", "!"))


@dataclass(frozen=True)
class _Match:
    sentences: tuple[str, ...]
    covered_share: float


def _matches(quote: str, messages: Sequence[ModelMessage]) -> Iterator[_Match]:
    """Where ``quote`` occurs in what the user typed: newest message first, as the run of sentences (one,
    or a few in a row) that holds it."""
    for message in reversed(messages):
        text = user_text(message)
        if not text or quote not in _normalise(text):
            continue
        parts = sentences(text)
        normalised = [_normalise(s) for s in parts]
        for size in range(1, min(len(parts), 4) + 1):
            found = False
            for start in range(len(parts) - size + 1):
                joined = " ".join(normalised[start : start + size])
                if quote in joined:
                    found = True
                    yield _Match(tuple(parts[start : start + size]), len(quote) / max(len(joined), 1))
            if found:
                break  # a longer run would hold it too; the shortest is where it comes from


def _accept(match: _Match) -> list[str]:
    if len(match.sentences) == 1:
        sentence = match.sentences[0]
        if is_instruction(sentence):
            return [sentence]
        if match.covered_share >= WHOLE_SENTENCE_SHARE and _is_stated_constraint(sentence):
            return [sentence]
        return []
    # a quote over several sentences: each one is judged as a pin of its own
    return [sentence for sentence in match.sentences if is_instruction(sentence)]


def verify_pins(quotes: Sequence[str], span_messages: Sequence[ModelMessage]) -> list[str]:
    """The quotes that are real, whole instructions of the user, each widened to the sentence(s) it comes
    from, verbatim from the user's message; invented quotes, fragments of questions and topic phrases are
    dropped. Order follows ``quotes``; duplicates are dropped."""
    kept: list[str] = []
    seen: set[str] = set()
    for raw in quotes:
        quote = _normalise(_strip_quote(raw))
        if len(quote) < MIN_QUOTE_CHARS or len(_words(quote)) < MIN_QUOTE_WORDS:
            continue
        for match in _matches(quote, span_messages):
            accepted = _accept(match)
            if not accepted:
                continue
            for sentence in accepted:
                key = _normalise(sentence)
                if key not in seen:
                    seen.add(key)
                    kept.append(sentence)
            break
    return kept


_STANDING_START_RE = re.compile(
    r"^(?:(?:please|and|also|so|oh|ok|okay|remember|remember to|note|one more thing|important)[,:]?\s+)*"
    r"(?:always|never|don't|do not|dont|stop \w+ing|avoid|only ever)\b",
    re.IGNORECASE,
)
_STANDING_ANYWHERE_RE = re.compile(
    r"\b(?:from now on|going forward|hard rule|as a rule|golden rule|standing rule|rule of thumb|for the rest of "
    r"(?:this|the) (?:session|conversation|project)|(?:you|we) (?:must|should|have to) (?:always|never)|"
    r"(?:i|we) (?:always |strongly )?prefer|make sure (?:to |you )?always|never ever)\b",
    re.IGNORECASE,
)
_NOT_STANDING_RE = re.compile(
    r"^(?:please\s+)?(?:don't|do not|never) (?:worry|mind|know|think|understand|see|get|remember|care|bother|"
    r"forget)\b|\b(?:yet|for now|right now|this time|today|just now)\b",
    re.IGNORECASE,
)
"""Not a standing rule: a figure of speech ("never mind"), a reminder, or something for now only."""


def is_standing(sentence: str) -> bool:
    """Whether one sentence of the user's states a rule or preference ("Never run migrations on prod.")."""
    if len(sentence) > MAX_PIN_CHARS or len(_words(sentence)) < 3 or is_question(sentence):
        return False
    if _NOT_STANDING_RE.search(sentence):
        return False
    return bool(_STANDING_START_RE.search(sentence) or _STANDING_ANYWHERE_RE.search(sentence))


def detect_standing_instructions(messages: Sequence[ModelMessage]) -> list[str]:
    """The rules and preferences the user stated in ``messages`` ("Never run migrations on prod.", "From now
    on answer in British English.", "I prefer f-strings."), each the whole sentence as the user wrote it, in
    order, without repeats. Found by their wording alone, whatever a summariser makes of them."""
    found: list[str] = []
    seen: set[str] = set()
    for message in messages:
        text = user_text(message)
        if not text:
            continue
        for sentence in sentences(text):
            key = _normalise(sentence)
            if key not in seen and is_standing(sentence):
                seen.add(key)
                found.append(sentence)
    return found
