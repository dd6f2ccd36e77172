"""Automatic extraction: facts from the user's own words, reconciled with what is already remembered.

After a turn is answered, the summarisation model (1) extracts 0-3 atomic facts from the user's message
(never from the assistant's answer), then (2) compares them with the nearest existing memories (FTS
neighbours) in one structured-output call that returns a decision per memory: ADD, UPDATE (same topic,
refined), DELETE (contradicted) or NONE. With ``memory_extract = review`` the decisions become proposals;
with ``auto`` they are applied at once (logged and undoable).

Small models write junk: at most ``MAX_PROPOSALS`` changes per turn; a first-person fact ("Bob reviews my
pull requests") is rewritten in the third person; a fact that is not a standalone statement (a question, a
fragment, a pronoun with nothing to refer to) or only a passing state (a mood, "today") is dropped. The
decisions are checked: a new fact the model leaves out (or calls NONE) with no near-duplicate is an ADD; an
UPDATE that glues an unrelated statement onto a memory is refused; a DELETE stands only beside a kept fact
on the same topic (the one replacing it). An invalid or failing answer changes nothing. The work runs in a
background task fed by a durable queue (``ExtractionQueue``): it never delays the next prompt and is finished,
or resumed by the next co, at exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from co_cli.context.pins import is_standing, sentences
from co_cli.errors import CoError
from co_cli.memory.expansion import TOPICS, expand
from co_cli.memory.grounding import from_a_secret, grounded, misattributed, only_asks, says_change
from co_cli.memory.retrieval import GENERIC_WORDS, STOPWORDS, near_duplicate, shares_topic, topic_terms, words
from co_cli.memory.structured_answer import ProseAnswer, ask
from co_cli.secrets import find_secret
from co_cli.store.memories import Memories, Memory, parse_ref
from co_cli.store.queue import ExtractionQueue, QueuedTurn

if TYPE_CHECKING:
    from pydantic_ai.models import Model


ExtractMode = Literal["off", "review", "auto"]
MAX_FACTS = 3
MAX_PROPOSALS = 3
NEIGHBOURS = 5
MIN_PROMPT_WORDS = 4
MIN_FACT_WORDS = 3
MAX_FACT_WORDS = 40

FACTS_PROMPT = """You extract durable facts about the user from ONE message the user wrote.
Return 0 to 3 short, atomic, standalone statements in the third person ("The user ..."), each true on its own
without the conversation: preferences, facts about the user, their projects, tools and standing rules.
Ignore questions, requests for one-off tasks, greetings, and anything temporary. Never include passwords,
keys or tokens, and never moods or passing states ("is tired today"). Never add what you know yourself: only
what the message says. One statement per topic: never join two topics in one statement. A colleague's habit is
the colleague's, not the user's. Most messages contain no durable fact: then return an empty list.
Examples:
"I'm exhausted today, the tests failed again" -> []
"My colleague Dana swears by Rust" -> ["The user's colleague Dana swears by Rust"]
"Our launch moved to June 9" -> ["The user's launch date is June 9"]
"I'm Anne, I live in Oslo and I use nano" -> ["The user's name is Anne", "The user lives in Oslo",
"The user uses nano"]"""

RECONCILE_PROMPT = """You keep a user's long-term memory consistent. You get EXISTING memories (with ids) and
NEW facts. Return one decision per existing memory and per new fact:
- ADD: a new fact not covered by any existing memory (give its text; no id).
- UPDATE: a new fact that replaces or refines an existing memory on the SAME topic (give the existing id and
  the new text). Never join two different topics in one text.
- DELETE: an existing memory that a new fact contradicts and that no UPDATE replaces (give its id).
- NONE: an existing memory that stays as it is, or a new fact that is a duplicate (give the id if existing).
Each text is one standalone statement.
Example: EXISTING memories: m1: The user works at Acme; m2: The user's cat is named Tom. NEW facts: The user now
works at Globex; The user's team has five people. Decisions: UPDATE m1 "The user works at Globex", NONE m2,
ADD "The user's team has five people"."""


class Facts(BaseModel):
    facts: list[str] = Field(default_factory=list, description="0 to 3 standalone statements about the user")


class Decision(BaseModel):
    event: Literal["ADD", "UPDATE", "DELETE", "NONE"]
    id: str | None = Field(None, description="the existing memory's id (m12) for UPDATE, DELETE, NONE")
    text: str = Field("", description="the statement for ADD or UPDATE")


class Decisions(BaseModel):
    memory: list[Decision] = Field(default_factory=list)


@dataclass(frozen=True)
class Change:
    """One change the extractor wants: add a memory, or update or delete the memory ``target``."""

    op: Literal["add", "update", "delete"]
    text: str
    target: int | None = None


_FIRST_PERSON = frozenset({"i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "we", "our", "you", "your"})
_DANGLING = frozenset({"it", "this", "that", "these", "those", "they", "he", "she", "him", "her", "them", "here"})
_NON_FACTS = ("no fact", "none", "n/a", "nothing", "the assistant", "as an ai", "the message", "user message")


_TEMPORARY = re.compile(
    r"\b(?:today|tonight|right now|at the moment|this (?:morning|afternoon|evening)|in an? \w+ mood|mood (?:is|was)"
    r"|(?:negative|positive|bad|good|terrible|great|low|foul|grumpy|awful) mood|experienc(?:es|ing|ed) (?:a|an|some)\b"
    r"|(?:feel|feels|feeling|felt)\b|is (?:tired|sleepy|exhausted|stressed|hungry|sick|bored|angry|upset|sad|happy"
    r"|busy|annoyed|frustrated|excited|nervous|anxious|grumpy|in a hurry)\b)",
    re.IGNORECASE,
)
_ADVERB = r"(?:always|usually|often|never|also|now|still|mostly|only|really)"
_I_VERB = re.compile(rf"\b(I|we)\s+(?:({_ADVERB})\s+)?([A-Za-z]+)\b", re.IGNORECASE)
_PRONOUNS = (
    (re.compile(r"\bI(?:'m|’m|\s+am)\b", re.IGNORECASE), "the user is"),
    (re.compile(r"\bI(?:'ve|’ve)\b", re.IGNORECASE), "the user has"),
    (re.compile(r"\bI(?:'d|’d)\b", re.IGNORECASE), "the user would"),
    (re.compile(r"\bI(?:'ll|’ll)\b", re.IGNORECASE), "the user will"),
    (re.compile(r"\bwe(?:'re|’re|\s+are)\b", re.IGNORECASE), "the user's team is"),
    (re.compile(r"\b(?:my|mine)\b", re.IGNORECASE), "the user's"),
    (re.compile(r"\b(?:our|ours)\b", re.IGNORECASE), "the user's"),
    (re.compile(r"\b(?:me|myself)\b", re.IGNORECASE), "the user"),
)
_NOT_CONJUGATED = frozenset(
    {"was", "will", "would", "can", "could", "should", "must", "might", "may", "did", "had", "shall", "need"}
)


_ONE_OFF = re.compile(
    r"^the user (?:wants|needs|would like|is asking|asks|asked|requested|is looking) (?:to|a|an|help|some|for)\b"
    r"|^the user wants \S+(?: \S+)? (?:translated|explained|written|fixed|shown)(?: (?:into|for|to) \S+)?$"
    r"|^the user (?:thanks|thanked|greets|greeted|says (?:hi|hello|thanks))\b",
    re.IGNORECASE,
)


def is_temporary(text: str) -> bool:
    """Whether ``text`` is about a passing state (a mood, "right now", "today") or a one-off request ("The user
    wants to profile a Go program"): nothing to remember."""
    return _TEMPORARY.search(text) is not None or _ONE_OFF.search(text.strip()) is not None


def _third_person_verb(verb: str) -> str:
    lower = verb.lower()
    if lower in _NOT_CONJUGATED or lower.endswith(("ed", "s")) or not lower.isalpha():
        return verb
    irregular = {"am": "is", "have": "has", "do": "does", "go": "goes"}
    if lower in irregular:
        return irregular[lower]
    if lower.endswith(("sh", "ch", "x", "z", "o")):
        return verb + "es"
    if lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def third_person(text: str) -> str:
    """A first-person statement about the user in the third person ("Bob reviews my pull requests" -> "Bob
    reviews the user's pull requests", "I always use tabs" -> "The user always uses tabs", "We deploy on
    Fridays" -> "The user's team deploys on Fridays")."""
    line = text.strip()
    for pattern, replacement in _PRONOUNS:
        line = pattern.sub(replacement, line)

    def subject(match: re.Match[str]) -> str:
        who, adverb, verb = match.group(1), match.group(2), match.group(3)
        person = "the user" if who.lower() == "i" else "the user's team"
        return f"{person} " + (f"{adverb} " if adverb else "") + _third_person_verb(verb)

    line = _I_VERB.sub(subject, line)
    line = re.sub(r"\bI\b", "the user", line)
    return line[:1].upper() + line[1:]


def is_standalone(text: str) -> bool:
    """Whether ``text`` reads as one durable statement on its own (the filter against small models' junk)."""
    line = text.strip()
    found = words(line)
    if not MIN_FACT_WORDS <= len(found) <= MAX_FACT_WORDS or "\n" in line or "```" in line:
        return False
    if line.endswith("?") or not any(c.isalpha() for c in line):
        return False
    lower = line.lower()
    if any(lower.startswith(p) or lower == p for p in _NON_FACTS):
        return False
    if found[0] in _DANGLING or found[-1] in _DANGLING or _FIRST_PERSON & set(found) or is_temporary(line):
        return False
    return find_secret(line) is None


def worth_extracting(prompt: str) -> bool:
    """A message of a few words ("thanks", "go on") or one that only asks ("How do I profile a Go program?")
    holds no fact worth a model call."""
    return len(words(prompt)) >= MIN_PROMPT_WORDS and not prompt.lstrip().startswith("/") and not only_asks(prompt)


def plan(
    facts: Sequence[str],
    neighbours: Sequence[Memory],
    decisions: Sequence[Decision] | None,
    message: str | None = None,
) -> list[Change]:
    """The validated changes: decisions about unknown ids, junk texts, duplicates, secrets, UPDATEs that join
    unrelated statements and DELETEs with no kept fact on their topic are dropped; a fact no decision covers and
    no neighbour duplicates is added; at most MAX_PROPOSALS. Without neighbours (``decisions`` None) every fact
    is an ADD. Given the user's ``message``, a text must be grounded in it (``grounding.grounded``), and when the
    message says something changed, a new fact replaces the memory on its topic that no decision changed."""
    known = {m.id: m for m in neighbours}
    raw: list[Change] = []
    for decision in decisions or ():
        target = _target(decision.id, known)
        if decision.event == "ADD":
            raw.append(Change("add", decision.text))
        elif decision.event == "UPDATE" and target is not None:
            raw.append(Change("update", decision.text, target))
        elif decision.event == "DELETE" and target is not None:
            raw.append(Change("delete", known[target].text, target))
    decided = len(raw)
    raw += [Change("add", f) for f in facts]  # kept below only if nothing covers the fact
    changes: list[Change] = []
    touched: set[int] = set()
    for index, change in enumerate(raw):
        text = third_person(" ".join(change.text.split())) if change.op != "delete" else change.text
        if index >= decided and any(c.op == "update" and _restates(c.text, text) for c in changes):
            continue  # the model's update says this fact in other words
        if change.op != "delete":
            if not is_standalone(text):
                continue
            if message is not None:
                source = message if change.target is None else f"{message}\n{known[change.target].text}"
                if not grounded(text, source) or misattributed(text, message):
                    continue
            if change.op == "add" and any(near_duplicate(text, m.text) for m in neighbours):
                continue  # already remembered
            if change.op == "update" and change.target is not None:
                old = known[change.target].text
                if near_duplicate(text, old) or joins_unrelated(text, old):
                    continue  # no real change, or two topics glued together
            if any(_covers(c.text, text) for c in changes if c.op != "delete"):
                continue
        if change.target is not None:
            if change.target in touched:
                continue
            touched.add(change.target)
        changes.append(Change(change.op, text, change.target))
    if message is not None and says_change(message):
        changes = as_replacements(changes, [m for m in neighbours if m.id not in touched])
    kept = [c for c in changes if c.op != "delete"]
    changes = [c for c in changes if c.op != "delete" or any(shares_topic(c.text, k.text) for k in kept)]
    return changes[:MAX_PROPOSALS]


_TOPIC_MEMBERS = frozenset(word for members in TOPICS.values() for word in members) | frozenset(TOPICS)


def _attributes(text: str) -> set[str]:
    """The topic words of ``text`` that say which attribute it is about, not whose: a name the text capitalises
    ("Kestrel", "Alice") is left out unless it is a value of a known topic ("Vim" is an editor)."""
    names = {w.lower() for w in re.findall(r"\b[A-Z]\w+", text)} - _TOPIC_MEMBERS
    return set(topic_terms(text)) - names


def _overlap(own: set[str], related: set[str], text: str) -> int:
    theirs = _attributes(text)
    return 2 * len(own & theirs) + len(related & theirs)


def as_replacements(changes: list[Change], free: Sequence[Memory]) -> list[Change]:
    """The user said something changed: each new fact replaces the untouched memory that shares the most
    attribute words with it (a word of the fact counts twice, a word of its topic once: "moved" meets "lives"),
    when one memory shares more than any other. The fact most like a memory takes it first."""
    scored: list[tuple[int, int, int]] = []  # (overlap, index of the change, memory id)
    for index, change in enumerate(changes):
        if change.op != "add":
            continue
        own = _attributes(change.text)
        related = set(expand(sorted(own))) - own
        overlaps = sorted(((_overlap(own, related, m.text), m.id) for m in free), reverse=True)
        if overlaps and overlaps[0][0] > 0 and (len(overlaps) == 1 or overlaps[1][0] < overlaps[0][0]):
            scored.append((overlaps[0][0], index, overlaps[0][1]))
    replaced: dict[int, int] = {}
    for _, index, memory_id in sorted(scored, reverse=True):
        if memory_id not in replaced.values() and index not in replaced:
            replaced[index] = memory_id
    return [Change("update", c.text, replaced[i]) if i in replaced else c for i, c in enumerate(changes)]


_CLAUSE = re.compile(r"\s*(?:;|,?\s+(?:and|but|while|whereas)\s+|\.\s+)\s*", re.IGNORECASE)


def joins_unrelated(text: str, old: str) -> bool:
    """Whether ``text`` glues onto ``old`` a statement on another topic ("The user's name is Sam and the user
    is worried about the release"): a clause of two or more topic words, most of them not in ``old``."""
    old_topic = set(topic_terms(old))
    clauses = [c for c in _CLAUSE.split(text) if c]
    if len(clauses) < 2:
        return False
    return any(len(t := set(topic_terms(c))) >= 2 and len(t & old_topic) * 2 < len(t) for c in clauses)


def _restates(update: str, fact: str) -> bool:
    """Whether an update's text says ``fact`` in other words: half of the fact's topic words or more are in it
    ("The user lives in Lyon" for "The user moved to Lyon")."""
    topic = set(topic_terms(fact))
    return bool(topic) and len(topic & set(topic_terms(update))) * 2 >= len(topic)


def _covers(stated: str, fact: str) -> bool:
    """Whether ``stated`` already says ``fact``: every content word of the fact is in it."""
    content = set(words(fact)) - STOPWORDS - GENERIC_WORDS
    return content <= set(words(stated)) if content else near_duplicate(stated, fact)


def _target(ref: str | None, known: dict[int, Memory]) -> int | None:
    if not ref:
        return None
    try:
        memory_id = parse_ref(ref)
    except CoError:
        return None
    return memory_id if memory_id in known else None


async def extract_facts(model: Model, message: str, *, prompted: bool = False) -> list[str]:
    prompt = f"The user's message:\n<message>\n{message}\n</message>"
    answer = await ask(model, Facts, FACTS_PROMPT, prompt, prompted=prompted)
    return [f for f in answer.facts if f.strip()][:MAX_FACTS]


async def reconcile(
    model: Model, facts: Sequence[str], neighbours: Sequence[Memory], *, prompted: bool = False
) -> list[Decision]:
    existing = "\n".join(f"- {m.ref}: {m.text}" for m in neighbours)
    new = "\n".join(f"- {f}" for f in facts)
    prompt = f"EXISTING memories:\n{existing}\n\nNEW facts:\n{new}"
    return (await ask(model, Decisions, RECONCILE_PROMPT, prompt, prompted=prompted)).memory


def nearest(store: Memories, facts: Sequence[str], project: str) -> list[Memory]:
    """The existing active memories closest to the facts (FTS neighbours on their topic words and the words of
    the same topic: "moved" finds "lives"), best first."""
    terms: list[str] = []
    for fact in facts:
        terms += [t for t in topic_terms(fact) if t not in terms]
    terms += [t for t in expand(terms) if t not in terms]
    return [c.memory for c in store.search(terms, project=project, limit=NEIGHBOURS)] if terms else []


async def extract_changes(
    model: Model, store: Memories, message: str, project: str, *, prompted: bool = False
) -> list[Change]:
    """Steps (1) and (2) for one message, at most two requests; raises whatever the model raises
    (``ProseAnswer`` when it answered in prose: ask again with ``prompted``)."""
    found = await extract_facts(model, message, prompted=prompted)
    facts = [third_person(f) for f in found if find_secret(f) is None]
    facts = [f for f in facts if is_standalone(f) and not from_a_secret(f, message)]
    facts += standing_rules(message, facts)
    if not facts:
        return []
    neighbours = nearest(store, facts, project)
    decisions = await reconcile(model, facts, neighbours, prompted=prompted) if neighbours else None
    return plan(facts, neighbours, decisions, message)


def standing_rules(message: str, facts: Sequence[str] = ()) -> list[str]:
    """The rules the user stated in ``message`` ("Always write commit messages in the imperative mood") that
    none of ``facts`` says, as facts: found by their wording, whatever the model extracted."""
    rules = [third_person(s.rstrip(".!")) for s in sentences(message) if is_standing(s) and find_secret(s) is None]
    return [
        f"The user's standing rule: {rule[:1].lower()}{rule[1:]}"
        for rule in rules
        if not any(_restates(fact, rule) for fact in facts)
    ]


def apply(store: Memories, changes: Sequence[Change], item: QueuedTurn, mode: ExtractMode) -> int:
    """Store the changes as proposals (review) or apply them (auto); returns how many were stored."""
    stored = 0
    for change in changes:
        try:
            if mode == "review":
                store.propose(
                    change.text, proposal=change.op, target=change.target, project=item.project,
                    source_session=item.session_id, source_seq=item.seq,
                )  # fmt: skip
            elif change.op == "add":
                store.add(change.text, actor="extractor", project=item.project, source_session=item.session_id,
                          source_seq=item.seq)  # fmt: skip
            elif change.op == "update" and change.target is not None:
                store.replace(change.target, change.text, actor="extractor")
            elif change.op == "delete" and change.target is not None:
                store.forget(change.target, actor="extractor")
            stored += 1
        except CoError:
            continue  # e.g. the target was forgotten meanwhile
    return stored


class ExtractionWorker:
    """Runs extraction in a background task of the running event loop, one queued turn at a time."""

    def __init__(
        self,
        store: Memories,
        model: Callable[[], Model],
        mode: ExtractMode,
        project: str,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self.queue = ExtractionQueue(store.db)
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
                changes = await self._changes(item)
            except asyncio.CancelledError:
                self.queue.release(item)
                raise
            except Exception as exc:  # a failing or invalid model answer changes nothing
                self.last_error = _describe(exc)
                self.queue.failed(item)
                continue
            self.stored += apply(self.store, changes, item, self.mode)
            self.queue.done(item)
            self.last_error = None
            if changes and self.on_change is not None:
                self.on_change()

    async def _changes(self, item: QueuedTurn) -> list[Change]:
        """The item's changes; the first prose answer switches to prompted JSON and asks again at once (once per
        worker: that message costs one request more, every later one at most two)."""
        try:
            return await extract_changes(self.model(), self.store, item.text, item.project, prompted=self.prompted)
        except ProseAnswer:
            if self.prompted:
                raise
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
