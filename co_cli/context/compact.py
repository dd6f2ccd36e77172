"""Compaction: replace the middle (or all) of a history by a summary message."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic_ai.messages import ModelMessage, ModelRequest
from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings

from co_cli.context.boundaries import (
    current_turn_start,
    find_head_end,
    find_tail_start,
    latest_request,
    tail_boundaries,
)
from co_cli.context.digest import extractive_digest
from co_cli.context.ledger import (
    Identifier,
    append_missing,
    check_summary,
    complete_paths,
    extract_identifiers,
    find_identifiers,
    select_missing,
    split_kept_verbatim,
)
from co_cli.context.pins import normalise
from co_cli.context.standing import confirmed_rules
from co_cli.context.summarize import SummaryMode, summarize_messages
from co_cli.context.tokens import estimate_messages_tokens
from co_cli.context.trim import is_plain_tool_return
from co_cli.context.user_content import reject_reason
from co_cli.context.user_quotes import (
    CHANGES_HEADING,
    NEXT_STEP_HEADING,
    Reading,
    Said,
    StatedChange,
    Suggestion,
    carry_earlier,
    changes_block,
    joined,
    quote_next_step,
    read_answer,
    read_said,
    said_key,
    suggest,
    suggestions_info,
    take_block,
    with_quotes,
)
from co_cli.context.user_words import Entry, UserWords, keep_user_words, user_entries
from co_cli.errors import CoError
from co_cli.message_view import answer_text, content_text, part_text
from co_cli.synthetic import ack_response, covers, is_ack, is_summary, summary_request
from co_cli.terminal_text import counted

__all__ = [
    "CompactionError",
    "CompactionResult",
    "NothingToCompact",
    "Skipped",
    "SummaryRejected",
    "compact_all",
    "compact_middle",
    "drop_tool_outputs",
    "edited_check",
    "is_timeout",
    "plan_middle",
]

CompactionMethod = Literal["summary", "digest", "marker", "tools-dropped"]
"""summary: written by the summariser; digest: the extractive fallback; marker: the static last resort;
tools-dropped: old tool outputs cut after the provider said the context was too long."""

INFLATION_RATIO = 0.9
"""A summary must be below this fraction of the tokens it replaces, or it is rejected."""
MIN_TAIL = 4
DEFAULT_USER_WORDS_TOKENS = 20_000
"""Tokens of the user's own messages kept verbatim beside a summary (see ``user_words``), before the window's
share and the room the summary leaves."""


class CompactionError(CoError):
    """A manual compaction that cannot be applied; the history stays as it was."""


class NothingToCompact(CompactionError):
    """Nothing is worth compacting yet (empty, already a summary, or too short for a summary to help)."""


@dataclass
class CompactionResult:
    """A compaction: the new history is ``replacement + original[covered:]``."""

    messages: list[ModelMessage]
    covered: int
    """Index into the input list where the kept messages start."""
    replacement: list[ModelMessage]
    """The kept head, the summary message and (before a kept request) a short assistant acknowledgement."""
    head: int
    """How many of the replacement's messages are the kept head (the summary message sits at this index)."""
    summary: str
    """The summary message's full text (prefix included)."""
    tokens_before: int
    tokens_after: int
    used_fallback: bool
    error: str | None
    n_replaced: int
    method: CompactionMethod = "summary"
    check: str = ""
    """The identifier check of an accepted summary ("summary kept 31/40 identifiers; 9 appended")."""
    tiers: tuple[str, ...] = ()
    """The cheap passes that had already run on what was sent (offload, trim, superseded reads, ...)."""
    standing_instructions: tuple[str, ...] = ()
    """The standing instructions the summariser named in its typed answer and co found in the user's messages
    of the span, each the user's sentence verbatim: offered as pins."""
    dropped_quotes: int = 0
    """Quotes of the summariser's typed answer found in none of the user's messages (dropped, not acted on)."""
    dropped_names: int = 0
    """Names of the summariser's typed answer found nowhere in the span (dropped)."""
    unsure_rules: int = 0
    """Rules of the typed answer the summariser also named as a change or the next step (found, not pinned)."""
    unconfirmed_rules: int = 0
    """Rules of the typed answer that, asked about alone, read as a task or a fact (found, not pinned)."""
    unsure_changes: int = 0
    """Changes of the typed answer without the earlier value they replace (found, not placed)."""
    suggestions: tuple[Suggestion, ...] = ()
    """When no typed answer was had: the user's sentences English word cues read as a rule, a change or the
    next step, only shown (``/compact show``) with the command that would apply them."""
    detail: str = ""
    """What triggered it, in words ("auto at 83% of the window", "overflow", "manual")."""
    user_words: str = ""
    """What of the user's own messages is kept beside the summary ("6 of your messages kept verbatim")."""
    timed_out: bool = False
    """The summariser did not answer within its time limit (the fallback stands in)."""


def describe_error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def covered_count(messages: Sequence[ModelMessage]) -> int:
    """Messages a stretch stands for: a summary counts as the messages it summarised, its
    acknowledgement as none."""
    total = 0
    for msg in messages:
        if is_ack(msg):
            continue
        n = covers(msg)
        total += n if n is not None else 1
    return total


def _latest_prompt(messages: Sequence[ModelMessage], start: int, end: int) -> str | None:
    """The user's latest prompt when it lies in ``messages[start:end]`` (so it would be summarised away)."""
    found = latest_request(messages)
    if found is None or not start <= found[0] < end:
        return None
    return found[1]


def _suffix_tokens(messages: Sequence[ModelMessage]) -> list[int]:
    suffix = [0] * (len(messages) + 1)
    for i in range(len(messages) - 1, -1, -1):
        suffix[i] = suffix[i + 1] + estimate_messages_tokens([messages[i]])
    return suffix


def _choose_tail_start(
    messages: Sequence[ModelMessage], head_end: int, min_tail: int, max_tail_tokens: int | None
) -> int:
    tail = find_tail_start(messages, min_tail, head_end=head_end)
    if max_tail_tokens is None or tail == 0:
        return tail
    suffix = _suffix_tokens(messages)
    if suffix[tail] <= max_tail_tokens:
        return tail
    n = len(messages)
    user_starts, response_starts = tail_boundaries(messages, head_end)
    for candidates in (user_starts, response_starts):
        fitting = [i for i in candidates if n - i >= MIN_TAIL and suffix[i] <= max_tail_tokens]
        if fitting:
            return fitting[0]
    allowed = [i for i in (*user_starts, *response_starts) if n - i >= MIN_TAIL]
    return max(allowed, default=tail)


def plan_middle(
    messages: Sequence[ModelMessage],
    *,
    max_history_messages: int,
    max_tail_tokens: int | None = None,
    whole: bool = False,
) -> tuple[int, int] | None:
    """(head_end, tail_start) of the middle to summarise, or None when there is nothing worth replacing.

    The tail keeps at least ``max(4, max_history_messages // 2)`` messages and starts at a user turn; when
    it would hold more than ``max_tail_tokens`` it shrinks to as few as 4 messages. ``whole``: everything
    before the current turn, the first exchange included (what a manual /compact would summarise).
    """
    if whole:
        head_end = 0
        tail_start = find_tail_start(messages, 1)
    else:
        head_end = find_head_end(messages)
        min_tail = max(MIN_TAIL, max_history_messages // 2)
        tail_start = _choose_tail_start(messages, head_end, min_tail, max_tail_tokens)
    if tail_start <= head_end:
        return None
    if all(is_summary(msg) or is_ack(msg) for msg in messages[head_end:tail_start]):
        return None  # only an earlier summary: summarising it again gains nothing
    return head_end, tail_start


def _replacement(
    messages: Sequence[ModelMessage], head_end: int, tail_start: int, summary: ModelRequest
) -> list[ModelMessage]:
    replacement: list[ModelMessage] = [*messages[:head_end], summary]
    if tail_start < len(messages) and isinstance(messages[tail_start], ModelRequest):
        # Two requests in a row would be merged by pydantic-ai at the next run start, shifting indices.
        replacement.append(ack_response())
    return replacement


@dataclass(frozen=True)
class Skipped:
    """No compaction now, and why: the span is too small for a summary to pay, or the summary came back no
    smaller than the span (``summary_tokens``: its size, so the next attempt takes a bigger span)."""

    reason: str
    summary_tokens: int = 0


MIN_KEPT_FROM_EARLIER = 0.5
"""A new summary must keep at least this share of the identifiers an earlier summary in its span held, or
it is a failed summary (small models asked to merge a summary often return a fraction of it)."""


@dataclass(frozen=True)
class _Summary:
    """A summariser answer that passed the checks, and what is known of the user's words: the messages read one
    at a time and, when the answer is typed, its verified fields for the others."""

    body: str
    reading: Reading
    typed: bool


def _stretch_texts(span: Sequence[ModelMessage], entries: Sequence[Entry]) -> list[str]:
    """Everything written in ``span`` that a name or an earlier value may be checked against: the user's words,
    the answers and earlier summaries."""
    texts = [entry.text for entry in entries]
    for message in span:
        text = summary_text_of(message) if is_summary(message) else answer_text(message)
        if text:
            texts.append(text)
    return texts


async def _checked_summary(
    span: Sequence[ModelMessage],
    model: Model | str,
    *,
    focus: str | None,
    max_input_tokens: int | None,
    model_settings: ModelSettings | None,
    mode: SummaryMode | None,
    said: Said,
) -> _Summary:
    """The summariser's summary of ``span``, and the verified reading of the user's words: what the messages read
    one at a time say (``said``), and the summariser's typed fields for the others. Raises
    SummaryRejected when the answer is not a summary, holds none of the user's content, or drops most of an
    earlier summary."""
    answer = await summarize_messages(
        span, model, focus=focus, max_input_tokens=max_input_tokens, model_settings=model_settings, mode=mode
    )
    body = answer.text
    if _looks_like_acknowledgement(body):
        raise SummaryRejected("the summariser answered with an acknowledgement, not a summary")
    reason = reject_reason(body, span)
    if reason is not None:
        raise SummaryRejected(reason)
    # What the user wrote is carried beside the summary whatever the summariser keeps of it, and an earlier
    # summary's "Kept verbatim" list by the ledger: what is checked is what only the earlier prose held.
    entries = user_entries(span)[0]
    words = "\n".join(entry.text for entry in entries)
    earlier = _earlier_prose_identifiers(span)
    kept_earlier = check_summary(f"{body}\n{words}", earlier).kept
    if earlier and len(kept_earlier) < MIN_KEPT_FROM_EARLIER * len(earlier):
        raise SummaryRejected(
            f"the summary kept {len(kept_earlier)} of the {len(earlier)} identifiers of the earlier summary"
        )
    user_texts = [entry.text for entry in entries] + _earlier_quotes(span)
    own, read = read_said(user_texts, said)
    # an earlier summary's next step and changes, copied into the body, are taken out and verified again (a
    # plain-text answer has no fields of its own, only those)
    body, typed, carried = carry_earlier(body, answer.answer)
    summarised = read_answer(typed, user_texts, _stretch_texts(span, entries), carried)
    reading = joined(own, summarised, read, user_texts)
    asked_rules = [rule for rule in reading.rules if rule not in own.rules]  # a message's own were asked already
    if asked_rules:
        rules, unsure = await confirmed_rules(
            model, asked_rules, prompted=mode.prompted if mode else False, model_settings=model_settings
        )
        reading = replace(
            reading,
            rules=tuple(rule for rule in reading.rules if rule in own.rules or rule in rules),
            unconfirmed_rules=unsure,
        )
    return _Summary(body, reading, answer.typed)


def _earlier_quotes(span: Sequence[ModelMessage]) -> list[str]:
    """The user's sentences that earlier summaries in ``span`` quoted (verified when they were made; the user's
    words those summaries carry may hold them only shortened by now)."""
    return [quote for quote, _ in _earlier_blocks(span, NEXT_STEP_HEADING) + _earlier_blocks(span, CHANGES_HEADING)]


def _earlier_blocks(span: Sequence[ModelMessage], heading: str) -> list[tuple[str, str]]:
    """The quotes (with their "before" notes) under ``heading`` in the earlier summaries of ``span``, oldest
    first."""
    return [q for message in span if is_summary(message) for q in take_block(summary_text_of(message), heading)[1]]


def _digest_text(span: Sequence[ModelMessage], entries: Sequence[Entry], said: Said) -> str:
    """The extractive digest of ``span`` with what it holds of the user's verified words quoted as a summary
    quotes them: the next step and changes its earlier summaries quoted, then those the messages read one at a
    time state (the latest next step)."""
    read = read_said([entry.text for entry in entries], said)[0]
    steps = [quote for quote, _ in _earlier_blocks(span, NEXT_STEP_HEADING)]
    earlier = [StatedChange(quote, old) for quote, old in _earlier_blocks(span, CHANGES_HEADING)]
    changes = {normalise(change.text): change for change in [*earlier, *read.changes]}
    quoted = Reading(changes=tuple(changes.values()), next_step=read.next_step or (steps[-1] if steps else None))
    return with_quotes(extractive_digest(span), quoted)


def _earlier_prose_identifiers(span: Sequence[ModelMessage]) -> list[Identifier]:
    """The identifiers of the earlier summaries' own prose in ``span`` (not their "Kept verbatim" lists)."""
    found: dict[str, Identifier] = {}
    for message in span:
        if is_summary(message):
            prose = split_kept_verbatim(summary_text_of(message))[0]
            for text, kind in find_identifiers(prose):
                found.setdefault(text, Identifier(text, kind, "summary"))
    return list(found.values())


def _identifiers(span: Sequence[ModelMessage], reading: Reading) -> list[Identifier]:
    """The span's ledger, with the people the summariser named (found in the span) among the user's names."""
    identifiers = extract_identifiers(span)
    known = {ident.text for ident in identifiers}
    people = [Identifier(name, "proper", "user") for name in reading.people if name not in known]
    return [*people, *identifiers] if people else identifiers


def _with_user_words(body: str, words: UserWords, span: Sequence[ModelMessage], reading: Reading) -> tuple[str, str]:
    """The summary's text: the summariser's ``body`` with bare file names completed to their paths and the
    next step the user stated quoted under its "Pending" heading, the user's own words, the identifiers all
    these lack ("Kept verbatim"), and last the changes the user stated (``user_quotes``); and the check line,
    which counts what the summariser itself kept."""
    identifiers = _identifiers(span, reading)
    own = check_summary(body, identifiers)
    text = complete_paths(body, identifiers)
    text = quote_next_step(text, reading.next_step)
    text = f"{text.rstrip()}\n\n{words.render()}" if words else text
    changes = changes_block(reading.changes)
    full = check_summary(f"{text}\n{changes}", identifiers)
    appended = len(select_missing(full))
    text = append_missing(text, full)
    text = f"{text.rstrip()}\n\n{changes}" if changes else text
    if not own.total:
        return text, ""  # nothing to say when the span named nothing
    line = f"summary kept {len(own.kept)}/{own.total} identifiers"
    in_words = len(own.missing) - len(full.missing)
    if in_words:
        line += f"; {in_words} more in your own words"
    if appended:
        line += f"; {appended} appended"
    if appended < len(full.missing):
        line += f", {len(full.missing) - appended} over the limit"
    return text, line


def edited_check(text: str, span: Sequence[ModelMessage]) -> str:
    """The check line of a summary the user edited: what the edited ``text`` holds of the identifiers of the
    ``span`` it summarises, and how many items its "Kept verbatim" list still has (the user may have deleted
    some, or all)."""
    identifiers = extract_identifiers(span)
    listed = len(split_kept_verbatim(text)[1])
    if not identifiers and not listed:
        return "edited by the user"
    held = check_summary(text, identifiers)
    return (
        f"edited by the user: it holds {len(held.kept)}/{held.total} identifiers, "
        f"{listed} of its items in the Kept verbatim list"
    )


@dataclass(frozen=True)
class _Fitted:
    summary: ModelRequest
    check: str
    words: UserWords
    size: int


def _fit_user_words(
    checked: _Summary,
    span: Sequence[ModelMessage],
    entries: Sequence[Entry],
    omitted: int,
    budget_tokens: int,
    target: int,
    size_of: Callable[[ModelRequest], int],
    *,
    n: int,
    latest: str | None,
    carried: dict[str, Any],
) -> _Fitted:
    """The summary message for ``checked`` with as much of the user's own words as keeps its size (``size_of``)
    within ``target`` tokens: the budget is what the bare summary leaves, shrunk by what the appended
    identifiers take, at last to nothing. ``size`` over ``target`` means even the bare summary is too big.
    ``carried`` rides in the message's metadata beside the user's words."""
    body = checked.body
    budget = max(0, min(budget_tokens, target - size_of(summary_request(n, body, latest))))
    for attempt in range(3):
        words = keep_user_words(entries, budget, omitted=omitted)
        text, check = _with_user_words(body, words, span, checked.reading)
        summary = summary_request(n, text, latest, {**(words.info() if words else {}), **carried})
        size = size_of(summary)
        if size <= target or budget == 0:
            break
        budget = 0 if attempt == 1 else max(0, budget - (size - target))
    return _Fitted(summary, check, words, size)


def is_timeout(exc: BaseException) -> bool:
    """A summariser that did not answer in time (pydantic-ai's deadline, the SDK's or asyncio's)."""
    return isinstance(exc, TimeoutError) or "Timeout" in type(exc).__name__


def _looks_like_acknowledgement(text: str) -> bool:
    """A reply such as co's own "Understood. I have the summary…" (small models copy it) rather than a summary."""
    words = text.split()
    return not words or (words[0].strip(".,!").lower() in ("understood", "ok", "okay", "sure") and len(words) < 40)


class SummaryRejected(Exception):
    """The summariser's answer cannot stand for the span (it is kept out; the fallback is used)."""


@dataclass(frozen=True)
class _Found:
    """What a compaction found of the user's words: verified from a typed answer, or only suggested."""

    rules: tuple[str, ...] = ()
    dropped_quotes: int = 0
    dropped_names: int = 0
    unsure_rules: int = 0
    unconfirmed_rules: int = 0
    unsure_changes: int = 0
    suggestions: tuple[Suggestion, ...] = ()

    @classmethod
    def of(cls, checked: _Summary | None, entries: Sequence[Entry], said: Said) -> _Found:
        """The verified reading (``checked``'s, or without a summary what the messages read one at a time say);
        without a typed answer, also the cues' suggestions over the user's ``entries`` that no model read."""
        reading = read_said([entry.text for entry in entries], said)[0] if checked is None else checked.reading
        unread = [entry for entry in entries if entry.shortened or said_key(entry.text) not in said]
        suggestions = () if checked is not None and checked.typed else suggest(unread)
        return cls(
            reading.rules, reading.dropped_quotes, reading.dropped_names, reading.unsure_rules,
            reading.unconfirmed_rules, reading.unsure_changes, suggestions,
        )  # fmt: skip

    def fields(self) -> dict[str, Any]:
        return {
            "standing_instructions": self.rules,
            "dropped_quotes": self.dropped_quotes,
            "dropped_names": self.dropped_names,
            "unsure_rules": self.unsure_rules,
            "unconfirmed_rules": self.unconfirmed_rules,
            "unsure_changes": self.unsure_changes,
            "suggestions": self.suggestions,
        }


async def compact_middle(
    messages: Sequence[ModelMessage],
    model: Model | str | None,
    *,
    max_history_messages: int,
    focus: str | None = None,
    max_input_tokens: int | None = None,
    max_tail_tokens: int | None = None,
    min_span_tokens: int = 0,
    must_fit: bool = False,
    model_settings: ModelSettings | None = None,
    user_words_tokens: int = DEFAULT_USER_WORDS_TOKENS,
    mode: SummaryMode | None = None,
    whole: bool = False,
    said: Said | None = None,
) -> CompactionResult | Skipped | None:
    """Keep the head and the tail, replace the middle by one user-role message. None when there is no
    middle to replace; ``whole``: no head, and the tail is the current turn only (``plan_middle``).

    Nothing is dropped to save a few tokens: a middle under ``min_span_tokens`` is left to grow (Skipped),
    and so is one whose summary came back no smaller than it (Skipped with the summary's size). When the
    summariser fails or is not asked (``model`` None), or its answer is rejected, the middle becomes an
    extractive digest (every user message, one line per tool call, the identifier ledger) if that is
    smaller. Only ``must_fit`` (the request would not fit the window otherwise) allows the static marker.
    Beside an accepted summary the user's own messages of the middle are kept verbatim, newest first within
    ``user_words_tokens`` and the room the summary leaves (older ones shortened to a line); what the summary
    and those words lack of the identifier ledger is appended verbatim. The user's latest prompt, if it falls
    in the middle, is copied verbatim. The standing instructions, changes and next step of the summariser's
    typed answer are acted on only as far as they are found in the user's messages, and for a message the model
    read one at a time (``said``: memory extraction's reading) that reading decides instead; without either,
    word cues only suggest.
    """
    plan = plan_middle(
        messages, max_history_messages=max_history_messages, max_tail_tokens=max_tail_tokens, whole=whole
    )
    if plan is None:
        return None
    span = _Middle.of(messages, *plan, said or {})
    if span.tokens < min_span_tokens and not must_fit:
        return Skipped(f"the span to summarise (~{span.tokens} tokens) is under ~{min_span_tokens} tokens")
    error: str | None = None
    if model is not None:
        ask = _SummaryAsk(model, focus, max_input_tokens, model_settings, mode)
        summarised = await span.summarised(ask, user_words_tokens, must_fit)
        if not isinstance(summarised, str):
            return summarised
        error = summarised
    return span.fallback(error, user_words_tokens, must_fit)


@dataclass(frozen=True)
class _SummaryAsk:
    """How the summariser is asked."""

    model: Model | str
    focus: str | None
    max_input_tokens: int | None
    model_settings: ModelSettings | None
    mode: SummaryMode | None


@dataclass
class _Middle:
    """The middle of a history ``compact_middle`` replaces, and what it is built from."""

    messages: Sequence[ModelMessage]
    head_end: int
    tail_start: int
    middle: Sequence[ModelMessage]
    n: int
    """How many messages the summary covers."""
    latest: str | None
    """The user's latest prompt, when it falls in the middle (copied verbatim)."""
    tokens: int
    entries: list[Entry]
    omitted: int
    everything: list[Entry]
    said: Said
    timed_out: bool = False

    @classmethod
    def of(cls, messages: Sequence[ModelMessage], head_end: int, tail_start: int, said: Said) -> _Middle:
        middle = messages[head_end:tail_start]
        latest = _latest_prompt(messages, head_end, tail_start)
        entries, omitted = user_entries(middle, exclude_latest=latest)
        return cls(
            messages, head_end, tail_start, middle, covered_count(middle), latest,
            estimate_messages_tokens(middle), entries, omitted, user_entries(middle)[0], said,
        )  # fmt: skip

    def added_tokens(self, summary: ModelRequest) -> int:
        """The size of what replaces the middle with ``summary``."""
        return estimate_messages_tokens(
            _replacement(self.messages, self.head_end, self.tail_start, summary)[self.head_end :]
        )

    async def summarised(
        self, ask: _SummaryAsk, user_words_tokens: int, must_fit: bool
    ) -> CompactionResult | Skipped | str:
        """The middle replaced by the summariser's answer with the user's own words; Skipped when it is no smaller
        and need not fit; else why the summary cannot stand (the digest is tried next)."""
        try:
            checked = await _checked_summary(
                self.middle, ask.model, focus=ask.focus, max_input_tokens=ask.max_input_tokens,
                model_settings=ask.model_settings, mode=ask.mode, said=self.said,
            )  # fmt: skip
        except SummaryRejected as exc:
            return f"summary rejected: {exc}"
        except Exception as exc:  # any provider or network failure: the digest stands in
            self.timed_out = is_timeout(exc)
            return describe_error(exc)
        found = _Found.of(checked, self.everything, self.said)
        target = math.ceil(INFLATION_RATIO * self.tokens) - 1  # the largest size clearly smaller
        fitted = _fit_user_words(
            checked, self.middle, self.entries, self.omitted, user_words_tokens, target, self.added_tokens,
            n=self.n, latest=self.latest, carried=suggestions_info(found.suggestions),
        )  # fmt: skip
        if fitted.size <= target:
            return self.result(fitted.summary, "summary", None, found, fitted.check, fitted.words)
        error = f"summary rejected: {fitted.size} tokens is not clearly smaller than the {self.tokens} it replaces"
        return error if must_fit else Skipped(error, summary_tokens=fitted.size)

    def fallback(self, error: str | None, user_words_tokens: int, must_fit: bool) -> CompactionResult | Skipped | None:
        """The extractive digest when it is smaller; else, only when the request must fit, the static marker."""
        found = _Found.of(None, self.everything, self.said)
        carried = keep_user_words(self.entries, user_words_tokens, omitted=self.omitted)
        info = {**(carried.info() if carried else {}), **suggestions_info(found.suggestions)}
        digest = summary_request(
            self.n, _digest_text(self.middle, self.everything, self.said), self.latest, info or None
        )
        if self.added_tokens(digest) < self.tokens:
            return self.result(digest, "digest", error, found)
        if not must_fit:
            return Skipped("no digest of the span is smaller than it")
        marker = summary_request(self.n, None, self.latest, suggestions_info(found.suggestions) or None)
        if self.added_tokens(marker) >= self.tokens:
            return None
        return self.result(marker, "marker", error, found)

    def result(
        self,
        summary: ModelRequest,
        method: CompactionMethod,
        error: str | None,
        found: _Found,
        check: str = "",
        words: UserWords | None = None,
    ) -> CompactionResult:
        replacement = _replacement(self.messages, self.head_end, self.tail_start, summary)
        new_messages = [*replacement, *self.messages[self.tail_start :]]
        return CompactionResult(
            messages=new_messages,
            covered=self.tail_start,
            replacement=replacement,
            head=self.head_end,
            summary=summary_text_of(summary),
            tokens_before=estimate_messages_tokens(self.messages),
            tokens_after=estimate_messages_tokens(new_messages),
            used_fallback=method != "summary",
            error=error,
            n_replaced=len(self.middle),
            method=method,
            check=check,
            user_words=words.describe() if words else "",
            timed_out=self.timed_out,
            **found.fields(),
        )


async def compact_all(
    messages: Sequence[ModelMessage],
    model: Model | str,
    *,
    focus: str | None = None,
    max_input_tokens: int | None = None,
    model_settings: ModelSettings | None = None,
    user_words_tokens: int = DEFAULT_USER_WORDS_TOKENS,
    mode: SummaryMode | None = None,
    said: Said | None = None,
) -> CompactionResult:
    """Summarise the whole history (manual /compact) into a summary message and an acknowledgement.

    Beside the summary the user's own messages are kept verbatim (newest first, within ``user_words_tokens``
    and the room the summary leaves; older ones shortened to a line), the identifiers both lack are appended
    verbatim and the user's latest prompt is appended verbatim. A summary that holds none of the user's
    content is rejected and the extractive digest stands in (the reason is in ``error``). Raises on any model
    failure and NothingToCompact when there is nothing new to compact or the result would not be smaller
    than the history.
    """
    if not messages:
        raise NothingToCompact("nothing to compact yet: the conversation is empty")
    if all(is_summary(m) or is_ack(m) for m in messages):
        raise NothingToCompact("nothing new to compact since the last summary")
    latest = _latest_prompt(messages, 0, len(messages))
    n = covered_count(messages)
    entries, omitted = user_entries(messages, exclude_latest=latest)
    everything = user_entries(messages)[0]
    before = estimate_messages_tokens(messages)
    error: str | None = None
    check = ""
    try:
        checked = await _checked_summary(
            messages, model, focus=focus, max_input_tokens=max_input_tokens, model_settings=model_settings,
            mode=mode, said=said or {},
        )  # fmt: skip
    except SummaryRejected as exc:
        error = f"summary rejected: {exc}"
        found = _Found.of(None, everything, said or {})
        words = keep_user_words(entries, user_words_tokens, omitted=omitted)
        info = {**(words.info() if words else {}), **suggestions_info(found.suggestions)}
        summary = summary_request(n, _digest_text(messages, everything, said or {}), latest, info or None)
        method: CompactionMethod = "digest"
    else:
        found = _Found.of(checked, everything, said or {})
        fitted = _fit_user_words(
            checked,
            messages,
            entries,
            omitted,
            user_words_tokens,
            before - 1,
            lambda summary: estimate_messages_tokens([summary, ack_response()]),
            n=n,
            latest=latest,
            carried=suggestions_info(found.suggestions),
        )
        summary, check, words = fitted.summary, fitted.check, fitted.words
        method = "summary"
    return _whole_replaced(messages, summary, method, error, found, check, words if method == "summary" else None)


def _whole_replaced(
    messages: Sequence[ModelMessage],
    summary: ModelRequest,
    method: CompactionMethod,
    error: str | None,
    found: _Found,
    check: str,
    words: UserWords | None,
) -> CompactionResult:
    """The whole history replaced by ``summary`` and its acknowledgement; NothingToCompact unless smaller."""
    before = estimate_messages_tokens(messages)
    replacement: list[ModelMessage] = [summary, ack_response()]
    after = estimate_messages_tokens(replacement)
    if after >= before:
        raise NothingToCompact(
            f"nothing worth compacting yet: the conversation (~{before} tokens) is shorter than a summary of it"
        )
    return CompactionResult(
        messages=list(replacement),
        covered=len(messages),
        replacement=replacement,
        head=0,
        summary=summary_text_of(summary),
        tokens_before=before,
        tokens_after=after,
        used_fallback=method != "summary",
        error=error,
        n_replaced=len(messages),
        method=method,
        check=check,
        user_words=words.describe() if words else "",
        **found.fields(),
    )


def summary_text_of(summary: ModelRequest) -> str:
    """The text of a summary message (its one user-prompt part)."""
    return "\n".join(part_text(part) for part in summary.parts)


def drop_tool_outputs(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """Copy of ``messages`` where every tool result before the current turn is a one-line stub (used after
    a provider reports the context is too long). The input is never mutated."""
    boundary = current_turn_start(messages)
    result = list(messages)
    for index in range(boundary):
        msg = messages[index]
        if not isinstance(msg, ModelRequest):
            continue
        new_parts = None
        for part_index, part in enumerate(msg.parts):
            if not is_plain_tool_return(part):
                continue
            size = len(content_text(part.content))
            stub = f"[output of {part.tool_name} dropped to fit the context window ({size} chars)]"
            if len(stub) >= size:
                continue
            if new_parts is None:
                new_parts = list(msg.parts)
            new_parts[part_index] = replace(part, content=stub)
        if new_parts is not None:
            result[index] = replace(msg, parts=new_parts)
    return result


def compaction_line(result: CompactionResult) -> str:
    """One line saying what a compaction did, what it kept of the user's own words, what of the summariser's
    quotes it dropped, why a summary was not used, and how to read or undo it."""
    check = f"; {result.check}" if result.check else ""
    words = f"; {result.user_words}" if result.user_words else ""
    why = f" ({result.error})" if result.error and result.method != "summary" else ""
    trigger = f", {result.detail}" if result.detail else ""
    show = "/compact show reads it"
    if result.suggestions:
        show += f" and lists {counted(len(result.suggestions), 'suggestion')} from your words"
    return (
        f"Compacted ({result.method}{trigger}){why}: {result.n_replaced} messages, ~{result.tokens_before:,} -> "
        f"~{result.tokens_after:,} tokens{check}{words}{_dropped(result)}. {show}, /uncompact undoes it."
    )


def _dropped(result: CompactionResult) -> str:
    """What of the summariser's typed answer was not found or not sure, and so not acted on ("" for nothing)."""
    text = ""
    if result.dropped_quotes:
        text += f"; {counted(result.dropped_quotes, 'quote')} not found in your messages, dropped"
    if result.dropped_names:
        text += f"; {counted(result.dropped_names, 'name')} not found in the conversation, dropped"
    if result.unsure_rules:
        text += f"; {counted(result.unsure_rules, 'rule')} also named as a change or the next step, not pinned"
    if result.unconfirmed_rules:
        text += f"; {counted(result.unconfirmed_rules, 'rule')} not a rule when asked alone, not pinned"
    if result.unsure_changes:
        text += f"; {counted(result.unsure_changes, 'change')} without the earlier value, not placed"
    return text
