"""The chat agent: instructions, tools and capabilities around the chosen model."""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING, Any

from co_cli.deps import CoDeps
from co_cli.models import request_time_limits

if TYPE_CHECKING:
    from pydantic_ai import Agent
    from pydantic_ai.models import Model


def instructions_text(deps: CoDeps) -> str:
    """The instructions that stay the same for the whole conversation (the memory section varies per request)."""
    from co_cli.memory.inject import instructions_files

    files = instructions_files(deps).section
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
    ) + pins_section(deps.pins)


def pins_section(pins: list[str]) -> str:
    """The user's pinned standing instructions, verbatim (they hold for the whole session)."""
    if not pins:
        return ""
    lines = "\n".join(f"- {pin}" for pin in pins)
    return f"\n\n## Standing instructions from the user (always follow these)\n{lines}"


def build_agent(model: Model, *, capabilities: list[Any], request_timeout: float = 120.0) -> Agent[CoDeps, str]:
    from pydantic_ai import Agent, RunContext

    from co_cli.memory.inject import memory_section
    from co_cli.memory.tools import build_memory_toolset
    from co_cli.tools import build_toolset
    from co_cli.tools.history import build_history_toolset

    def instructions(ctx: RunContext[CoDeps]) -> str:
        memory = memory_section(ctx.deps, ctx.prompt)
        return instructions_text(ctx.deps) + (f"\n\n{memory}" if memory else "")

    return Agent(
        model,
        deps_type=CoDeps,
        output_type=str,
        instructions=instructions,
        toolsets=[build_toolset(), build_history_toolset(), build_memory_toolset()],
        capabilities=capabilities,
        model_settings=request_time_limits(model, request_timeout),
    )
