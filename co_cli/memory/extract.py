"""Automatic extraction: what the user's message says worth keeping, read by the model in one typed answer,
verified against the message, then acted on.

After a turn is answered, the summarisation model is shown the user's message (never the assistant's answer) and the
candidate memories: the nearest active ones by the message's own words (the FTS search) and those sharing their topic
keys, each with its id, whom it is about and its topic key, and the other topic keys in use. It answers one ``Reading``
in one request (``confirmed`` then asks one short question about each part read as a rule or as the next step, and about
each fact that would be kept as someone else's): 0-3 facts, each with the quote it comes from, how that quote is said (a
statement, a question, a request), its subject (the words naming whom or what it is about, or "I" for the user), whom it
is about (the user, another person, no one), its text in the user's own language and words, a snake_case topic key, its
kind (a lasting fact, a change, a rule for the assistant, the next step, a passing state) and the id of a shown memory
it supersedes. An empty list is a fine answer: questions and one-off requests hold nothing to keep.

``plan`` (pure) verifies each fact and decides what it changes: its quote must be in the message and its names
and numbers too (``grounding``: checks that hold in any language); secrets are refused; a fact about no one,
a passing state and a question or request that is not a rule are not kept (``Fact.kept``: the model's own
classification, no words read); a fact is another person's when the model says so or when its subject names
someone the message names (``whose``); a rule becomes an ``instruction`` memory. A fact replaces a memory when the
model names it (``replaces``, one of the memories shown) or when it has the same subject (about, person) and
topic key as exactly one active memory the model was shown, and only when it can be that memory's new value
(``new_value_for``, read from names and numbers); never because of the words used. What replaces it is the memory
edited from the user's sentence (the old and new words the model names) when that checks out (``memory.revise``),
else the fact's text. A replaced memory stays in the log and ``co memory undo`` brings it back. With
``memory_extract = review`` the changes become proposals; with ``auto`` they are applied at once (logged and
undoable); at most ``MAX_PROPOSALS`` per message.

When no typed answer can be had (the answer fails validation even when the model is asked for JSON in its
instructions, on the message's last attempt), word cues (``co_cli.cues``) may suggest sentences of the
message: proposals marked as suggestions, never applied in ``auto`` mode, never replacing a memory. The work
runs in a background task fed by a durable queue (``ExtractionQueue``): it never delays the next prompt and is
finished, or resumed by the next co, at exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field, PrivateAttr, ValidationError
from pydantic.json_schema import JsonDict

from co_cli.context import plans, standing
from co_cli.context.pins import asked, find_quote
from co_cli.cues import memory_suggestions
from co_cli.errors import CoError
from co_cli.memory import people, revise, supersede
from co_cli.memory.grounding import (
    from_a_secret,
    grounded,
    in_their_words,
    names,
    normalise,
    numbers,
    quoted,
    said,
    shares_a_word,
    wide,
)
from co_cli.memory.retrieval import near_duplicate, query_terms, words
from co_cli.models.structured_answer import ProseAnswer, ask
from co_cli.secrets import find_secret
from co_cli.store import (
    NO_SUBJECT,
    TOPIC_MAX_CHARS,
    ExtractionQueue,
    Memories,
    Memory,
    PartKind,
    QueuedTurn,
    Readings,
    ReadPart,
    Subject,
    parse_ref,
)

if TYPE_CHECKING:
    from pydantic_ai.models import Model


ExtractMode = Literal["off", "review", "auto"]
MAX_PROPOSALS = 3
NEIGHBOURS = 5
MAX_SHOWN = 10
MAX_TOPIC_KEYS = 40
MIN_WORDS = 3
MIN_CHARS = 8
"""A message of fewer than MIN_WORDS words (split at whitespace) and fewer than MIN_CHARS letters or digits
("thanks", "go on", "ok") is not sent; a sentence of a script without spaces has more characters than that."""
MOVED_WORD_CHARS = 4
"""A date moved under the same topic key shares a word this long with the memory it moves (``moved``)."""

INSTRUCTIONS = """You read ONE message the user wrote to an assistant and say what in it is worth remembering about
the user for later conversations. Answer 0 to 3 facts. Most messages hold none: a question, a request for a task
right now, a greeting or thanks states nothing to remember. Then answer an empty list of facts. A message that
tells several things gets one fact for each, its clauses apart.

For each fact, in this order:
- quote: the words of the message the fact comes from, copied exactly.
- form: how the quote is said. "statement" when it tells something; "question" when it asks; "request" when it
  asks the assistant to do something.
- kind: "rule_for_assistant" when the user tells the assistant how to answer or work from now on, in every
  later answer (a one-time request is not a rule); "passing_state" when it holds only now and will not hold
  next week (a mood, being tired, ill or busy, something broken, failing or slow right now, the weather,
  anything "today" or "right now"); "change" when a lasting fact was replaced by a new one (moved home,
  switched tools or teams, dropped or stopped something, a date postponed); "next_step" when it says what the
  user or their team will do next or later (a plan, the next task); otherwise "lasting_fact".
- subject: who or what the quote is about, copied from it: the words naming that person or thing ("Kofi",
  "my aunt", "うちの父", "the build"); "I" when the user speaks of themselves or tells the assistant a rule.
- about: whose fact it is, by that subject. "user" when the subject is the user (their life, work, projects,
  tools, likes, rules for the assistant). "another_person" when the subject is someone else (a colleague, a
  friend, a relative, named or not: "Tom", "my sister Ana", "mi madre"), with person: that person's name as
  written (or how the message calls them, "my aunt"). "nobody" when it is about no person.
- text: one standalone statement, true without the conversation, in the language and the words of the message.
  Never translate it, never rewrite "I" as "the user", keep names exactly as written (my-app stays my-app).
- topic: a short snake_case key in English for the attribute the fact states (home_city, editor, employer,
  commit_style). A memory shown below on the same attribute of the same person: use its key. A fact that adds
  to a memory instead of superseding it (a second language, another pet) gets a key of its own.
- replaces: the id (such as m12) of a memory shown below that this fact supersedes (the same attribute with a
  new value: another city, another editor, a new date), else null.
Never include passwords, keys or tokens. Never add what you know yourself: only what the message says.

Examples (memories shown: m4 | user | home_city | Ich wohne in Linz):
"Seit März wohne ich in Graz." -> {"facts": [{"quote": "Seit März wohne ich in Graz", "form": "statement", "kind":
"change", "subject": "I", "about": "user", "person": null, "text": "Seit März wohne ich in Graz", "topic":
"home_city", "replaces": "m4"}]}
"Our standup moved to 10:15." -> {"facts": [{"quote": "Our standup moved to 10:15", "form": "statement", "kind":
"change", "subject": "I", "about": "user", "person": null, "text": "Our standup is at 10:15", "topic":
"standup_time", "replaces": null}]}
"Dopo il rilascio sistemo i log del worker." -> {"facts": [{"quote": "Dopo il rilascio sistemo i log del worker",
"form": "statement", "kind": "next_step", "subject": "I", "about": "user", "person": null, "text": "Dopo il
rilascio sistemo i log del worker", "topic": "next_step", "replaces": null}]}
"My teammate Kofi reviews every migration" -> {"facts": [{"quote": "Kofi reviews every migration", "form":
"statement", "kind": "lasting_fact", "subject": "Kofi", "about": "another_person", "person": "Kofi", "text": "My
teammate Kofi reviews every migration", "topic": "reviews_migrations", "replaces": null}]}
"うちの父は大工です。" -> {"facts": [{"quote": "うちの父は大工です", "form": "statement", "kind": "lasting_fact",
"subject": "うちの父", "about": "another_person", "person": "父",
"text": "うちの父は大工です", "topic": "occupation", "replaces": null}]}
"Моя сестра Лена работает врачом в Новосибирске." -> {"facts": [{"quote":
"Моя сестра Лена работает врачом в Новосибирске", "form": "statement", "kind": "lasting_fact", "subject":
"Моя сестра Лена", "about": "another_person", "person": "Лена", "text":
"Моя сестра Лена работает врачом в Новосибирске", "topic": "occupation", "replaces": null}]}
"Jag heter Sven, bor i Umeå, och min bror Nils skriver Clojure." -> {"facts": [{"quote": "Jag heter Sven",
"form": "statement", "kind": "lasting_fact", "subject": "I", "about": "user", "person": null, "text":
"Jag heter Sven", "topic": "name", "replaces": null}, {"quote": "bor i Umeå", "form": "statement", "kind":
"lasting_fact", "subject": "I", "about": "user", "person": null, "text": "Jag bor i Umeå", "topic": "home_city",
"replaces": null}, {"quote": "min bror Nils skriver Clojure", "form": "statement", "kind": "lasting_fact",
"subject": "min bror Nils", "about": "another_person", "person": "Nils", "text": "Min bror Nils skriver Clojure",
"topic": "main_language", "replaces": null}]}
"Réponds-moi toujours en tutoyant." -> {"facts": [{"quote": "Réponds-moi toujours en tutoyant", "form": "request",
"kind": "rule_for_assistant", "subject": "I", "about": "user", "person": null, "text": "Réponds-moi toujours en
tutoyant", "topic": "form_of_address", "replaces": null}]}
"Estoy resfriado y no pienso con claridad." -> {"facts": [{"quote": "Estoy resfriado", "form": "statement", "kind":
"passing_state", "subject": "I", "about": "user", "person": null, "text": "Estoy resfriado", "topic": "health",
"replaces": null}]}
"Meine Tastatur spinnt gerade." -> {"facts": [{"quote": "Meine Tastatur spinnt gerade", "form": "statement",
"kind": "passing_state", "subject": "I", "about": "user", "person": null, "text": "Meine Tastatur
spinnt gerade", "topic": "keyboard", "replaces": null}]}
"¿Cómo formateo una fecha en Go?" -> {"facts": []}
"Leave the tests alone for this change." -> {"facts": []}
"Add the new flag to the changelog." -> {"facts": []}"""


MAX_TEXT_CHARS = 300
"""The longest statement or quote a reading's JSON schema allows: a bound for an engine that writes only what the
schema allows (it keeps a small model from repeating itself until the token cap), not checked on answers."""


def _bounded(chars: int) -> JsonDict:
    return {"maxLength": chars}


About = Literal["user", "another_person", "nobody"]
SELF = "i"
"""A fact's subject when it is about the user: "I", as the instructions ask, in any language of the message."""
FactKind = Literal["lasting_fact", "change", "rule_for_assistant", "next_step", "passing_state"]
Form = Literal["statement", "question", "request"]
LASTING: frozenset[FactKind] = frozenset({"lasting_fact", "change", "rule_for_assistant"})
"""The kinds worth keeping: a next step and a passing state hold for now only."""


class Fact(BaseModel):
    """One part of a message as the model reads it. The quote comes first and what it is follows (how it is said,
    its kind, whose it is): a small model pointing at the words before it classifies them takes a question for a
    fact, and "my colleague ..." for the user's own fact, less often."""

    quote: str = Field(
        description="the words of the message it comes from, copied exactly", json_schema_extra=_bounded(MAX_TEXT_CHARS)
    )
    form: Form = Field("statement", description="how the quote is said")
    kind: FactKind = Field(
        "lasting_fact", description="a rule for the assistant, a change, the next step, a passing state, a lasting fact"
    )
    subject: str = Field(
        "",
        description='who or what the quote is about, copied from it ("I" for the user)',
        json_schema_extra=_bounded(80),
    )
    about: About = Field(description="whose fact it is")
    person: str | None = Field(
        None,
        description='for about "another_person": the person\'s name as the message writes it',
        json_schema_extra=_bounded(80),
    )
    text: str = Field(
        description="one standalone statement, in the language and words of the user's message",
        json_schema_extra=_bounded(MAX_TEXT_CHARS),
    )
    topic: str = Field(
        description="a short snake_case key of the attribute (home_city, editor)", json_schema_extra=_bounded(60)
    )
    replaces: str | None = Field(
        None, description="the id (m12) of a memory shown that this fact supersedes", json_schema_extra=_bounded(12)
    )
    _fact_alone: bool = PrivateAttr(False)
    """Read as the next step and, asked alone, as a fact (``confirmed``): a change said with a time word ("… these
    days") is sometimes read so, so which memory it makes out of date is asked as for a stated change. (Asked
    alone, the 1.5B model answers "now" for requests and moods as well as for changes: shown memories for those,
    it named one, "Zeig mir ein Beispiel …" replacing the project.)"""

    @property
    def questioned(self) -> bool:
        """Whether its quote or text ends with a question mark (``?``, ``？``, ``؟``): a small model calls many
        questions statements, and many one-off questions rules."""
        return asked(self.quote) or asked(self.text)

    @property
    def asks(self) -> bool:
        """Whether it asks rather than tells: the model says so (a question, a request), or it is questioned."""
        return self.form != "statement" or self.questioned

    @property
    def is_rule(self) -> bool:
        """Whether it is a rule co keeps: the model says so, and it is not a question (a rule asked as a question
        is missed; a one-off question kept as a rule would be sent with every later request)."""
        return self.kind == "rule_for_assistant" and not self.questioned

    @property
    def is_change(self) -> bool:
        """Whether it says something changed: the model says so, and it is not a question."""
        return self.kind == "change" and not self.questioned

    @property
    def may_change(self) -> bool:
        """Whether the memory it makes out of date, if any, is asked about: a change, or a statement read as the
        next step that, alone, reads as a fact (``_fact_alone``)."""
        return self.is_change or (self._fact_alone and not self.asks)

    @property
    def is_next_step(self) -> bool:
        """Whether it is the next step: the model says so, and it is not a question."""
        return self.kind == "next_step" and not self.questioned

    @property
    def kept(self) -> bool:
        """Whether it is something to keep at all: about someone, lasting (a fact, a change or a rule), and, when
        it asks rather than tells, a rule that is not a question."""
        if self.about == "nobody" or self.kind not in LASTING:
            return False
        return self.is_rule or not self.asks


class Reading(BaseModel):
    facts: list[Fact] = Field(
        default_factory=list,
        description="0 to 3 facts; empty when there is nothing to keep",
        json_schema_extra={"maxItems": MAX_PROPOSALS},
    )


@dataclass(frozen=True)
class Change:
    """One change the extractor wants: add a memory, or replace the memory ``target``. A ``cue`` says word cues
    suggested it (no model answer could be read): then it is only ever proposed."""

    op: Literal["add", "update"]
    text: str
    target: int | None = None
    kind: str = "fact"
    subject: Subject = NO_SUBJECT
    cue: str | None = None
    quote: str = ""
    """The user's words it comes from (as the model quoted them, found in the message)."""
    stated_change: bool = False
    """The model read it as a change of something said before, or as a lasting fact that may move the date of the
    memory with its key (``moved``): if it replaces nothing yet, which memory it makes out of date is asked apart
    (``memory.supersede``)."""
    revised: bool = False
    """Its text is the replaced memory edited from the old and new words the model names (``memory.revise``), not
    the reading's own."""


def worth_extracting(prompt: str) -> bool:
    """Whether a message may hold something to keep: not empty, not a slash command, not one or two short words
    ("thanks", "go on"). Whatever else it is, the model reads it."""
    text = prompt.strip()
    if not text or text.startswith("/"):
        return False
    return len(text.split()) >= MIN_WORDS or sum(ch.isalnum() for ch in text) >= MIN_CHARS


def topic_key(raw: str) -> str | None:
    """A topic as a snake_case key ("Home City" -> "home_city"), or None when nothing is left."""
    key = re.sub(r"\W+", "_", unicodedata.normalize("NFKC", raw).casefold()).strip("_")
    return key[:TOPIC_MAX_CHARS] or None


def whom(memory: Memory) -> str:
    """Whom a memory is about, as the model is shown it: "user", "other: Dana", or "?" when not known."""
    if memory.about == "other":
        return f"other: {memory.person}" if memory.person else "other"
    return memory.about or "?"


def candidates(store: Memories, message: str, project: str) -> list[Memory]:
    """The memories the model is shown: the nearest active ones by the message's own words (FTS, each sharing a
    word as characters: ``grounding.shares_a_word``), then those sharing a topic key with them."""
    terms = query_terms(message)
    hits = store.search(terms, project=project, limit=NEIGHBOURS) if terms else []
    near = [c.memory for c in hits if shares_a_word(terms, c.memory.text)]
    seen = {m.id for m in near}
    same = [m for m in store.with_topics(sorted({m.topic for m in near if m.topic}), project) if m.id not in seen]
    return [*near, *same][:MAX_SHOWN]


def reading_prompt(message: str, shown: Sequence[Memory], topics: Sequence[str]) -> str:
    lines = ["The user's message:", "<message>", message, "</message>", ""]
    if shown:
        lines.append("Memories already kept that may be related (id | about | topic | text):")
        lines += [f"- {m.ref} | {whom(m)} | {m.topic or '-'} | {m.text}" for m in shown]
    else:
        lines.append("Memories already kept that may be related: none.")
    other = [t for t in topics if t not in {m.topic for m in shown}]
    if other:
        lines.append("Other topic keys in use: " + ", ".join(other))
    return "\n".join(lines)


def plan(reading: Reading, message: str, shown: Sequence[Memory], same_topic: Sequence[Memory]) -> list[Change]:
    """The verified changes of a reading of ``message``: each fact checked (``checked``), a restated fact and a
    second replacement of one memory left out, at most MAX_PROPOSALS. ``shown``: the memories the model was
    shown; ``same_topic``: the active memories with a topic key the facts name."""
    known = {m.id: m for m in shown}
    changes: list[Change] = []
    taken: set[int] = set()
    for fact in reading.facts:
        change = checked(fact, message, known, same_topic, taken)
        if change is None or any(near_duplicate(change.text, c.text) for c in changes):
            continue
        if change.target is not None:
            taken.add(change.target)
        changes.append(change)
    return changes[:MAX_PROPOSALS]


def checked(
    fact: Fact, message: str, known: dict[int, Memory], same_topic: Sequence[Memory], taken: set[int]
) -> Change | None:
    """The change ``fact`` makes, or None: about no one, a passing state, a quote not in the message, a secret,
    one short word ("Cheers", "Danke": ``says_something``), or nothing new. A statement naming what the
    message does not (a name or number of the model's own) is dropped, or kept in the user's own words when its
    quote holds one of its names or numbers: the quote is then what it says ("Mein Vorname ist Lotte" for "ich
    bin Lotte": every German noun is capitalised, so "Vorname" reads as a name the message lacks). A statement
    not in the user's words (``in_their_words``: a small model writes some of a German message's facts in
    English) is kept as its quote too."""
    if not fact.kept or not quoted(fact.quote, message):
        return None
    if find_secret(fact.text) is not None or from_a_secret(fact.quote, message):
        return None
    about = whose(fact, message)
    subject = Subject(topic_key(fact.topic), about, whom_named(fact, message) if about == "other" else None)
    text = statement(fact.text)
    target = replaced(fact, text, subject, known, same_topic, taken)
    source = message if target is None else f"{message}\n{target.text}"
    rooted = grounded(text, source)
    if not rooted and not shares_a_value(fact.quote, text):
        return None
    if not rooted or not in_their_words(text, source):
        text = statement(fact.quote)
        target = replaced(fact, text, subject, known, same_topic, taken)
    if not says_something(text):
        return None
    if target is not None and near_duplicate(text, target.text):
        return None  # the memory already says it
    if target is None and any(near_duplicate(text, m.text) for m in [*known.values(), *same_topic]):
        return None
    kind = "instruction" if fact.is_rule else "fact"
    keyed_memory = keyed(subject, known, same_topic, taken) if target is None and fact.kind == "lasting_fact" else None
    moves = keyed_memory is not None and moved(text, keyed_memory.text)  # asked apart (``superseding``)
    return Change(
        "add" if target is None else "update", text, None if target is None else target.id, kind, subject,
        quote=fact.quote, stated_change=fact.may_change or moves,
    )  # fmt: skip


def says_something(text: str) -> bool:
    """Whether a statement can say something: two words or more, or one of MIN_CHARS letters or digits or more,
    a wide (CJK) character counting two ("私は学生" is a statement, "Cheers" is not)."""
    if len(text.split()) >= 2:
        return True
    width = sum(2 if wide(ch) else 1 for ch in text if ch.isalnum())
    return width >= MIN_CHARS


def shares_a_value(quote: str, text: str) -> bool:
    """Whether ``quote`` holds one of the numbers of ``text``, or one of its names as written (a rewording of a
    request that capitalises the message's "axum" and adds what it knows of it holds no name of the user's)."""
    return bool(set(numbers(quote)) & set(numbers(text))) or any(name in quote for name in names(text))


def statement(text: str) -> str:
    """``text`` on one line, without the comma or colon a quote cut from a longer sentence ends with."""
    return " ".join(text.split()).rstrip(",;:、，；：")


def whose(fact: Fact, message: str) -> str:
    """Whom ``fact`` is about, as memories store it: "user", "other" or "none". A fact the model says is the user's
    is another person's when its subject (or person) names someone the message names: a small model says "user"
    for most facts about a relative or a colleague, yet copies who they are about."""
    if fact.about == "nobody":
        return "none"
    return "other" if fact.about == "another_person" or whom_named(fact, message) is not None else "user"


def whom_named(fact: Fact, message: str) -> str | None:
    """The other person a fact is about, as the message names them: the model's ``person``, else its subject."""
    for name in (fact.person or "", fact.subject):
        name = " ".join(name.split())
        if name and name.casefold() != SELF and said(name, message):
            return name
    return None


def replaced(
    fact: Fact, text: str, subject: Subject, known: dict[int, Memory], same_topic: Sequence[Memory], taken: set[int]
) -> Memory | None:
    """The memory ``fact`` (stated as ``text``) replaces: the shown one it names when that one is about the same
    person (or about no known person, as a memory the user saved) and ``text`` can be its new value
    (``new_value_for``: a small model names memories of any topic, "VS Code is my editor" named the memory of the
    user's language), else, for a fact read as a change, the one active memory of the same subject and topic key
    (``keyed``) that ``text`` can be the new value of (a small model copies the topic keys it is shown onto
    unrelated facts, so a key alone replaces nothing). A stated change that replaces neither is asked about apart
    (``superseding``)."""
    named = _shown(fact.replaces, known)
    if (
        named is not None
        and named.id not in taken
        and (named.about is None or same_subject(named, subject))
        and new_value_for(text, named.text, same_topic=named.topic is None or named.topic == subject.topic)
    ):
        return named
    if not fact.is_change:
        return None
    same = keyed(subject, known, same_topic, taken)
    return same if same is not None and new_value_for(text, same.text, same_topic=True) else None


def keyed(subject: Subject, known: dict[int, Memory], same_topic: Sequence[Memory], taken: set[int]) -> Memory | None:
    """The one active memory of ``subject``'s person and topic key, when the model was shown it; None when there
    is none, or several (which one is not known), or the model did not see it (a key copied from the list of keys
    in use)."""
    if subject.topic is None:
        return None
    same = [m for m in same_topic if m.id not in taken and m.topic == subject.topic and same_subject(m, subject)]
    return same[0] if len(same) == 1 and same[0].id in known else None


def moved(text: str, old: str) -> bool:
    """Whether ``text`` may move a date, time or version the memory ``old`` gives: each holds a number the other
    lacks, and they share a word of MOVED_WORD_CHARS characters or more (as characters: ``grounding.said``), as
    "Der Umzug ist jetzt am 2. Juni" does "Der Umzug nach Bremen ist am 12. Mai" (and "Für den Umzug brauche
    ich 3 Kisten" too: whether it does is the model's to say, asked apart)."""
    new, before = set(numbers(text)), set(numbers(old))
    shared = any(said(word, old) for word in words(text) if len(word) >= MOVED_WORD_CHARS)
    return bool(new - before) and bool(before - new) and shared


def new_value_for(text: str, old: str, *, same_topic: bool) -> bool:
    """Whether ``text`` can be the new value of what the memory ``old`` says, judged by their names and numbers
    (``grounding``, read as characters in any language; a capitalised word that starts a sentence counts as a
    name), as a check of the memory a model says a fact replaces:

    - it brings a value, or keeps all of the old memory's: a text whose names and numbers are all the old one's,
      while the old one has one it lacks, only takes away (a small model names a project's memory, "Kite is a
      build tool in Go", as replaced by "Kite slipped" or by a mood about Kite);
    - under another topic key, it replaces only a memory it shares a name with, each holding a number the other
      lacks: a date, a time or a version moved ("Kite's new date is March 3" for "Kite ships on Feb 9").
    """
    new, before = set(numbers(text)), set(numbers(old))
    brings = bool(new - before) or any(not said(name, old) for name in names(text, starts=True))
    if not brings and (before - new or any(not said(name, text) for name in names(old, starts=True))):
        return False
    if same_topic:
        return True
    shared = any(said(name, old) for name in names(text, starts=True))
    return shared and bool(new - before) and bool(before - new)


def same_subject(memory: Memory, subject: Subject) -> bool:
    """Whether ``memory`` is about whom ``subject`` is: the user, or the same named person."""
    if memory.about != subject.about:
        return False
    if subject.about == "user":
        return True
    return bool(subject.person and memory.person and normalise(subject.person) == normalise(memory.person))


def handed_over(memory: Memory, subject: Subject, message: str) -> bool:
    """Whether a change about the user or another person may take the place of ``memory``, a named person's: a
    role handed on ("Marek went on leave, so Ines reviews now", "… so I review now"), when the message names that
    person. Another person's change never replaces the user's own memory."""
    return memory.about == "other" and subject.about in ("user", "other") and said(memory.person or "", message)


def _shown(ref: str | None, known: dict[int, Memory]) -> Memory | None:
    if not ref:
        return None
    try:
        return known.get(parse_ref(ref))
    except CoError:
        return None


def suggestions(message: str) -> list[Change]:
    """What word cues suggest keeping from ``message`` when no model answer could be read: sentences verbatim,
    each marked with its cue (proposed only, never replacing a memory)."""
    found = [s for s in memory_suggestions(message) if find_secret(s.text) is None]
    return [Change("add", s.text, kind="instruction" if s.rule else "fact", cue=s.cue) for s in found][:MAX_PROPOSALS]


async def read_message(
    model: Model, store: Memories, message: str, project: str, *, prompted: bool = False
) -> tuple[Reading, list[Memory]]:
    """The model's reading of ``message`` (one request, then ``confirmed``) and the memories it was shown."""
    shown = candidates(store, message, project)
    prompt = reading_prompt(message, shown, store.topics(project, MAX_TOPIC_KEYS))
    reading = await ask(model, Reading, INSTRUCTIONS, prompt, prompted=prompted)
    return await confirmed(model, reading, message, prompted=prompted), shown


async def confirmed(model: Model, reading: Reading, message: str, *, prompted: bool = False) -> Reading:
    """``reading`` with each part whose kind acts asked about once more, alone: a part read as a rule is asked
    whether it is one (``context.standing``: read alone as a task for now it is a request, as a fact a lasting
    fact), a part read as the next step whether it is one for later (``context.plans``, asked of its sentence:
    read alone as a request for now it is one, as a fact a lasting fact), and a fact that would be kept as someone
    else's whether that one is a person (``memory.people``: a place, a thing or a project makes it the
    user's)."""
    facts = []
    for fact in reading.facts:
        if fact.is_rule:
            alone = await standing.sort_rule(model, fact.quote, message, prompted=prompted)
            if alone != "rule":
                fact = fact.model_copy(update={"form": "request" if alone == "task" else "statement",
                                               "kind": "lasting_fact"})  # fmt: skip
        elif fact.is_next_step:
            step = await plans.sort_step(model, find_quote(fact.quote, [message]) or fact.quote, prompted=prompted)
            if step != "later":  # as the reading said it, a statement or a request (read alone as a fact: a statement)
                fact = fact.model_copy(update={"form": "statement" if step == "fact" else fact.form,
                                               "kind": "lasting_fact"})  # fmt: skip
                fact._fact_alone = step == "fact"
        name = whom_named(fact, message) or (fact.person or fact.subject).strip()
        if (
            fact.kept
            and whose(fact, message) == "other"
            and name
            and not await people.is_person(model, name, fact.quote, message, prompted=prompted)
        ):
            fact = fact.model_copy(update={"about": "user", "subject": "I", "person": None})
        facts.append(fact)
    return Reading(facts=facts)


def said_parts(reading: Reading, message: str) -> list[ReadPart]:
    """What compaction acts on of a reading of ``message``: its rules, changes and next steps, each as the user's
    sentence that holds its quote (a quote not in the message, or from a secret's sentence, is left out; a
    question is none of them)."""
    parts: dict[str, ReadPart] = {}
    for fact in reading.facts:
        kind: PartKind | None = (
            "rule" if fact.is_rule else "change" if fact.is_change else "next_step" if fact.is_next_step else None
        )
        sentence = find_quote(fact.quote, [message]) if kind is not None else None
        if kind is None or sentence is None or from_a_secret(fact.quote, message) or find_secret(sentence):
            continue
        parts.setdefault(f"{kind}:{normalise(sentence)}", ReadPart(kind, sentence))
    return list(parts.values())


@dataclass(frozen=True)
class Extracted:
    """What one message gave: the memory changes, and the parts compaction acts on (``said_parts``)."""

    changes: list[Change]
    parts: list[ReadPart]


async def extract_changes(
    model: Model, store: Memories, message: str, project: str, *, prompted: bool = False
) -> Extracted:
    """The changes for one message, in one reading (and its short questions), and what compaction acts on; raises
    whatever the model raises
    (``ProseAnswer`` when it answered in prose: ask again with ``prompted``)."""
    reading, shown = await read_message(model, store, message, project, prompted=prompted)
    topics = sorted({key for fact in reading.facts if (key := topic_key(fact.topic))})
    changes = plan(reading, message, shown, store.with_topics(topics, project))
    changes = await superseding(model, store, changes, message, project, prompted=prompted)
    changes = await revising(model, store, changes, message, prompted=prompted)
    return Extracted(changes, said_parts(reading, message))


async def superseding(
    model: Model, store: Memories, changes: Sequence[Change], message: str, project: str, *, prompted: bool = False
) -> list[Change]:
    """``changes`` with each stated change that replaces nothing yet made the replacement of the memory it makes
    out of date, asked apart (``memory.supersede``: one request per such change); a failed question leaves it an
    addition."""
    taken = [c.target for c in changes if c.target is not None]
    out: list[Change] = []
    for change in changes:
        if change.op == "add" and change.stated_change:
            near = supersede.candidates(store, f"{change.quote} {change.text}", change.subject.topic, project, taken)
            shown = [m for m in near if same_subject(m, change.subject) or handed_over(m, change.subject, message)]
            try:
                target = await supersede.superseded(model, change.quote or change.text, shown, prompted=prompted)
            except Exception:  # the fact is kept as it is: a change not linked is better than one lost
                target = None
            if (
                target is not None
                and grounded(change.text, f"{message}\n{target.text}")
                and (
                    new_value_for(change.text, target.text, same_topic=True) or not same_subject(target, change.subject)
                )
            ):  # a role handed on: whom it is about is the new value ("… so I review now")
                if near_duplicate(change.text, target.text):
                    continue  # the memory already says it
                change = replace(change, op="update", target=target.id)
                taken.append(target.id)
            elif target is not None and (
                text := await _revised(model, target.text, change, changes, message, prompted)
            ):
                change = replace(change, op="update", target=target.id, text=text, revised=True)
                taken.append(target.id)
        out.append(change)
    return out


async def revising(
    model: Model, store: Memories, changes: Sequence[Change], message: str, *, prompted: bool = False
) -> list[Change]:
    """``changes`` with each replacement that may lose words of the memory (``revise.loses``: a memory that holds
    a project and its date, replaced by the new date) made the memory edited as the model answers, when the edit
    checks out (``revise.revised``: one request per such change)."""
    out: list[Change] = []
    for change in changes:
        if change.op == "update" and change.target is not None and not change.revised:
            with contextlib.suppress(CoError):
                old = store.get(change.target).text
                if revise.loses(change.text, old) and (
                    text := await _revised(model, old, change, changes, message, prompted)
                ):
                    change = replace(change, text=text, revised=True)
        out.append(change)
    return out


async def _revised(
    model: Model, old: str, change: Change, changes: Sequence[Change], message: str, prompted: bool
) -> str | None:
    """The memory ``old`` edited by ``change`` of ``message`` (``revise.revised``), the message's other additions
    kept apart: their words are their own facts' values."""
    apart = [c.quote for c in changes if c is not change and c.op == "add" and c.quote]
    sentence = _sentence(change, message)
    return await revise.revised(model, old, sentence, quote=change.quote, kept_apart=apart, prompted=prompted)


def _sentence(change: Change, message: str) -> str:
    """The user's sentence a change comes from (the whole message when its quote is not found)."""
    return find_quote(change.quote, [message]) or message


def apply(store: Memories, changes: Sequence[Change], item: QueuedTurn, mode: ExtractMode) -> int:
    """Store the changes as proposals (review, and every suggestion) or apply them (auto); returns how many
    were stored."""
    stored = 0
    session, seq = item.session_id, item.seq
    for change in changes:
        try:
            if mode == "review" or change.cue is not None:
                store.review.propose(
                    change.text, proposal=change.op, kind=change.kind, target=change.target, project=item.project,
                    subject=change.subject, cue=change.cue, source_session=session, source_seq=seq,
                )  # fmt: skip
            elif change.target is None:
                store.add(
                    change.text, actor="extractor", kind=change.kind, project=item.project, subject=change.subject,
                    source_session=session, source_seq=seq,
                )  # fmt: skip
            else:
                store.replace(
                    change.target, change.text, actor="extractor", kind=change.kind, subject=change.subject,
                    source_session=session, source_seq=seq,
                )  # fmt: skip
            stored += 1
        except CoError:
            continue  # e.g. the target was forgotten meanwhile
    return stored


def unreadable(exc: BaseException) -> bool:
    """Whether ``exc`` says the model answered but not as the typed object (prose, or JSON that fails
    validation), as opposed to a failed request."""
    from pydantic_ai.exceptions import UnexpectedModelBehavior

    return isinstance(exc, ProseAnswer | UnexpectedModelBehavior | ValidationError)


class ExtractionWorker:
    """Runs extraction in a background task of the running event loop, one queued turn at a time."""

    def __init__(
        self,
        store: Memories,
        queue: ExtractionQueue,
        model: Callable[[], Model],
        mode: ExtractMode,
        project: str,
        on_change: Callable[[], None] | None = None,
        readings: Readings | None = None,
    ) -> None:
        self.store = store
        self.readings = readings
        """Where what each message said for compaction is kept (by session and seq); None keeps nothing."""
        self.queue = queue
        self.model = model
        self.mode = mode
        self.project = project
        self.on_change = on_change
        self.last_error: str | None = None
        self.stored = 0
        self.prompted = False
        """Set once the model answered in prose: its server ignores forced tool calls, so ask for JSON text."""
        self._task: asyncio.Task[None] | None = None

    def submit(self, prompt: str, session_id: str, seq: int) -> None:
        """Queue a finished turn (durably, at once) and make sure the background task runs."""
        if self.mode == "off" or not worth_extracting(prompt):
            return
        self.queue.put(session_id, seq, prompt, self.project)
        self.start()

    def start(self) -> None:
        """Work through the queue (including what an earlier co left) in the background."""
        if self.mode == "off" or (self._task is not None and not self._task.done()):
            return
        self._task = asyncio.get_running_loop().create_task(self._run())

    @property
    def busy(self) -> bool:
        return self._task is not None and not self._task.done()

    async def _run(self) -> None:
        while (item := self.queue.claim()) is not None:
            try:
                extracted = await self._changes(item)
            except asyncio.CancelledError:
                self.queue.release(item)
                raise
            except Exception as exc:  # a failing or invalid model answer changes nothing
                self.last_error = _describe(exc)
                if unreadable(exc) and item.attempts >= self.queue.MAX_ATTEMPTS:
                    self._suggest(item)  # no typed answer at all: word cues may suggest, never act
                self.queue.failed(item)
                continue
            changes = extracted.changes
            self.stored += apply(self.store, changes, item, self.mode)
            if self.readings is not None:
                self.readings.save(item.session_id, item.seq, item.text, extracted.parts)
            self.queue.done(item)
            self.last_error = None
            if changes and self.on_change is not None:
                self.on_change()

    def _suggest(self, item: QueuedTurn) -> None:
        suggested = suggestions(item.text)
        self.stored += apply(self.store, suggested, item, self.mode)
        if suggested and self.on_change is not None:
            self.on_change()

    async def _changes(self, item: QueuedTurn) -> Extracted:
        """The item's changes and parts. An answer that is not the typed object is asked again at once as prompted
        JSON; a prose answer also switches the worker to prompted JSON for good (its server ignores forced tools)."""
        try:
            return await extract_changes(self.model(), self.store, item.text, item.project, prompted=self.prompted)
        except Exception as exc:
            if self.prompted or not unreadable(exc):
                raise
            if isinstance(exc, ProseAnswer) and not exc.constrained:  # a schema-held answer cut short says nothing
                self.prompted = True
            return await extract_changes(self.model(), self.store, item.text, item.project, prompted=True)

    async def drain(self, notice: Callable[[str], None] | None = None, after: float = 0.5) -> None:
        """Finish the queued work (at exit); ``notice`` is told if that takes longer than ``after`` seconds.
        Interrupted, the rest stays queued for the next co."""
        if self._task is None or self._task.done():
            return
        done, _ = await asyncio.wait({self._task}, timeout=after)
        if not done:
            if notice is not None:
                notice("Finishing memory extraction of the last turn (Ctrl-C leaves it for the next start)…")
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def stop(self) -> None:
        """Cancel the background task; what it was doing stays queued."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task


def _describe(exc: Exception) -> str:
    try:
        from co_cli.failure_text import describe_provider_error

        # The advice to /retry is for a failed turn; a failed extraction is retried on its own.
        return describe_provider_error(exc).split("; /retry")[0]
    except Exception:
        return f"{type(exc).__name__}: {exc}"
