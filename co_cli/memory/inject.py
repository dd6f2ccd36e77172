"""The agent's instructions sections that memory adds: the instructions files and the ``## Memory`` section."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from co_cli.memory.instructions_files import InstructionsFiles, load_instructions_files, project_root
from co_cli.memory.retrieval import Scored, query_terms, rank, select

if TYPE_CHECKING:
    from co_cli.deps import CoDeps
    from co_cli.store.memories import Memories

HEADING = "## Memory"
CANDIDATES = 50
INTRO = (
    "What you remember from earlier sessions (the user reviews these; ids in brackets). Use what is relevant; "
    "follow the instructions. Save new durable facts with remember, drop wrong ones with forget."
)


def instructions_files(deps: CoDeps) -> InstructionsFiles:
    """The instructions files of this working directory (read once per conversation)."""
    if deps.instructions_files is None:
        deps.instructions_files = load_instructions_files(
            deps.cwd, deps.settings.config_dir, deps.settings.instructions_files_max_tokens
        )
    return deps.instructions_files


def project_key(deps: CoDeps) -> str:
    """What project-scope memories of this working directory are filed under."""
    if deps.project is None:
        deps.project = str(project_root(deps.cwd))
    return deps.project


def memory_on(deps: CoDeps) -> bool:
    return bool(deps.settings.memory) and deps.store is not None


def prompt_text(prompt: str | Sequence[Any] | None) -> str:
    if prompt is None:
        return ""
    if isinstance(prompt, str):
        return prompt
    return " ".join(item for item in prompt if isinstance(item, str))


def relevant_memories(store: Memories, prompt: str, project: str, budget_tokens: int, now: float) -> list[Scored]:
    """The memories for a request about ``prompt``: instructions first, then the best matches, within budget."""
    if budget_tokens <= 0:
        return []
    instructions = [Scored(m.id, m.text, m.kind, 1.0) for m in store.instructions(project)]
    terms = query_terms(prompt)
    candidates = store.search(terms, project=project, limit=CANDIDATES) if terms else []
    ranked = rank(((c.memory.id, c.memory.text, c.memory.kind, c.bm25, c.memory.updated_at) for c in candidates), now)
    return select(instructions, ranked, budget_tokens)


def render_memory_section(chosen: Sequence[Scored]) -> str:
    if not chosen:
        return ""
    lines = [HEADING, INTRO]
    for item in chosen:
        label = " (instruction)" if item.kind == "instruction" else ""
        lines.append(f"- [m{item.id}]{label} {item.text}")
    return "\n".join(lines)


def memory_section(deps: CoDeps, prompt: str | Sequence[Any] | None) -> str:
    """The ``## Memory`` section for this request (empty when memory is off); what it holds is kept on
    ``deps.memory_used`` for /memory and /context."""
    if not memory_on(deps):
        deps.memory_used = []
        return ""
    assert deps.store is not None
    chosen = relevant_memories(
        deps.store.memories,
        prompt_text(prompt),
        project_key(deps),
        deps.settings.memory_budget_tokens,
        time.time(),
    )
    deps.memory_used = chosen
    return render_memory_section(chosen)


def memory_report_tokens(deps: CoDeps) -> dict[str, int]:
    """For /context: tokens of the instructions files and of the last request's memory section."""
    from co_cli.text_tokens import estimate_text_tokens

    return {
        "instructions_files_tokens": instructions_files(deps).tokens,
        "memory_tokens": estimate_text_tokens(render_memory_section(deps.memory_used)),
    }
