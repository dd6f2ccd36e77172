"""What fills the context window: totals, a breakdown by kind and the largest items (for /context)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic_ai.messages import ModelMessage, ModelRequest

from co_cli.context.offload import list_offloaded
from co_cli.context.tokens import MESSAGE_OVERHEAD_TOKENS, estimate_history, estimate_part_tokens
from co_cli.context.user_words import USER_WORDS_HEADING, carried_words
from co_cli.message_view import PartView, view_part
from co_cli.synthetic import is_summary
from co_cli.text_tokens import estimate_text_tokens
from co_cli.vocabulary import MCP_TOOL_PREFIX

KINDS = (
    "instructions+tools",
    "instructions files",
    "tasks",
    "memory",
    "user",
    "assistant",
    "tool returns",
    "summaries",
    "mcp schemas",
    "mcp outputs",
)
LABEL_CHARS = 48


@dataclass(frozen=True)
class ReportItem:
    kind: str
    label: str
    tokens: int


@dataclass
class ContextReport:
    tokens_used: int
    token_source: str
    """"reported" (anchored on the provider's last usage) or "estimated"."""
    context_window: int
    window_source: str
    percent: float
    threshold: float
    threshold_tokens: int
    message_count: int
    transcript_count: int
    compactions: int
    breakdown: dict[str, int] = field(default_factory=dict)
    largest: list[ReportItem] = field(default_factory=list)
    offloaded_count: int = 0
    offloaded_chars: int = 0
    user_words: str = ""
    """What of the user's own messages the summaries keep verbatim ("6 messages verbatim, 2 shortened, ~850
    tokens"), counted within the summaries."""

    def lines(self) -> list[str]:
        """Plain-text rendering, one fact per line."""
        out = [
            f"Context: {self.tokens_used:,} / {self.context_window:,} tokens ({self.percent:.1f}%, "
            f"{self.token_source}); window size: {self.window_source}",
            f"Compaction threshold: {self.threshold:.0%} = {self.threshold_tokens:,} tokens",
            f"Messages: {self.message_count} in context, {self.transcript_count} in transcript; "
            f"compactions: {self.compactions}",
            "Breakdown (estimated): " + ", ".join(f"{kind} {self.breakdown.get(kind, 0):,}" for kind in KINDS),
        ]
        if self.largest:
            out.append("Largest: " + "; ".join(f"{i.kind} {i.label} ({i.tokens:,})" for i in self.largest))
        if self.offloaded_count:
            out.append(f"Offloaded tool outputs: {self.offloaded_count} ({self.offloaded_chars:,} chars)")
        if self.user_words:
            out.append(f"Your own words beside the summary: {self.user_words}")
        return out


def _label(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= LABEL_CHARS else flat[: LABEL_CHARS - 1] + "…"


_KIND_OF_PART = {
    "user": "user",
    "tool-return": "tool returns",
    "retry": "tool returns",
    "text": "assistant",
    "thinking": "assistant",
    "tool-call": "assistant",
}


def _classify(view: PartView, in_summary: bool) -> tuple[str, str] | None:
    """(kind, label) of a part, or None when it does not count."""
    kind = _KIND_OF_PART.get(view.kind)
    if kind is None:
        return None
    if in_summary and view.kind == "user":
        return "summaries", _label(view.text.split("\n", 1)[0])
    if view.kind == "tool-return":
        if (view.tool_name or "").startswith(MCP_TOOL_PREFIX):
            return "mcp outputs", f"{view.tool_name} ({view.tool_call_id})"
        return kind, f"{view.tool_name} ({view.tool_call_id})"
    if view.kind == "retry":
        return kind, f"retry {view.tool_name or 'output'}"
    if view.kind == "tool-call":
        return kind, f"call {view.tool_name}"
    return kind, _label(view.text)


def context_report(
    messages: Sequence[ModelMessage],
    *,
    context_window: int,
    window_source: str,
    threshold: float,
    overhead_tokens: int,
    transcript_count: int,
    compactions: int,
    offload_dir: Path | None,
    instructions_files_tokens: int = 0,
    memory_tokens: int = 0,
    tasks_tokens: int = 0,
    mcp_schema_tokens: int = 0,
) -> ContextReport:
    """A snapshot of the working context ``messages`` (as it would be sent).

    ``overhead_tokens`` includes the instructions files, the task list (``tasks_tokens``) and the MCP servers'
    tool schemas (``mcp_schema_tokens``); the memory section (``memory_tokens``, the last request's) comes on top
    of it."""
    estimate = estimate_history(messages, overhead_tokens=overhead_tokens + memory_tokens)
    breakdown = dict.fromkeys(KINDS, 0)
    breakdown["instructions+tools"] = overhead_tokens - instructions_files_tokens - tasks_tokens - mcp_schema_tokens
    breakdown["tasks"] = tasks_tokens
    breakdown["mcp schemas"] = mcp_schema_tokens
    breakdown["instructions files"] = instructions_files_tokens
    breakdown["memory"] = memory_tokens
    items: list[ReportItem] = []
    for msg in messages:
        default_kind = "user" if isinstance(msg, ModelRequest) else "assistant"
        breakdown[default_kind] += MESSAGE_OVERHEAD_TOKENS
        in_summary = is_summary(msg)
        for part in msg.parts:
            classified = _classify(view_part(part), in_summary)
            if classified is None:
                continue
            kind, label = classified
            tokens = estimate_part_tokens(part)
            breakdown[kind] += tokens
            items.append(ReportItem(kind=kind, label=label, tokens=tokens))
    items.sort(key=lambda item: item.tokens, reverse=True)
    user_words = _user_words(messages)
    offloaded = list_offloaded(offload_dir) if offload_dir is not None else []
    percent = 100.0 * estimate.total / context_window if context_window > 0 else 0.0
    return ContextReport(
        tokens_used=estimate.total,
        token_source=estimate.source,
        context_window=context_window,
        window_source=window_source,
        percent=percent,
        threshold=threshold,
        threshold_tokens=int(threshold * context_window),
        message_count=len(messages),
        transcript_count=transcript_count,
        compactions=compactions,
        breakdown=breakdown,
        largest=items[:3],
        offloaded_count=len(offloaded),
        offloaded_chars=sum(size for _, size in offloaded),
        user_words=user_words,
    )


def _user_words(messages: Sequence[ModelMessage]) -> str:
    """The user's own words the summaries in ``messages`` keep, in words ("" when none)."""
    verbatim = shortened = tokens = 0
    for message in messages:
        words = carried_words(message)
        if words and f"\n{USER_WORDS_HEADING}\n" in "\n".join(view_part(p).text for p in message.parts):
            verbatim += len(words.verbatim)
            shortened += len(words.shortened) + words.omitted
            tokens += estimate_text_tokens(words.render())
    if not verbatim and not shortened:
        return ""
    shown = f"{verbatim} messages verbatim" + (f", {shortened} older shortened" if shortened else "")
    return f"{shown} (~{tokens:,} tokens, counted in summaries)"
