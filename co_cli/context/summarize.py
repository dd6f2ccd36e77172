"""Summarise a stretch of history with a tool-less model call.

The messages are rendered as a plain transcript inside the prompt rather than passed as
``message_history``: the summariser then never sees dangling tool calls, provider-specific parts or
images it cannot take, it cannot mistake the history for a conversation to continue, and a long
stretch can be cut into chunks at any message boundary.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings

from co_cli.context.tokens import estimate_text_tokens
from co_cli.message_view import views
from co_cli.synthetic import is_ack, is_summary

SUMMARIZER_INSTRUCTIONS = (
    "You summarise conversations between a user and an AI assistant so that the assistant can continue "
    "the work without the original messages. Return only the summary: no preamble, no questions, no offers, "
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
Write compact Markdown under the headings Goal, Instructions and constraints, Decisions, Files and \
identifiers, Errors and fixes, Failed approaches, Pending and next step. Leave out empty sections.
End with the heading "Standing instructions" and, one per line starting with "> ", every rule or \
preference the user stated that should hold for the rest of the conversation, copied word for word \
from the user's messages. Write "> none" when there is none."""

MERGE_REQUEST = """\
Below are summaries of consecutive parts of one conversation, oldest first. Merge them into one summary \
with the same headings (Goal, Instructions and constraints, Decisions, Files and identifiers, Errors and \
fixes, Failed approaches, Pending and next step). Keep every identifier, decision, failed approach and \
pending task; where parts disagree, the later part wins. Keep the user's latest instructions verbatim, and \
end with the "Standing instructions" heading listing every quoted rule ("> " lines) of every part."""

_QUOTE_LINE = re.compile(r"^\s*>\s?(.*\S)\s*$")
_NONE = {"none", "none.", "(none)", "n/a"}


def standing_instruction_quotes(summary: str) -> list[str]:
    """The "> " lines under a summary's "Standing instructions" heading (unverified: see pins.verify_pins)."""
    heading = summary.rfind("Standing instructions")
    if heading < 0:
        return []
    quotes: list[str] = []
    for line in summary[heading:].splitlines()[1:]:
        match = _QUOTE_LINE.match(line)
        if match is None:
            if line.strip().startswith("#") or (line.strip() and quotes):
                break
            continue
        quote = match.group(1).strip().strip('"').strip()
        if quote and quote.lower() not in _NONE:
            quotes.append(quote)
    return quotes


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


async def _ask(agent: Agent[None, str], prompt: str) -> str:
    result = await agent.run(prompt)
    text = result.output.strip()
    if not text:
        raise RuntimeError("the summariser returned an empty summary")
    return text


async def summarize_messages(
    messages: Sequence[ModelMessage],
    model: Model | str,
    *,
    focus: str | None = None,
    max_input_tokens: int | None = None,
    model_settings: ModelSettings | None = None,
) -> str:
    """A summary of ``messages`` from a fresh tool-less agent. When the transcript does not fit in
    ``max_input_tokens``, parts are summarised separately and the partial summaries merged. Raises on
    any model failure."""
    agent: Agent[None, str] = Agent(
        model, output_type=str, instructions=SUMMARIZER_INSTRUCTIONS, model_settings=model_settings
    )
    entries = render_transcript(messages)
    if not entries:
        raise ValueError("nothing to summarise")
    budget: int | None = None
    if max_input_tokens is not None:
        reserve = estimate_text_tokens(build_summary_prompt("", focus=focus, part=(99, 99))) + 64
        budget = max(max_input_tokens - reserve, MIN_CHUNK_TOKENS)
    transcript = "\n\n".join(entries)
    if budget is None or estimate_text_tokens(transcript) <= budget:
        return await _ask(agent, build_summary_prompt(transcript, focus=focus))
    chunks = chunk_entries(entries, budget)
    partials: list[str] = []
    for index, chunk in enumerate(chunks, start=1):
        prompt = build_summary_prompt("\n\n".join(chunk), focus=focus, part=(index, len(chunks)))
        partials.append(await _ask(agent, prompt))
    return await _merge(agent, partials, focus=focus, budget=budget)


async def _merge(agent: Agent[None, str], partials: list[str], *, focus: str | None, budget: int) -> str:
    rounds = 0
    while len(partials) > 1:
        rounds += 1
        groups = chunk_entries(partials, budget)
        if len(groups) >= len(partials) or rounds >= MAX_MERGE_ROUNDS:
            groups = [partials]
        partials = [await _ask(agent, build_merge_prompt(group, focus=focus)) for group in groups]
    return partials[0]
