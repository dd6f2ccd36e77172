"""What compaction does with the user's words the summariser quoted: verified, then placed where a model reads
them; and, when no typed answer could be had, what English word cues only suggest.

A summariser writes its own idea of what comes next under its "Pending" heading, and keeps the value the user
later changed as often as the change; a small model then answers "what is the next step?" or "which host is it
on now?" from the summary's prose, although the user's words sit beside it. The summariser's typed answer
(``summarize.SummaryAnswer``) names the user's next step, the changes they stated, their standing instructions
and the people named; ``read_answer`` keeps what really occurs in the user's text (``pins``), as the user's own
sentences, and counts what does not. The next step is quoted right under the summary's "Pending and next step"
heading; the changes close the summary's text (after the user's words and the "Kept verbatim" list), the last
thing the model reads before the recent messages; the rules become pins.

When the summariser answered in plain text (or failed), ``suggest`` lists the user's sentences that English
word cues (``co_cli.cues``) read as a rule, a change or the next step, each with the command that would apply
it. They are only shown (``/compact show``): nothing is pinned or quoted into the summary from them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic_ai.messages import ModelMessage

from co_cli.context.pins import asked, find_quote, normalise, occurs, sentences, verify_quotes
from co_cli.context.summarize import Change, SummaryAnswer
from co_cli.context.user_words import Entry
from co_cli.cues import MAX_RULE_CHARS, is_standing, names_next_step, states_change
from co_cli.store import ReadPart
from co_cli.synthetic import carried_info

__all__ = [
    "CHANGES_HEADING",
    "NEXT_STEP_HEADING",
    "SUGGESTIONS_KEY",
    "Reading",
    "Said",
    "StatedChange",
    "Suggestion",
    "carried_suggestions",
    "carry_earlier",
    "changes_block",
    "quote_next_step",
    "joined",
    "read_answer",
    "read_said",
    "said_key",
    "suggest",
    "suggestions_info",
    "take_block",
    "with_quotes",
]

NEXT_STEP_HEADING = "The next step, as the user stated it:"
CHANGES_HEADING = "Changed since, as the user stated it (this holds over anything above):"
SUGGESTIONS_KEY = "suggestions"
"""Where a summary message carries the suggestions of its compaction (``synthetic.carried_info``)."""

_PENDING_HEADING_RE = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*|\*\*)?[^\n]{0,30}\b(?:pending|next steps?)\b[^\n]{0,30}$", re.IGNORECASE | re.MULTILINE
)
"""The summary's own "Pending and next step" heading (co asks for it in English, in any conversation)."""


@dataclass(frozen=True)
class StatedChange:
    """A change the user stated: their sentence, and the value it replaces (which occurs in the stretch; "" when
    the message was read for it alone, where the earlier value need not be named)."""

    text: str
    old: str

    def line(self) -> str:
        return f"> {self.text}{_BEFORE}{self.old})" if self.old else f"> {self.text}"


@dataclass(frozen=True)
class Reading:
    """What compaction acts on from a typed answer, every quote found in the user's own text."""

    rules: tuple[str, ...] = ()
    changes: tuple[StatedChange, ...] = ()
    next_step: str | None = None
    people: tuple[str, ...] = ()
    dropped_quotes: int = 0
    """Quotes of the answer found in none of the user's messages (dropped)."""
    dropped_names: int = 0
    """Names of the answer found nowhere in the stretch (dropped)."""
    unsure_rules: int = 0
    """Rules the answer also named as a change or as the next step: found, but not pinned."""
    unconfirmed_rules: int = 0
    """Rules that, asked about alone (``standing.confirmed_rules``), read as a task or a fact: not pinned."""
    unsure_changes: int = 0
    """Changes whose earlier value the answer did not name, or that occurs nowhere in the stretch: not placed."""


_BEFORE = "  (before: "


def take_block(body: str, heading: str) -> tuple[str, list[tuple[str, str]]]:
    """``body`` without the blocks under ``heading`` it holds (copied from an earlier summary's text), and the
    quotes of their "> " lines, oldest first, each with its "(before: …)" note ("" for none)."""
    pattern = re.compile(rf"^[ \t]*{re.escape(heading)}[ \t]*\n((?:[ \t]*>[^\n]*(?:\n|$))*)", re.MULTILINE)
    quotes: list[tuple[str, str]] = []
    for match in pattern.finditer(body):
        for line in match.group(1).splitlines():
            quote, _, before = line.strip().removeprefix(">").strip().partition(_BEFORE.strip())
            if quote.strip():
                quotes.append((quote.strip(), before.strip().removesuffix(")").strip()))
    if not quotes:
        return body, []
    return re.sub(r"\n{3,}", "\n\n", pattern.sub("", body)).strip(), quotes


def carry_earlier(body: str, answer: SummaryAnswer) -> tuple[str, SummaryAnswer, frozenset[str]]:
    """``body`` without the next step and changes an earlier summary quoted (a summariser copies them with its
    text), and ``answer`` with them as its oldest items, to be verified again: the changes first among its own,
    the next step where it names none. Also the carried changes' quotes (normalised): verified when they were
    placed, they stand without an earlier value."""
    body, steps = take_block(body, NEXT_STEP_HEADING)
    body, changed = take_block(body, CHANGES_HEADING)
    changes = [Change(quote=quote, old=old) for quote, old in changed] + list(answer.changes)
    next_step = answer.next_step or (steps[-1][0] if steps else None)
    carried = frozenset(normalise(quote) for quote, _ in changed)
    return body, answer.model_copy(update={"changes": changes, "next_step": next_step}), carried


def read_answer(
    answer: SummaryAnswer,
    user_texts: Sequence[str],
    stretch_texts: Sequence[str],
    carried: frozenset[str] = frozenset(),
) -> Reading:
    """The verified part of ``answer``: its quotes found in ``user_texts`` (what the user wrote in the stretch),
    each widened to the user's sentence; its names found in ``stretch_texts`` (anything written in it). Two
    checks of the model's classification, neither reading the words (small models list one sentence under
    every kind): a change is placed only when the value it replaces occurs in ``stretch_texts`` too (a change
    of an earlier fact names it), and a rule that is a question (its sentence ends with a question mark, in
    any script) or that the answer also names as a change or the next step is not pinned. Both are counted
    apart. A change an earlier summary placed (its quote in ``carried``) stands without an earlier value."""
    rules = verify_quotes(answer.standing_instructions, user_texts)
    dropped = rules.dropped
    stated: list[str] = []
    changes: list[StatedChange] = []
    unsure_changes = 0
    for change in answer.changes:
        found = find_quote(change.quote, user_texts)
        if found is None:
            dropped += 1
        elif all(normalise(found) != normalise(text) for text in stated):
            stated.append(found)
            old = change.old.strip()
            if old and occurs(old, stretch_texts):
                changes.append(StatedChange(found, old))
            elif not old and normalise(change.quote) in carried:
                changes.append(StatedChange(found, ""))
            else:
                unsure_changes += 1
    next_step = None
    if answer.next_step and answer.next_step.strip():
        next_step = find_quote(answer.next_step, user_texts)
        dropped += 1 if next_step is None else 0
    names = [name.strip() for name in answer.people if name.strip()]
    people = tuple(dict.fromkeys(name for name in names if occurs(name, stretch_texts)))
    others = [*stated, *([next_step] if next_step else [])]
    sure = tuple(rule for rule in rules.kept if not asked(rule) and not _overlaps(rule, others))
    return Reading(
        rules=sure,
        changes=tuple(changes),
        next_step=next_step,
        people=people,
        dropped_quotes=dropped,
        dropped_names=len(set(names)) - len(people),
        unsure_rules=len(rules.kept) - len(sure),
        unsure_changes=unsure_changes,
    )


Said = Mapping[str, Sequence[ReadPart]]
"""What the model read in the user's messages one at a time (memory extraction's reading of each, kept with the
message), by the message's text (``said_key``): the rules, changes and next steps, each the user's sentence."""


def said_key(text: str) -> str:
    """How a user's message is looked up in ``Said``: its text with whitespace collapsed."""
    return " ".join(text.split())


def read_said(user_texts: Sequence[str], said: Said) -> tuple[Reading, list[str]]:
    """The reading of those of ``user_texts`` (oldest first) that were read one at a time (``said``): their
    rules, changes and latest next step, each verified against its message when it was read, a rule that is a
    question or also read as a change or a next step left out; and those texts."""
    rules: list[str] = []
    changes: list[StatedChange] = []
    next_step: str | None = None
    read: list[str] = []
    for text in user_texts:
        parts = said.get(said_key(text))
        if parts is None:
            continue
        read.append(text)
        others = [part.quote for part in parts if part.kind != "rule"]
        for part in parts:
            if part.kind == "rule" and not asked(part.quote) and not _overlaps(part.quote, others):
                rules.append(part.quote)
            elif part.kind == "change":
                changes.append(StatedChange(part.quote, ""))
            elif part.kind == "next_step":
                next_step = part.quote
    return Reading(rules=tuple(dict.fromkeys(rules)), changes=tuple(dict.fromkeys(changes)), next_step=next_step), read


def joined(read: Reading, summarised: Reading, read_texts: Sequence[str], user_texts: Sequence[str]) -> Reading:
    """One reading of a stretch: what the messages read one at a time say (``read``, from ``read_texts``), and
    what the summariser read in the others (``summarised``; what it found in a message read one at a time is
    left to that message's own reading). Rules and changes each once; the next step of the later message."""

    def elsewhere(sentence: str) -> bool:
        wanted = normalise(sentence)
        return not any(wanted in normalise(text) for text in read_texts)

    rules = {normalise(r): r for r in [*read.rules, *filter(elsewhere, summarised.rules)]}
    changes = {normalise(c.text): c for c in [*read.changes, *(c for c in summarised.changes if elsewhere(c.text))]}
    own_step = summarised.next_step if summarised.next_step and elsewhere(summarised.next_step) else None
    steps = [step for step in (read.next_step, own_step) if step]
    return replace(
        summarised,
        rules=tuple(rules.values()),
        changes=tuple(changes.values()),
        next_step=max(steps, key=lambda step: _position(step, user_texts)) if steps else None,
    )


def _position(sentence: str, user_texts: Sequence[str]) -> int:
    """The index of the newest of ``user_texts`` holding ``sentence`` (-1 when none does)."""
    wanted = normalise(sentence)
    return max((i for i, text in enumerate(user_texts) if wanted in normalise(text)), default=-1)


def _overlaps(sentence: str, others: Sequence[str]) -> bool:
    """Whether the user's ``sentence`` is (part of) one of ``others``, or holds one."""
    own = normalise(sentence)
    return any(own in (other := normalise(text)) or other in own for text in others)


def quote_next_step(body: str, next_step: str | None, *, always: bool = False) -> str:
    """A summary ``body`` with the user's ``next_step`` quoted right under its "Pending" heading (at its end
    when it has none); unchanged when it holds the sentence already (in any case), unless ``always`` (a digest
    lists the user's messages, where nothing says which sentence is the next step)."""
    if not next_step or (not always and next_step.casefold() in body.casefold()):
        return body
    block = f"{NEXT_STEP_HEADING}\n> {next_step}"
    under = _PENDING_HEADING_RE.search(body)
    if under is not None:
        return f"{body[: under.end()]}\n{block}{body[under.end() :]}"
    return f"{body.rstrip()}\n\n{block}"


def with_quotes(body: str, reading: Reading) -> str:
    """A digest's ``body`` with the user's next step quoted under its "Pending" heading (or at its end) and the
    changes they stated closing it, as a summary carries them."""
    text = quote_next_step(body, reading.next_step, always=True)
    changes = changes_block(reading.changes)
    return f"{text.rstrip()}\n\n{changes}" if changes else text


def changes_block(changes: Sequence[StatedChange]) -> str:
    """The lines that close a summary's text: the changes the user stated, in their words ("" for none)."""
    if not changes:
        return ""
    return "\n".join([CHANGES_HEADING, *(change.line() for change in changes)])


# --- suggestions, when no typed answer could be had ------------------------------------------------------------

SuggestionKind = Literal["rule", "change", "next step"]
SUGGESTION_LIMITS: dict[SuggestionKind, int] = {"rule": 8, "change": 3, "next step": 2}
"""The newest this many of each kind are listed."""


@dataclass(frozen=True)
class Suggestion:
    """A sentence of the user's that a word cue reads as ``kind``; shown, never applied by co."""

    kind: SuggestionKind
    text: str

    @property
    def command(self) -> str:
        """The command that would apply it: a rule or a change is pinned, a next step is a task."""
        return f"/tasks add {self.text}" if self.kind == "next step" else f"/pin {self.text}"

    def info(self) -> dict[str, str]:
        return {"kind": self.kind, "text": self.text}


def suggest(entries: Sequence[Entry]) -> tuple[Suggestion, ...]:
    """The user's sentences in ``entries`` that English cues read as a standing rule, a change or the next
    step, each once, the newest of each kind (``SUGGESTION_LIMITS``), in the order the user wrote them."""
    found: dict[SuggestionKind, list[str]] = {"rule": [], "change": [], "next step": []}
    for entry in entries:
        for sentence in sentences(entry.text.removeprefix("~ ")):
            if len(sentence) > MAX_RULE_CHARS or sentence.endswith("…"):
                continue  # too long to pin, or cut short
            if is_standing(sentence):
                found["rule"].append(sentence)
            elif states_change(sentence):
                found["change"].append(sentence)
            elif names_next_step(sentence):
                found["next step"].append(sentence)
    return tuple(
        Suggestion(kind, text)
        for kind, texts in found.items()
        for text in list(dict.fromkeys(texts))[-SUGGESTION_LIMITS[kind] :]
    )


def suggestions_info(suggestions: Sequence[Suggestion]) -> dict[str, Any]:
    """What a summary message carries of them (empty for none)."""
    return {SUGGESTIONS_KEY: [s.info() for s in suggestions]} if suggestions else {}


def carried_suggestions(message: ModelMessage) -> list[Suggestion]:
    """The suggestions a summary message carries (none for any other message)."""
    value = carried_info(message, SUGGESTIONS_KEY)
    if not isinstance(value, list):
        return []
    kinds: tuple[SuggestionKind, ...] = ("rule", "change", "next step")
    found: list[Suggestion] = []
    for item in value:
        if isinstance(item, dict) and item.get("kind") in kinds and isinstance(item.get("text"), str):
            kind = next(k for k in kinds if k == item["kind"])
            found.append(Suggestion(kind, item["text"]))
    return found
