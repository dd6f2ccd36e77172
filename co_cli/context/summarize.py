"""Summarise a stretch of history with a tool-less model call, and read what the user stated in it.

The messages are rendered as a plain transcript inside the prompt rather than passed as
``message_history``: the summariser then never sees dangling tool calls, provider-specific parts or
images it cannot take, it cannot mistake the history for a conversation to continue, and a long
stretch can be cut into chunks at any message boundary.

The answer is typed (``SummaryAnswer``): beside the summary's Markdown, the user's standing instructions,
the changes they stated, the next step and the people named, each quoted from the user's words. It is asked
through ``models.structured_answer`` (in the strongest mode the model enforces: its JSON schema where the
profile says so, the embedded engine included; else a forced output tool; prompted JSON on a server that
ignores it), streamed. The fields are the model's reading, not yet facts: ``context.pins`` checks
every quote against the user's own text before compaction acts on it. When no typed answer can be had (the
model answered in prose even when shown the schema), its text is the summary and ``typed`` is False.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings

from co_cli.context.tokens import estimate_text_tokens
from co_cli.message_view import views
from co_cli.models.structured_answer import ProseAnswer, ask, prompted_by_default
from co_cli.synthetic import is_ack, is_summary

SUMMARIZER_INSTRUCTIONS = (
    "You summarise conversations between a user and an AI assistant so that the assistant can continue "
    "the work without the original messages. Return only what is asked: no preamble, no questions, no offers, "
    "and never a reply to the user such as an acknowledgement."
)

SUMMARY_REQUEST = """\
Summarise the conversation transcript below. The summary replaces these messages, so keep everything \
needed to continue the work:
- The user's goal and their latest instructions (quote them verbatim when short).
- Decisions made, and why.
- Constraints and preferences the user stated.
- File paths, commands, function and class names, URLs, ids and other identifiers, verbatim.
- Errors met and how they were fixed.
- Approaches that were tried and failed, so they are not tried again.
- Pending tasks and the next step.
The session's task list (the set_tasks tool) is kept outside the conversation and sent with every request: \
do not copy the list, only what the tasks need that it does not say.
If the transcript contains an earlier summary, merge its content into yours: keep everything it records \
unless later messages supersede it.
Answer with these fields:
- summary: compact Markdown under the headings Goal, Instructions and constraints, Decisions, Files and \
identifiers, Errors and fixes, Failed approaches, Pending and next step. Leave out empty sections.
- standing_instructions: every rule or preference the user stated that should hold for the rest of the \
conversation (how to answer, what to always or never do), each copied word for word from the user's \
message, in the user's language. Not a request for one task only, not a question. Empty when there is none.
- changes: every fact the user said has changed (a value, a place, a name or a plan that no longer holds): \
quote, the user's words saying it, copied word for word; old, the earlier value it replaces, as the \
conversation wrote it; new, what holds now.
- next_step: the next step as the user stated it, copied word for word from the user's message; null when \
the user did not say.
- people: the names of the people the conversation mentions, as written.
Quotes are the user's own words: never the assistant's, never reworded or translated. Each of the user's \
sentences goes under one of these fields at most; a request for the current task only goes under none."""

MERGE_REQUEST = """\
Below are summaries of consecutive parts of one conversation, oldest first. Merge them into one summary \
with the same headings (Goal, Instructions and constraints, Decisions, Files and identifiers, Errors and \
fixes, Failed approaches, Pending and next step). Keep every identifier, decision, failed approach and \
pending task; where parts disagree, the later part wins. Keep the user's latest instructions verbatim. \
Return only the merged summary, in Markdown."""


class Change(BaseModel):
    """A fact the user said has changed."""

    quote: str = Field(description="the user's words saying it changed, copied word for word")
    old: str = Field(default="", description="the earlier value it replaces, as the conversation wrote it")
    new: str = Field(default="", description="what holds now")


class SummaryAnswer(BaseModel):
    """The summary of the transcript, and what the user stated in it, quoted word for word."""

    summary: str = Field(description="the summary, in compact Markdown under the headings asked for")
    standing_instructions: list[str] = Field(
        default_factory=list, description="the user's rules and preferences for the rest of the conversation"
    )
    changes: list[Change] = Field(default_factory=list, description="the facts the user said have changed")
    next_step: str | None = Field(default=None, description="the next step, as the user stated it; null if not stated")
    people: list[str] = Field(default_factory=list, description="the names of the people mentioned")


@dataclass(frozen=True)
class Summarised:
    """The summariser's answer: typed (its fields are the model's reading, to verify before use), or a
    plain-text summary (``typed`` False: only ``answer.summary`` is set)."""

    answer: SummaryAnswer
    typed: bool

    @property
    def text(self) -> str:
        return self.answer.summary


@dataclass
class SummaryMode:
    """How the typed answer is asked for. A server that ignores a forced tool call answers in prose; the
    first such answer switches to prompted JSON (the schema in the instructions) for as long as this object
    is kept (the governor keeps one per model), as memory extraction does."""

    prompted: bool = False


TOOL_RESULT_CHARS = 2000
TOOL_ARGS_CHARS = 1000
SYSTEM_CHARS = 2000
MIN_CHUNK_TOKENS = 256
MAX_MERGE_ROUNDS = 4


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n[… {len(text) - limit} chars omitted …]\n{text[-tail:]}"


def render_message(msg: ModelMessage) -> list[str]:
    """Transcript lines for one message. Thinking and provider-internal parts are left out, and so are co's
    acknowledgements: they are not conversation, and a small summariser may copy one as its whole answer."""
    if is_ack(msg):
        return []
    if is_summary(msg):
        return [f"[Earlier summary]\n{view.text}" for view in views(msg) if view.kind == "user"]
    lines: list[str] = []
    for view in views(msg):
        if view.kind == "user":
            lines.append(f"User: {view.text}")
        elif view.kind == "tool-return":
            note = "" if view.outcome in (None, "success") else f", {view.outcome}"
            lines.append(f"Tool result ({view.tool_name}{note}): {_clip(view.text, TOOL_RESULT_CHARS)}")
        elif view.kind == "retry":
            lines.append(f"Retry ({view.tool_name or 'output'}): {_clip(view.text, 500)}")
        elif view.kind == "system":
            lines.append(f"System: {_clip(view.text, SYSTEM_CHARS)}")
        elif view.kind == "text":
            lines.append(f"Assistant: {view.text}")
        elif view.kind == "tool-call":
            lines.append(f"Assistant called {view.tool_name}({_clip(view.text, TOOL_ARGS_CHARS)})")
    return lines


def render_transcript(messages: Sequence[ModelMessage]) -> list[str]:
    """One transcript entry per message that has something to show."""
    entries: list[str] = []
    for msg in messages:
        lines = render_message(msg)
        if lines:
            entries.append("\n".join(lines))
    return entries


def build_summary_prompt(transcript: str, *, focus: str | None = None, part: tuple[int, int] | None = None) -> str:
    """The request sent to the summariser for one transcript (or one part of it)."""
    pieces = [SUMMARY_REQUEST]
    if part is not None:
        pieces.append(f"This is part {part[0]} of {part[1]} of a longer conversation; summarise this part only.")
    if focus:
        pieces.append(f"Focus the summary on: {focus}")
    pieces.append(f"<transcript>\n{transcript}\n</transcript>")
    return "\n\n".join(pieces)


def build_merge_prompt(summaries: Sequence[str], *, focus: str | None = None) -> str:
    pieces = [MERGE_REQUEST]
    if focus:
        pieces.append(f"Focus the summary on: {focus}")
    body = "\n\n".join(f"<part>\n{text}\n</part>" for text in summaries)
    pieces.append(body)
    return "\n\n".join(pieces)


def _split_entry(entry: str, budget_tokens: int) -> list[str]:
    size = max(budget_tokens * 4, 1)
    return [entry[i : i + size] for i in range(0, len(entry), size)]


def chunk_entries(entries: Sequence[str], budget_tokens: int) -> list[list[str]]:
    """Consecutive groups of entries, each within ``budget_tokens`` (an oversized entry is split)."""
    chunks: list[list[str]] = []
    current: list[str] = []
    used = 0
    for entry in entries:
        for piece in _split_entry(entry, budget_tokens) if estimate_text_tokens(entry) > budget_tokens else [entry]:
            cost = estimate_text_tokens(piece) + 1
            if current and used + cost > budget_tokens:
                chunks.append(current)
                current, used = [], 0
            current.append(piece)
            used += cost
    if current:
        chunks.append(current)
    return chunks


async def _ask_text(agent: Agent[None, str], prompt: str) -> str:
    """The summariser's plain-text answer to ``prompt`` (a merge of partial summaries), streamed: the request's
    time limit then bounds the wait for the first token and each silence after it, not how long a slow model
    takes to write the whole summary."""
    async with agent.run_stream(prompt) as result:
        output = await result.get_output()
    return _plain(output)


def _plain(text: str) -> str:
    text = text.strip()
    if not text:
        raise RuntimeError("the summariser returned an empty summary")
    return text


@dataclass(frozen=True)
class _Asker:
    """One summary request, typed, as ``SummaryMode`` says; streamed like the plain-text ones."""

    model: Model | str
    settings: ModelSettings | None
    mode: SummaryMode

    async def typed(self, prompt: str) -> SummaryAnswer:
        return await ask(
            self.model, SummaryAnswer, SUMMARIZER_INSTRUCTIONS, prompt, prompted=self.mode.prompted,
            model_settings=self.settings, stream=True,
        )  # fmt: skip

    async def __call__(self, prompt: str) -> Summarised:
        """The typed answer to ``prompt``; a prose answer switches the mode to prompted JSON and asks again at
        once (unless the model was shown the schema already); a prose answer then is a plain-text summary. An
        answer held to the schema and cut at the token cap is a failure (the caller keeps a digest): it says
        nothing about the server, so the mode stays."""
        try:
            return _checked(await self.typed(prompt))
        except ProseAnswer as exc:
            if exc.constrained and _json_like(exc.text):
                raise RuntimeError("the summariser's answer was cut short at its token limit") from None
            prose = exc.text
            if self.mode.prompted or prompted_by_default(self.model):
                return _untyped(prose)
        self.mode.prompted = True
        try:
            return _checked(await self.typed(prompt))
        except ProseAnswer as exc:
            # a plain summary rather than a failed attempt at the JSON object, if either answer is one
            return _untyped(prose if _json_like(exc.text) else exc.text)


def _checked(answer: SummaryAnswer) -> Summarised:
    return Summarised(answer.model_copy(update={"summary": _plain(answer.summary)}), True)


def _json_like(text: str) -> bool:
    """Whether ``text`` begins as a JSON object, bare or in a fenced block: an attempt at the object asked for
    (unfinished, or not valid), never a summary to show the model."""
    body = text.lstrip()
    if body.startswith("```"):
        body = body.removeprefix("```").removeprefix("json").lstrip()
    return body.startswith("{")


def _untyped(text: str) -> Summarised:
    if _json_like(text):
        raise RuntimeError("the summariser's answer was neither a summary nor the object asked for")
    return Summarised(SummaryAnswer(summary=_plain(text)), False)


async def summarize_messages(
    messages: Sequence[ModelMessage],
    model: Model | str,
    *,
    focus: str | None = None,
    max_input_tokens: int | None = None,
    model_settings: ModelSettings | None = None,
    mode: SummaryMode | None = None,
) -> Summarised:
    """A summary of ``messages`` from a fresh tool-less agent, with what the user stated in them (unverified).
    When the transcript does not fit in ``max_input_tokens``, parts are summarised separately and the partial
    summaries merged (their fields united, see ``merge_fields``). Raises on any model failure."""
    asker = _Asker(model, model_settings, mode or SummaryMode())
    entries = render_transcript(messages)
    if not entries:
        raise ValueError("nothing to summarise")
    budget: int | None = None
    if max_input_tokens is not None:
        reserve = estimate_text_tokens(build_summary_prompt("", focus=focus, part=(99, 99))) + 64
        budget = max(max_input_tokens - reserve, MIN_CHUNK_TOKENS)
    transcript = "\n\n".join(entries)
    if budget is None or estimate_text_tokens(transcript) <= budget:
        return await asker(build_summary_prompt(transcript, focus=focus))
    chunks = chunk_entries(entries, budget)
    parts: list[Summarised] = []
    for index, chunk in enumerate(chunks, start=1):
        prompt = build_summary_prompt("\n\n".join(chunk), focus=focus, part=(index, len(chunks)))
        parts.append(await asker(prompt))
    agent: Agent[None, str] = Agent(
        model, output_type=str, instructions=SUMMARIZER_INSTRUCTIONS, model_settings=model_settings
    )
    text = await _merge(agent, [part.text for part in parts], focus=focus, budget=budget)
    return Summarised(merge_fields(text, [part.answer for part in parts]), all(part.typed for part in parts))


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


def merge_fields(summary: str, parts: Sequence[SummaryAnswer]) -> SummaryAnswer:
    """One answer for consecutive parts, oldest first: ``summary`` (their merged text) and the union of their
    fields, each item once; the latest part that names a next step wins."""
    rules: dict[str, str] = {}
    changes: dict[str, Change] = {}
    people: dict[str, str] = {}
    next_step: str | None = None
    for part in parts:
        for rule in part.standing_instructions:
            rules.setdefault(_key(rule), rule)
        for change in part.changes:
            changes.setdefault(_key(change.quote), change)
        for name in part.people:
            people.setdefault(_key(name), name)
        next_step = part.next_step or next_step
    return SummaryAnswer(
        summary=summary,
        standing_instructions=list(rules.values()),
        changes=list(changes.values()),
        next_step=next_step,
        people=list(people.values()),
    )


async def _merge(agent: Agent[None, str], partials: list[str], *, focus: str | None, budget: int) -> str:
    rounds = 0
    while len(partials) > 1:
        rounds += 1
        groups = chunk_entries(partials, budget)
        if len(groups) >= len(partials) or rounds >= MAX_MERGE_ROUNDS:
            groups = [partials]
        partials = [await _ask_text(agent, build_merge_prompt(group, focus=focus)) for group in groups]
    return partials[0]
