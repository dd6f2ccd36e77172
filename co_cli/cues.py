"""Word cues: the one module where co reads the user's words with regexes and word lists.

Cues only suggest and never act. They are used only when no typed answer could be had from a model (its answer
failed validation even when asked for JSON in its instructions), and what they find is shown to the user as a
suggestion, with the command that would apply it: a cue never pins, replaces, gates or marks anything on its
own. They know English only; a message in another language gets no suggestion, which is the safe side.

Each concern keeps its cues in a section of its own, headed by a comment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# ----- memory --------------------------------------------------------------------------------------------------
# Used by memory extraction (co_cli/memory/extract.py) when the model's answer could not be read: a sentence of
# the user's that seems to say something durable about them is proposed for review, marked as a suggestion,
# verbatim. It is never applied in `auto` mode and never replaces a memory.

_ABOUT_ME = re.compile(
    r"\b(?:my|mine|our|ours|i'm|i’m|i've|i’ve|we're|we’re)\b"
    r"|(?<!\bdo )(?<!\bcan )(?<!\bshould )(?<!\bcould )(?<!\bwould )(?<!\bwill )(?<!\bmay )(?<!\bmust )(?<!\bdid )"
    r"\b(?:I|we)\s+[a-z]+",
    re.IGNORECASE,
)
_REMEMBER = re.compile(r"\bremember\b|\bnote that\b|\bkeep in mind\b", re.IGNORECASE)
_RULE_START = re.compile(
    r"^(?:please\s+)?(?:always|never|don't|do not|from now on|make sure|stick to|prefer)\b", re.IGNORECASE
)
_QUESTION_START = re.compile(
    r"^(?:what|what's|whats|how|why|when|where|which|who|is|are|can|could|should|would|does|do|did|will)\b",
    re.IGNORECASE,
)
_PASSING = re.compile(
    r"\b(?:today|tonight|right now|at the moment|this (?:morning|afternoon|evening)|feel|feels|feeling|felt"
    r"|(?:i'm|i am) (?:tired|sleepy|exhausted|stressed|hungry|sick|bored|angry|upset|sad|happy|busy|annoyed"
    r"|frustrated|excited|nervous|anxious|grumpy|in a hurry))\b",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
MIN_SUGGESTION_WORDS = 3
MAX_SUGGESTION_CHARS = 300


@dataclass(frozen=True)
class MemorySuggestion:
    """A sentence of the user's that word cues take for something to remember (verbatim), and which cue."""

    text: str
    cue: str
    rule: bool = False


def cue_sentences(message: str) -> list[str]:
    """The sentences of ``message``, whitespace collapsed (split after . ! ? and at line ends)."""
    return [s for s in (" ".join(piece.split()) for piece in _SENTENCE_END.split(message)) if s]


def asks(sentence: str) -> bool:
    """Whether ``sentence`` seems to ask something (a question mark, or an English question word first)."""
    return sentence.rstrip("\"')]").endswith("?") or _QUESTION_START.search(sentence) is not None


def passing(sentence: str) -> bool:
    """Whether ``sentence`` seems to speak of a passing state ("I'm tired today", "right now")."""
    return _PASSING.search(sentence) is not None


def memory_suggestions(message: str) -> list[MemorySuggestion]:
    """The sentences of ``message`` that seem to state a rule ("Never push to main") or a durable fact about the
    user ("I use fish as my shell", "Remember that the API runs on port 8080"); questions and passing states
    ("I'm tired today") are left out."""
    found: list[MemorySuggestion] = []
    for sentence in cue_sentences(message):
        if len(sentence.split()) < MIN_SUGGESTION_WORDS or len(sentence) > MAX_SUGGESTION_CHARS:
            continue
        if asks(sentence) or passing(sentence):
            continue
        if _RULE_START.search(sentence):
            found.append(MemorySuggestion(sentence, "a stated rule", rule=True))
        elif _REMEMBER.search(sentence):
            found.append(MemorySuggestion(sentence, "asks to remember"))
        elif _ABOUT_ME.search(sentence):
            found.append(MemorySuggestion(sentence, "a statement about you"))
    return found


# ----- compaction ----------------------------------------------------------------------------------------------
# Used when the summariser answered in plain text (or failed, and the digest stands in): the user's sentences
# that read as a standing rule, a change of an earlier fact or the next step are listed by ``/compact show``
# with the command that would apply them (``/pin``, ``/tasks add``). Nothing is pinned or quoted into the
# summary from these.

MAX_RULE_CHARS = 400
"""A longer "sentence" (a paragraph without stops) is not a rule."""

_WORD_RE = re.compile(r"[\w'’-]+")
_INTERROGATIVE_STARTS_TEXT = """
    how what why when where which who whom whose is are was were does did can could would will shall may might
    have has should am
"""
_INTERROGATIVE_STARTS = frozenset(_INTERROGATIVE_STARTS_TEXT.split())
_SUBJECTS = frozenset({"you", "we", "i", "they", "it", "he", "she"})

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

_CHANGE_RE = re.compile(
    r"^(?:correction|update|actually|change of plan)\b|\b(?:moved|changed|switched|renamed|migrated) "
    r"(?:to|from)\b|\bno longer\b|\binstead of\b|\bnot [\w.-]+ any ?more\b|\bhas been replaced\b",
    re.IGNORECASE,
)
_NEXT_STEP_RE = re.compile(r"\bnext (?:step|steps|thing|task)\b", re.IGNORECASE)


def _words(text: str) -> list[str]:
    return [word.lower().replace("’", "'") for word in _WORD_RE.findall(text)]


def is_question(sentence: str) -> bool:
    """Whether one sentence asks (ends with "?", or starts as an English question does)."""
    if sentence.rstrip("\"')]").endswith(("?", "？")):
        return True
    words = _words(sentence)
    if not words:
        return False
    if words[0] in _INTERROGATIVE_STARTS:
        return True
    return words[0] == "do" and len(words) > 1 and words[1] in _SUBJECTS


def is_standing(sentence: str) -> bool:
    """Whether one sentence reads as a rule or preference in English ("Never run migrations on prod.")."""
    if len(sentence) > MAX_RULE_CHARS or len(_words(sentence)) < 3 or is_question(sentence):
        return False
    if _NOT_STANDING_RE.search(sentence):
        return False
    return bool(_STANDING_START_RE.search(sentence) or _STANDING_ANYWHERE_RE.search(sentence))


def states_change(sentence: str) -> bool:
    """Whether one sentence reads as a change of an earlier fact in English ("The DB moved to db-05.")."""
    return bool(_CHANGE_RE.search(sentence)) and not is_question(sentence)


def names_next_step(sentence: str) -> bool:
    """Whether one sentence names the next step in English ("The next step is the migration.")."""
    return bool(_NEXT_STEP_RE.search(sentence)) and not is_question(sentence)
