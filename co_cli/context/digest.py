"""The extractive digest: a deterministic stand-in for a summary, used when the summariser cannot be.

When the summariser fails, times out, is switched off by the circuit breaker or returns something no
smaller than what it replaces, a stretch of history is replaced by this digest instead of a bare marker:
an earlier summary in the stretch (bounded), every user message (each cut head…tail), one line per tool
call (name, key argument, outcome) and the identifier ledger of everything the digest does not already
hold verbatim (``co_cli.context.ledger``), as a "Kept verbatim" list that a later summary carries on.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ModelMessage

from co_cli.context.ledger import append_missing, check_summary, extract_identifiers, split_kept_verbatim
from co_cli.context.user_quotes import CHANGES_HEADING, NEXT_STEP_HEADING, take_block
from co_cli.context.user_words import CARRIED_KEY, USER_WORDS_HEADING, user_entries
from co_cli.message_view import PartView, views
from co_cli.synthetic import LATEST_REQUEST_HEADING, SUMMARY_PREFIX, carried_info, covers, is_summary, synthetic_kind

__all__ = ["DIGEST_HEADING", "ToolCallLine", "cut_middle", "extractive_digest", "tool_call_lines"]

DIGEST_HEADING = "Digest of the earlier conversation (extracted verbatim, not summarised):"
EARLIER_LABEL = "Earlier summary:"
TOOLS_LABEL = "Tool calls:"
USER_SECTION_HEADING = "User messages, oldest first:"
MIN_USER_CHARS = 80
"""Per-message floor when many user messages must share the budget."""
KEY_ARGUMENTS = ("command", "pattern", "query", "path", "url", "ref", "file_path", "file", "glob", "name")
"""The argument a tool call line shows, the first present (a search also shows its path: "`parse_args` in src")."""
KEY_ARGUMENT_CHARS = 100
ERROR_CHARS = 80
_SHELL_EXIT_RE = re.compile(r"^(?:(Timed out)[^\n]*\n)?exit code: (-?\d+|None)")


def cut_middle(text: str, limit: int) -> str:
    """``text`` on one line (whitespace collapsed), cut to about ``limit`` characters as head … tail at word
    boundaries."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    budget = max(limit - 3, 2)
    head_len = budget * 2 // 3
    tail_len = budget - head_len
    head = flat[:head_len]
    space = head.rfind(" ")
    if space > head_len // 2:
        head = head[:space]
    tail = flat[len(flat) - tail_len :]
    space = tail.find(" ")
    if 0 <= space < tail_len // 2:
        tail = tail[space + 1 :]
    return f"{head.rstrip()} … {tail.lstrip()}"


@dataclass(frozen=True)
class ToolCallLine:
    """One tool call of a stretch: its name, key argument and outcome."""

    name: str
    argument: str
    outcome: str

    def render(self) -> str:
        argument = f" {self.argument}" if self.argument else ""
        return f"- {self.name}{argument}: {self.outcome}"


def _key_argument(args_text: str) -> str:
    try:
        args: Any = json.loads(args_text) if args_text.strip() else {}
    except ValueError:
        return cut_middle(args_text, KEY_ARGUMENT_CHARS)
    if not isinstance(args, dict):
        return cut_middle(args_text, KEY_ARGUMENT_CHARS)
    chosen: tuple[str, str] | None = None
    for key in KEY_ARGUMENTS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            chosen = key, value
            break
    if chosen is None:
        for key, value in args.items():
            if isinstance(value, str) and value.strip():
                chosen = str(key), value
                break
    if chosen is None:
        return ""
    key, value = chosen
    shown = cut_middle(value, KEY_ARGUMENT_CHARS)
    if key in ("command", "pattern", "query", "glob") and "`" not in shown:
        shown = f"`{shown}`"
    where = args.get("path")
    if key in ("pattern", "query") and isinstance(where, str) and where.strip() not in ("", "."):
        shown += f" in {cut_middle(where, KEY_ARGUMENT_CHARS)}"
    return shown


def _first_line(text: str) -> str:
    line = next((stripped for raw in text.splitlines() if (stripped := raw.strip())), "")
    return cut_middle(line, ERROR_CHARS)


def _outcome(result: PartView | None) -> str:
    """ok / failed (with why) / denied / interrupted, from the call's result."""
    if result is None:
        return "no result"
    if result.kind == "retry" or result.outcome == "retried":
        return f"failed: {_first_line(result.text)}"
    if result.outcome in ("denied", "interrupted"):
        return result.outcome
    if result.outcome == "failed":
        return f"failed: {_first_line(result.text)}"
    text = result.text.lstrip()
    if text.startswith("Error:"):
        return f"failed: {_first_line(text[len('Error:') :])}"
    shell = _SHELL_EXIT_RE.match(text)
    if shell is not None:
        if shell.group(1):
            return "failed (timed out)"
        if shell.group(2) not in ("0",):
            return f"failed (exit {shell.group(2)})"
    return "ok"


def tool_call_lines(messages: Sequence[ModelMessage]) -> list[ToolCallLine]:
    """One line per tool call of ``messages``, in order, with the outcome of its result."""
    results: dict[str, PartView] = {}
    calls: list[PartView] = []
    for message in messages:
        for view in views(message):
            if view.kind == "tool-call":
                calls.append(view)
            elif view.kind in ("tool-return", "retry") and view.tool_call_id and view.tool_name:
                results[view.tool_call_id] = view
    return [
        ToolCallLine(call.tool_name or "?", _key_argument(call.text), _outcome(results.get(call.tool_call_id or "")))
        for call in calls
    ]


def _tool_section(lines: list[ToolCallLine], budget: int) -> list[str]:
    """Rendered lines, repeats folded ("×3"); past ``budget`` characters the middle becomes one count line."""
    folded: list[tuple[ToolCallLine, int]] = []
    for line in lines:
        if folded and folded[-1][0] == line:
            folded[-1] = (line, folded[-1][1] + 1)
        else:
            folded.append((line, 1))
    rendered = [line.render() + (f" (×{count})" if count > 1 else "") for line, count in folded]
    if sum(len(r) + 1 for r in rendered) <= budget:
        return rendered
    head, tail, lo, hi = keep_ends(rendered, budget, reserve=80)  # room for the count line
    omitted = folded[lo : hi + 1]
    if not omitted:
        return head + tail
    names: Counter[str] = Counter()
    for line, count in omitted:
        names[line.name] += count
    summary = ", ".join(f"{name} ×{count}" for name, count in names.most_common())
    return [*head, f"- … {sum(names.values())} more tool calls: {summary}", *tail]


def keep_ends(lines: list[str], budget: int, *, reserve: int) -> tuple[list[str], list[str], int, int]:
    """The first and last lines that fit ``budget`` characters (less ``reserve``), taken alternately from
    both ends: (head, tail, lo, hi) where ``lines[lo : hi + 1]`` is what was left out."""
    head: list[str] = []
    tail: list[str] = []
    used = reserve
    lo, hi = 0, len(lines) - 1
    while lo <= hi:
        take_tail = len(tail) < len(head)
        candidate = lines[hi] if take_tail else lines[lo]
        if used + len(candidate) + 1 > budget:
            break
        used += len(candidate) + 1
        if take_tail:
            tail.insert(0, candidate)
            hi -= 1
        else:
            head.append(candidate)
            lo += 1
    return head, tail, lo, hi


_USER_SECTION_RE = re.compile(rf"^{re.escape(USER_SECTION_HEADING)}\n(?:.+\n?)*", re.MULTILINE)


def _summary_prose(message: ModelMessage) -> str:
    """An earlier summary's text without co's prefix, the user's words it carries (the user section lists
    them), its "Kept verbatim" lists (the ledger carries those) and the next step and changes it quoted (the
    digest's own quotes carry those)."""
    text = "\n".join(view.text for view in views(message) if view.kind == "user")
    if synthetic_kind(message) == "marker":
        return ""
    n = covers(message)
    prefix = SUMMARY_PREFIX.format(n=n) if n is not None else None
    if prefix and text.startswith(prefix):
        text = text[len(prefix) :]
    prose = split_kept_verbatim(text)[0].split(f"\n{LATEST_REQUEST_HEADING}\n", 1)[0]
    prose = prose.split(f"\n{USER_WORDS_HEADING}\n", 1)[0]
    if carried_info(message, CARRIED_KEY) is not None:
        prose = _USER_SECTION_RE.sub("", prose)  # an earlier digest's user messages: carried beside it
    for heading in (NEXT_STEP_HEADING, CHANGES_HEADING):  # quoted whole beside the digest (``compact``)
        prose = take_block(prose, heading)[0]
    prose = prose.strip()
    if prose.startswith(DIGEST_HEADING):  # carried by its content: its headings would nest once per compaction
        prose = prose.removeprefix(DIGEST_HEADING).lstrip().removeprefix(EARLIER_LABEL)
        prose = "\n".join(line for line in prose.split("\n") if line.strip() and line != TOOLS_LABEL)
    return prose.strip()


def _user_section(texts: list[str], budget: int, max_user_chars: int) -> list[str]:
    limit = max_user_chars
    while True:
        lines = [f"{i}. {cut_middle(text, limit)}" for i, text in enumerate(texts, start=1)]
        if sum(len(line) + 1 for line in lines) <= budget or limit <= MIN_USER_CHARS:
            break
        limit = max(MIN_USER_CHARS, limit * 3 // 4)
    if sum(len(line) + 1 for line in lines) <= budget:
        return lines
    # Still too long at the floor: the oldest and newest stay, the middle is counted (the ledger keeps
    # their identifiers).
    head, tail, lo, hi = keep_ends(lines, budget, reserve=60)
    omitted = hi - lo + 1
    return [*head, f"[… {omitted} user messages omitted …]", *tail] if omitted > 0 else head + tail


def extractive_digest(messages: Sequence[ModelMessage], *, max_user_chars: int = 300, max_chars: int = 6000) -> str:
    """A deterministic digest of ``messages`` of about ``max_chars`` characters at most: earlier summaries
    (bounded), every user message (each at most ``max_user_chars``, head … tail), one line per tool call
    and a "Kept verbatim" list of the identifiers the rest lacks. Empty when there is nothing to digest."""
    summaries = [prose for m in messages if is_summary(m) and (prose := _summary_prose(m))]
    user_texts = [entry.text for entry in user_entries(messages)[0]]
    calls = tool_call_lines(messages)
    identifiers = extract_identifiers(messages)
    if not (summaries or user_texts or calls or identifiers):
        return ""

    summary_budget = max_chars // 4
    ledger_budget = max_chars // 4
    tool_budget = max_chars // 6
    sections: list[str] = [DIGEST_HEADING]
    if summaries:
        share = max(summary_budget // len(summaries), 200)
        carried = "\n\n".join(cut_lines(prose, share) for prose in summaries)
        sections.append(f"{EARLIER_LABEL}\n{carried}")
    used = sum(len(section) + 2 for section in sections)
    tool_lines = _tool_section(calls, tool_budget) if calls else []
    tools_used = sum(len(line) + 1 for line in tool_lines) + 20 if tool_lines else 0
    user_budget = max(max_chars - used - tools_used - ledger_budget, max_chars // 4)
    if user_texts:
        sections.append(f"{USER_SECTION_HEADING}\n" + "\n".join(_user_section(user_texts, user_budget, max_user_chars)))
    if tool_lines:
        sections.append(f"{TOOLS_LABEL}\n" + "\n".join(tool_lines))
    body = "\n\n".join(sections)
    room = max(max_chars - len(body) - 2, 0)
    return append_missing(body, check_summary(body, identifiers), max_items=60, max_chars=min(room, ledger_budget * 2))


def cut_lines(text: str, limit: int) -> str:
    """``text`` kept line by line while it fits ``limit`` characters, then head … tail of what is left."""
    if len(text) <= limit:
        return text
    head_budget = limit * 2 // 3
    lines = text.split("\n")
    head: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > head_budget:
            break
        head.append(line)
        used += len(line) + 1
    rest = "\n".join(lines[len(head) :])
    remaining = max(limit - used, 40)
    return "\n".join([*head, cut_middle(rest, remaining)]) if rest else "\n".join(head)
