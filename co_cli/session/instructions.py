"""The chat agent's instructions: co's own text, the instructions files, the session's pins and task list, and
the memories retrieved for the request."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import date
from typing import Any

from co_cli.deps import CoDeps, Task
from co_cli.memory.inject import prompt_text, relevant_memories, render_memory_section
from co_cli.text_tokens import estimate_text_tokens
from co_cli.tools.tasks import in_force, tasks_section


def instructions_text(deps: CoDeps, *, lean: bool = False) -> str:
    """The instructions that stay the same for the whole conversation (the memory section varies per request);
    ``lean``: co's own part in a few lines, for a small window."""
    files = deps.instructions_files.section
    base = _lean_instructions(deps) if lean else _base_instructions(deps)
    return base + (f"\n\n{files}" if files else "") + _tasks_part(deps)


def _lean_instructions(deps: CoDeps) -> str:
    return (
        "You are co, a helpful assistant in the user's terminal. Answer concisely.\n"
        f"Working directory: {deps.cwd}\nToday: {date.today().isoformat()}\n"
        "Tools: read_file, edit_file, write_file, run_shell (the user approves each change and command)."
    ) + pins_section(deps.state.pin_texts())


def _base_instructions(deps: CoDeps) -> str:
    return (
        "You are co, a helpful assistant in the user's terminal. Answer concisely in Markdown.\n"
        f"Working directory: {deps.cwd}\nToday: {date.today().isoformat()}\n"
        "You can read files (read_file, list_dir, grep) in the working directory, change them (edit_file for "
        "part of a file, write_file for a new or whole file: the user approves each change, shown as a diff; "
        "never use the shell to change a file) and run shell commands (run_shell); the user approves each "
        "command. If the user denies a tool call, do not retry it: "
        "continue without it or ask what they prefer. Large tool outputs may be saved for you as a ref: page "
        "through them with read_tool_output. Earlier parts of a long conversation may be summarised; use "
        "search_conversation_history to look up details that the summary left out. Once a tool result "
        "arrives, answer the user in plain language."
    ) + pins_section(deps.state.pin_texts())


def _tasks_part(deps: CoDeps) -> str:
    section = tasks_section(tasks_in_force(deps), deps.settings.tasks_budget_tokens)
    return f"\n\n{section}" if section else ""


def tasks_in_force(deps: CoDeps) -> list[Task]:
    """The task list the model is sent: without done tasks older than ``tasks_keep_done_hours``."""
    return in_force(deps.state.tasks, deps.clock(), deps.settings.tasks_keep_done_hours)


def pins_section(pins: list[str]) -> str:
    """The user's pinned standing instructions, verbatim (they hold for the whole session)."""
    if not pins:
        return ""
    lines = "\n".join(f"- {pin}" for pin in pins)
    return f"\n\n## Standing instructions from the user (always follow these)\n{lines}"


def memory_section(deps: CoDeps, prompt: str | Sequence[Any] | None) -> str:
    """The ``## Memory`` section for this request (empty when memory is off); what it holds is kept in the
    session state for /memory and /context, and added to what the running turn was sent."""
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
    for memory in chosen:
        deps.state.memory_sent.setdefault(memory.id, memory)
    return render_memory_section(chosen)


def memory_report_tokens(deps: CoDeps) -> dict[str, int]:
    """For /context: tokens of the instructions files, the task list and the last request's memory section."""
    return {
        "instructions_files_tokens": deps.instructions_files.tokens,
        "tasks_tokens": estimate_text_tokens(_tasks_part(deps)),
        "memory_tokens": estimate_text_tokens(render_memory_section(deps.state.memory_used)),
    }
