"""A memory brought up to date by the user's words when a change replaces only part of it.

A small model keeps a message whole as one memory more often than not ("Kite is our build tool in Go and it
ships on Feb 9"), and reads a later change in words that hold the new value only ("the new date is March 3") or
none ("Kite slipped"). Replaced by the change's own text, the memory loses the rest of what it said (the
project); left beside it, the old value stays active (the February date). So before a
change replaces a memory that holds words the change lacks, the model is asked, in one focused question, to
write that memory as it is now, shown the memory and the user's sentence. Nothing here reads the words: the
answer is checked as characters (``grounding``, in any language) and taken only when its names and numbers are
the memory's or the user's, it brings a value of the user's sentence, and it takes one of the memory's away (a
rewrite that keeps every old value keeps the old value active). Otherwise the change stays as it was read. (In
a script written without spaces a sentence is one "word", so a rewrite there is never taken: the change's own
text replaces the memory, as before.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from co_cli.memory.grounding import MIN_NAME_CHARS, grounded, names, numbers, said
from co_cli.memory.retrieval import words
from co_cli.models.structured_answer import ask
from co_cli.secrets import find_secret

if TYPE_CHECKING:
    from pydantic_ai.models import Model

MAX_CHARS = 300
MIN_WORDS_CHARS = 3
"""The words compared are this long or longer ("in", "à", "am" are no value)."""

INSTRUCTIONS = """The user told an assistant something that makes one of its memories out of date. Write the memory
as it is now: the user's new value in place of the old one, everything else the memory says kept, in the memory's
language. Nothing the user did not say.

Examples:
Memory: "Wir nutzen Jenkins für CI und deployen freitags" Said: "CI läuft jetzt auf GitLab"
-> {"text": "Wir nutzen GitLab für CI und deployen freitags"}
Memory: "Mon chat Tom a 3 ans et vit à Nantes" Said: "On a déménagé à Rennes le mois dernier"
-> {"text": "Mon chat Tom a 3 ans et vit à Rennes"}
Memory: "Ship date for Atlas is Oct 2" Said: "Atlas slipped to Nov 9, sadly"
-> {"text": "Ship date for Atlas is Nov 9"}"""


class Revised(BaseModel):
    text: str = Field(description="the memory as it is now", json_schema_extra={"maxLength": MAX_CHARS})


def _holds(value: str, text: str) -> bool:
    return value in numbers(text) if value.isdigit() else said(value, text)


def loses(text: str, old: str) -> bool:
    """Whether replacing the memory ``old`` by ``text`` may lose something of it: ``old`` holds a word ``text``
    lacks (compared as characters, an ending aside: ``grounding.said``). Which of those words are the value
    replaced and which are the rest is not read here, so every such replacement is rewritten by the model (a
    memory of the user's editor and shell, both written in lower case, holds no name that a change of editor
    lacks)."""
    return any(not said(word, text) for word in words(old) if len(word) >= MIN_NAME_CHARS)


def acceptable(revised: str, old: str, sentence: str) -> bool:
    """Whether ``revised`` can be the memory ``old`` brought up to date by the user's ``sentence``: every name and
    number of it is the memory's or the sentence's; it holds a name, number or word of the sentence that the
    memory lacks (the new value); it lacks one of the memory's names or numbers, or one of its words that the
    sentence says (the value replaced: "from vim to helix" names it, a value written in lower case is no name);
    and it holds no secret. A rewrite that keeps the old value beside the new one keeps it active, so it fails."""
    if not revised.strip() or find_secret(revised) is not None or not grounded(revised, f"{sentence}\n{old}"):
        return False
    brings = any(not _holds(v, old) and _holds(v, sentence) for v in [*_values(revised), *_words(revised)])
    takes = any(not _holds(value, revised) for value in _values(old)) or any(
        not said(word, revised) and said(word, sentence) for word in _words(old)
    )
    return brings and takes


def _values(text: str) -> list[str]:
    return [*numbers(text), *names(text, starts=True)]


def _words(text: str) -> list[str]:
    return [word for word in words(text) if len(word) >= MIN_WORDS_CHARS]


def question(old: str, sentence: str) -> str:
    return f'Memory: "{" ".join(old.split())}"\nSaid: "{" ".join(sentence.split())}"'


async def revised(model: Model, old: str, sentence: str, *, prompted: bool = False) -> str | None:
    """The memory ``old`` as it is after the user's ``sentence``, as the model writes it, when ``acceptable``;
    None otherwise (a failed request included: the change stays as it was read)."""
    try:
        answer = await ask(model, Revised, INSTRUCTIONS, question(old, sentence), prompted=prompted)
    except Exception:
        return None
    text = " ".join(answer.text.split())
    return text if acceptable(text, old, sentence) else None
