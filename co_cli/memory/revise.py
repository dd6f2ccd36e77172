"""A memory brought up to date by the user's words when a change replaces only part of it.

A small model keeps a message whole as one memory more often than not ("Kite is our build tool in Go and it
ships on Feb 9"), and reads a later change in words that hold the new value only ("the new date is March 3") or
none ("Kite slipped"). Replaced by the change's own text, the memory loses the rest of what it said (the
project); left beside it, the old value stays active (the February date). So before a change replaces a memory
that holds words the change lacks, the model is asked, in one focused question, which words of the memory are
the old value and which words of the user's sentence take their place, each copied exactly. co makes the edit
itself: the old words found in the memory, the new ones in the sentence (case and spacing aside, in any
script), the new words bring a value the memory lacks, and the old ones are a value (one of the memory's names
or numbers, or a word the sentence says: "from vim to helix" names it, a value written in lower case is no
name; such a value is not replaced by the words of another fact of the message kept on its own). Otherwise
the change stays as it was read. (Asked to write the memory out whole instead, the 1.5B model changed the wrong
value, "meine Shell ist helix" for a change of editor, or dropped the rest; asked for the two spans, it named
both right in each case tried.)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from co_cli.memory.grounding import MIN_NAME_CHARS, names, numbers, said
from co_cli.memory.retrieval import words
from co_cli.models.structured_answer import ask
from co_cli.secrets import find_secret

if TYPE_CHECKING:
    from pydantic_ai.models import Model

MAX_SPAN_CHARS = 120
MIN_WORDS_CHARS = 3
"""The words compared are this long or longer ("in", "à", "am" are no value)."""
EDGES = " \t\n\"'“”‘’„«».,;:!?。、"

INSTRUCTIONS = """The user told an assistant something that makes one of its memories out of date. Which words
of the memory are the old value, and which words of the user's sentence are the new value that takes their
place? Copy both exactly: "old" from the memory, "new" from the user's sentence.

Examples:
Memory: "Wir nutzen Jenkins für CI und deployen freitags" Said: "CI läuft jetzt auf GitLab"
-> {"old": "Jenkins", "new": "GitLab"}
Memory: "Mon chat Tom a 3 ans et vit à Nantes" Said: "On a déménagé à Rennes le mois dernier"
-> {"old": "Nantes", "new": "Rennes"}
Memory: "Ship date for Atlas is Oct 2" Said: "Atlas slipped to Nov 9, sadly"
-> {"old": "Oct 2", "new": "Nov 9"}"""


class Revision(BaseModel):
    old: str = Field(
        description="the out-of-date words, copied from the memory", json_schema_extra={"maxLength": MAX_SPAN_CHARS}
    )
    new: str = Field(
        description="the words that take their place, copied from the user's sentence",
        json_schema_extra={"maxLength": MAX_SPAN_CHARS},
    )


def _holds(value: str, text: str) -> bool:
    return value in numbers(text) if value.isdigit() else said(value, text)


def loses(text: str, old: str) -> bool:
    """Whether replacing the memory ``old`` by ``text`` may lose something of it: ``old`` holds a word ``text``
    lacks (compared as characters, an ending aside: ``grounding.said``). Which of those words are the value
    replaced and which are the rest is not read here, so every such replacement is asked about (a memory of
    the user's editor and shell, both written in lower case, holds no name that a change of editor lacks)."""
    return any(not said(word, text) for word in words(old) if len(word) >= MIN_NAME_CHARS)


def found(part: str, text: str) -> tuple[int, int] | None:
    """Where ``part`` (its edges' spaces, quotes and punctuation aside) occurs in ``text``, case and spacing
    aside: as a whole word when it occurs so, else anywhere (a script written without spaces has no word
    edges); None when it does not occur or is empty."""
    wanted = part.strip(EDGES).split()
    if not wanted:
        return None
    pattern = r"\s+".join(re.escape(w) for w in wanted)
    match = re.search(rf"(?<!\w){pattern}(?!\w)", text, re.IGNORECASE) or re.search(pattern, text, re.IGNORECASE)
    return match.span() if match else None


def edited(
    memory: str, sentence: str, revision: Revision, *, quote: str = "", kept_apart: Sequence[str] = ()
) -> str | None:
    """``memory`` with the model's old words replaced by its new ones, as the user wrote them, when that checks
    out: both are found (``found``); the old words are not the whole memory (nothing of it would be kept) and are
    a value of it, one of its names or numbers or a word the sentence says, and, in a memory that holds a number,
    hold one when the new words do and only then; the new words bring a value the memory lacks; the result holds
    a number the sentence brings when the memory holds a number and the sentence one it lacks ("März" for
    "April" leaves "der 3. April" for the 14th); old words that are no name or number (a value known only
    because the sentence says a word of them) are not replaced by words of another fact of the message kept on
    its own (``kept_apart``: its quotes) unless the change's own ``quote`` holds them ("Marek went on parental
    leave, so Ines handles reviews on my-app now" does not make Marek's memory one of "reviews on my-app"; a
    date is the change's new date wherever the message says it, "Heron got pushed back, new date is June 11");
    and the result holds no secret. None otherwise."""
    old, new = found(revision.old, memory), found(revision.new, sentence)
    if old is None or new is None:
        return None
    before, replacement = memory[old[0] : old[1]], sentence[new[0] : new[1]]
    named = bool(_values(before))
    if not named and found(replacement, quote) is None and any(found(replacement, o) for o in kept_apart):
        return None
    if not memory[: old[0]].strip(EDGES) and not memory[old[1] :].strip(EDGES):
        return None
    value = named or any(said(word, sentence) for word in _words(before))
    if numbers(memory) and bool(numbers(replacement)) != bool(numbers(before)):
        return None  # a date, time or version moved replaces the memory's, not a name beside it, nor by words
    brings = any(not _holds(v, memory) for v in [*_values(replacement), *_words(replacement)])
    text = " ".join(f"{memory[: old[0]]}{replacement}{memory[old[1] :]}".split())
    brought = set(numbers(sentence)) - set(numbers(memory))
    if numbers(memory) and brought and not brought & set(numbers(text)):
        return None  # the user's sentence moves a number ("auf den 14. April") the edit leaves as it was
    return text if value and brings and find_secret(text) is None else None


def _values(text: str) -> list[str]:
    return [*numbers(text), *names(text, starts=True)]


def _words(text: str) -> list[str]:
    return [word for word in words(text) if len(word) >= MIN_WORDS_CHARS]


def question(old: str, sentence: str) -> str:
    return f'Memory: "{" ".join(old.split())}"\nSaid: "{" ".join(sentence.split())}"'


async def revised(
    model: Model, old: str, sentence: str, *, quote: str = "", kept_apart: Sequence[str] = (), prompted: bool = False
) -> str | None:
    """The memory ``old`` as it is after the user's ``sentence`` (the change's ``quote`` in it, the quotes of the
    message's other facts ``kept_apart``), edited as the model answers (``edited``); None when the edit does not
    check out (a failed request included: the change stays as it was read)."""
    try:
        answer = await ask(model, Revision, INSTRUCTIONS, question(old, sentence), prompted=prompted)
    except Exception:
        return None
    return edited(" ".join(old.split()), " ".join(sentence.split()), answer, quote=quote, kept_apart=kept_apart)
