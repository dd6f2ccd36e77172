"""The user's own words beside a summary: what the user wrote in a summarised stretch, kept verbatim.

A summary loses what the user said in plain words first: a rule about how to answer, the person who must
approve a change, the library whose upgrade failed. So beside a summary co keeps the user's messages of the
replaced stretch verbatim, the newest first within a budget; each older message keeps one shortened line
(its sentences that carry an identifier, else its first sentence of some length, and every other identifier
in it: no sentence is chosen by what its words seem to mean). When even those lines do not fit, the ones
that name no identifier go first, then the oldest; a message repeated later in full is not kept twice. The
list is carried in the summary message's metadata, so a later compaction that summarises this summary
carries it on (re-budgeted, newest first: a shortened line stays shortened). Pure functions over messages;
the budget comes from the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ModelMessage

from co_cli.context.ledger import find_identifiers
from co_cli.context.pins import sentences
from co_cli.message_view import user_text
from co_cli.synthetic import carried_info, carried_request, is_ack, is_summary
from co_cli.text_tokens import estimate_text_tokens

__all__ = [
    "CARRIED_KEY",
    "USER_WORDS_HEADING",
    "UserWords",
    "clip_sentence",
    "keep_user_words",
    "shorten",
    "user_entries",
]

CARRIED_KEY = "user_words"
USER_WORDS_HEADING = (
    "What the user wrote in these messages, verbatim (oldest first; a line starting with ~ is shortened):"
)
SHORT_SENTENCE_CHARS = 160
SHORT_LINE_CHARS = 320
"""A shortened line's sentences, together (one sentence always, cut at ``SHORT_SENTENCE_CHARS``)."""
MIN_SENTENCE_WORDS = 4
"""Shorter sentences ("Hi!", "Not yet.") stand for a message only when it has nothing else."""
SHORT_IDENTIFIERS = 12


@dataclass(frozen=True)
class Entry:
    """One message of the user: its text, and whether it is already the shortened line of an older message."""

    text: str
    shortened: bool = False


@dataclass(frozen=True)
class UserWords:
    """The user's messages of a stretch as kept beside its summary, oldest first."""

    verbatim: tuple[str, ...] = ()
    shortened: tuple[str, ...] = ()
    """Older messages, one line each; all older than every verbatim one."""
    omitted: int = 0
    """The oldest messages, whose lines did not fit the budget either (counted, not shown)."""

    def __bool__(self) -> bool:
        """Whether anything is shown (a count of omitted messages alone is not worth a section)."""
        return bool(self.verbatim or self.shortened)

    def render(self) -> str:
        lines = [USER_WORDS_HEADING]
        if self.omitted:
            lines.append(f"[{self.omitted} older messages of the user omitted; the transcript keeps them]")
        lines += [f"~ {line}" for line in self.shortened]
        for text in self.verbatim:
            first, *rest = text.strip().split("\n")
            lines.append(f"- {first}")
            lines += [f"  {line}" if line.strip() else "" for line in rest]
        return "\n".join(lines)

    def info(self) -> dict[str, Any]:
        """What a summary message carries (``synthetic.carried_info``)."""
        return {
            CARRIED_KEY: {"verbatim": list(self.verbatim), "shortened": list(self.shortened), "omitted": self.omitted}
        }

    def describe(self) -> str:
        """For the compaction line: "3 of your messages kept verbatim, 2 older shortened"."""
        if not self:
            return ""
        text = f"{len(self.verbatim)} of your messages kept verbatim"
        if self.shortened:
            text += f", {len(self.shortened)} older shortened"
        if self.omitted:
            text += f", {self.omitted} oldest omitted"
        return text


def _carried(message: ModelMessage) -> tuple[list[str], list[str], int]:
    value = carried_info(message, CARRIED_KEY)
    if not isinstance(value, dict):
        return [], [], 0
    verbatim = [t for t in value.get("verbatim", []) if isinstance(t, str)]
    shortened = [t for t in value.get("shortened", []) if isinstance(t, str)]
    omitted = value.get("omitted", 0)
    return verbatim, shortened, omitted if isinstance(omitted, int) else 0


def carried_words(message: ModelMessage) -> UserWords:
    """The user's words an earlier summary carries."""
    verbatim, shortened, omitted = _carried(message)
    return UserWords(tuple(verbatim), tuple(shortened), omitted)


def user_entries(messages: Sequence[ModelMessage], *, exclude_latest: str | None = None) -> tuple[list[Entry], int]:
    """Everything the user wrote in ``messages``, oldest first: their messages, and what earlier summaries in
    it carry (their shortened lines, verbatim messages and the latest request they held). ``exclude_latest``
    (the latest request, kept verbatim elsewhere) is left out once. Also returns the count of messages an
    earlier summary had already omitted."""
    entries: list[Entry] = []
    omitted = 0
    for message in messages:
        if is_ack(message):
            continue
        if is_summary(message):
            verbatim, shortened, earlier_omitted = _carried(message)
            omitted += earlier_omitted
            entries += [Entry(line, True) for line in shortened]
            entries += [Entry(text) for text in verbatim]
            latest = carried_request(message)
            if latest:
                entries.append(Entry(latest))
            continue
        text = user_text(message)
        if text and text.strip():
            entries.append(Entry(text.strip()))
    if exclude_latest and entries and not entries[-1].shortened and entries[-1].text == exclude_latest.strip():
        entries.pop()
    return entries, omitted


def clip_sentence(sentence: str) -> str:
    """A sentence cut at ``SHORT_SENTENCE_CHARS`` (with "…")."""
    if len(sentence) <= SHORT_SENTENCE_CHARS:
        return sentence
    return sentence[: SHORT_SENTENCE_CHARS - 1].rstrip() + "…"


def shorten(text: str) -> str:
    """One line for an older message: the sentences that hold an identifier, in order and within
    ``SHORT_LINE_CHARS``, else its first sentence of some length; then every identifier of the message those
    sentences lack. "Not yet. All settings live in a/b.toml. Please read it." keeps its middle sentence, not
    the greeting."""
    parts = sentences(text)
    if not parts:
        return clip_sentence(" ".join(text.split()))
    found = [[name for name, _ in find_identifiers(part)] for part in parts]
    chosen = [i for i, part in enumerate(parts) if found[i]]
    if not chosen:
        long_enough = [i for i, part in enumerate(parts) if len(part.split()) >= MIN_SENTENCE_WORDS]
        chosen = long_enough[:1] or [0]
    pieces: list[str] = []
    length = 0
    previous = -1
    for index in chosen:
        piece = clip_sentence(parts[index])
        if pieces and length + len(piece) > SHORT_LINE_CHARS:
            break
        if index > previous + 1 and pieces:
            pieces.append("…")
        pieces.append(piece)
        length += len(piece) + 1
        previous = index
    line = " ".join(pieces)
    rest = [name for name, _ in find_identifiers(text) if name not in line][:SHORT_IDENTIFIERS]
    more = " …" if previous < len(parts) - 1 else ""
    if rest:
        return f"{line} … [{', '.join(rest)}]"
    return line + more


def keep_user_words(entries: Sequence[Entry], budget_tokens: int, *, omitted: int = 0) -> UserWords:
    """Everything within ``budget_tokens``: the newest messages verbatim, as long as the older ones still fit
    as their shortened lines (or half the budget is left for them); the older ones shortened to one line;
    those whose lines do not fit either counted, not shown (see ``_fitting_lines`` for which). A message the
    user repeated later in full is left out (the later one holds it)."""
    repeated = _repeated(entries)
    entries = [entry for i, entry in enumerate(entries) if i not in repeated]
    lines = [entry.text if entry.shortened else shorten(entry.text) for entry in entries]
    line_costs = [estimate_text_tokens(line) + 2 for line in lines]
    older = [0] * (len(entries) + 1)  # older[i]: the lines of entries[:i]
    for i, cost in enumerate(line_costs):
        older[i + 1] = older[i] + cost
    verbatim: list[str] = []
    used = 0
    index = len(entries) - 1
    while index >= 0 and not entries[index].shortened:
        cost = estimate_text_tokens(entries[index].text) + 2
        if used + cost + min(older[index], budget_tokens // 2) > budget_tokens:
            break
        verbatim.append(entries[index].text)
        used += cost
        index -= 1
    kept = _fitting_lines(lines[: index + 1], line_costs[: index + 1], budget_tokens - used)
    shortened = [lines[i] for i in kept]
    return UserWords(tuple(reversed(verbatim)), tuple(shortened), omitted + index + 1 - len(kept))


def _repeated(entries: Sequence[Entry]) -> set[int]:
    """The messages the user wrote again, in full, inside a later message (of some length: "yes" is not
    repeated by every later "yes, and …")."""
    texts = [" ".join(entry.text.split()).casefold() for entry in entries]
    return {
        i
        for i, entry in enumerate(entries)
        if not entry.shortened
        and len(texts[i].split()) >= MIN_SENTENCE_WORDS
        and any(texts[i] in later for later in texts[i + 1 :])
    }


def _fitting_lines(lines: Sequence[str], costs: Sequence[int], budget: int) -> list[int]:
    """The indexes of the older lines kept within ``budget``, in order: the lines that name no identifier are
    left out first, then the oldest; a line that names a port, a path or a person is what a later question
    asks about, and the summary keeps the gist of the rest."""
    plain = [i for i, line in enumerate(lines) if not find_identifiers(line)]
    named = [i for i in range(len(lines)) if i not in set(plain)]
    kept = set(range(len(lines)))
    total = sum(costs)
    for i in [*plain, *named]:
        if total <= budget:
            break
        kept.discard(i)
        total -= costs[i]
    return sorted(kept)
