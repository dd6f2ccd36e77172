"""The chat agent's instructions: co's own text, the instructions files, the session's pins and the memories
retrieved for the request."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import date
from typing import Any

from co_cli.deps import CoDeps
from co_cli.memory.inject import prompt_text, relevant_memories, render_memory_section
from co_cli.text_tokens import estimate_text_tokens


def instructions_text(deps: CoDeps) -> str:
    """The instructions that stay the same for the whole conversation (the memory section varies per request)."""
    files = deps.instructions_files.section
    return _base_instructions(deps) + (f"\n\n{files}" if files else "")


def _base_instructions(deps: CoDeps) -> str:
    return (
        "You are co, a helpful assistant in the user's terminal. Answer concisely in Markdown.\n"
        f"Working directory: {deps.cwd}\nToday: {date.today().isoformat()}\n"
        "You can read files (read_file, list_dir, grep) in the working directory and run shell commands "
        "(run_shell); the user approves each command. If the user denies a tool call, do not retry it: "
        "continue without it or ask what they prefer. Large tool outputs may be saved for you as a ref: page "
        "through them with read_tool_output. Earlier parts of a long conversation may be summarised; use "
        "search_conversation_history to look up details that the summary left out. Once a tool result "
        "arrives, answer the user in plain language."
    ) + pins_section(deps.state.pin_texts())


def pins_section(pins: list[str]) -> str:
    """The user's pinned standing instructions, verbatim (they hold for the whole session)."""
    if not pins:
        return ""
    lines = "\n".join(f"- {pin}" for pin in pins)
    return f"\n\n## Standing instructions from the user (always follow these)\n{lines}"


def memory_section(deps: CoDeps, prompt: str | Sequence[Any] | None) -> str:
    """The ``## Memory`` section for this request (empty when memory is off); what it holds is kept in the
    session state for /memory and /context."""
    if not deps.memory_on:
        deps.state.memory_used = []
        return ""
    chosen = relevant_memories(
        deps.store.memories,
        prompt_text(prompt),
        deps.project,
        deps.settings.memory_budget_tokens,
        time.time(),
    )
    deps.state.memory_used = chosen
    return render_memory_section(chosen)


def memory_report_tokens(deps: CoDeps) -> dict[str, int]:
    """For /context: tokens of the instructions files and of the last request's memory section."""
    return {
        "instructions_files_tokens": deps.instructions_files.tokens,
        "memory_tokens": estimate_text_tokens(render_memory_section(deps.state.memory_used)),
    }
