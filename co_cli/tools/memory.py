"""The agent's memory tools: remember, recall, forget.

remember and forget change what every later session is sent (a standing instruction is obeyed in any
directory), so like every tool that changes something they need the user's approval: asked in the terminal,
denied without one unless ``--approve-all``. An approved memory is active at once, and its result line
(``remembered m12: ...  (/forget m12)``) is shown to the user as it happens; every change is logged and
``co memory undo`` reverts it. The tools are offered only when memory is on and the conversation is saved.
"""

from __future__ import annotations

from typing import Literal

from pydantic_ai import ApprovalRequired, RunContext
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset

from co_cli.deps import CoDeps
from co_cli.errors import CoError
from co_cli.memory.expansion import search_with_topics
from co_cli.memory.retrieval import query_terms

MEMORY_TOOL_NAMES = ("remember", "recall", "forget")
RECALL_LIMIT = 10
REMEMBER_REASON = "saves a memory that later sessions are sent"
INSTRUCTION_REASON = "saves a standing instruction that every later session follows"
FORGET_REASON = "forgets a saved memory"


def _approved(ctx: RunContext[CoDeps], reason: str) -> None:
    """Raise ``ApprovalRequired`` unless the user approved this call."""
    if not ctx.tool_call_approved:
        raise ApprovalRequired(metadata={"reason": reason})


def remember(
    ctx: RunContext[CoDeps],
    text: str,
    kind: Literal["fact", "preference", "instruction"] = "fact",
    scope: Literal["user", "project"] = "user",
    replaces: str | None = None,
) -> str:
    """Save one durable fact, preference or standing instruction for later sessions. Use it when the user
    asks you to remember something, or states something lasting about themselves or the project. Never save
    secrets, passwords or keys.

    Args:
        text: one standalone statement, e.g. "The user prefers tabs over spaces".
        kind: fact, preference, or instruction (a standing rule for every session).
        scope: user (everywhere) or project (only in this repository).
        replaces: the id (e.g. m12) of a memory this one corrects; that one is forgotten.
    """
    _approved(ctx, INSTRUCTION_REASON if kind == "instruction" else REMEMBER_REASON)
    memories = ctx.deps.store.memories
    try:
        if replaces:
            memory = memories.replace(replaces, text, actor="model", kind=kind)
            return f"remembered {memory.ref} (replaces {replaces.strip()}): {memory.text}  (/forget {memory.ref})"
        memory = memories.add(
            text,
            actor="model",
            kind=kind,
            scope=scope,
            project=ctx.deps.project,
            source_session=ctx.deps.session_id,
            source_seq=ctx.deps.state.turn_seq,
        )
    except CoError as exc:
        return f"not remembered: {exc.message}"
    return f"remembered {memory.ref}: {memory.text}  (/forget {memory.ref})"


def recall(ctx: RunContext[CoDeps], query: str) -> str:
    """Search the memories of earlier sessions (this project's and the user's).

    Args:
        query: words to look for.
    """
    terms = query_terms(query) or query.split()
    direct, by_topic = search_with_topics(ctx.deps.store.memories, terms, ctx.deps.project, RECALL_LIMIT)
    hits = [*direct, *by_topic][:RECALL_LIMIT]
    if not hits:
        return f"No memories match {query!r}."
    return "\n".join(f"[{h.memory.ref}] ({h.memory.kind}, {h.memory.scope}) {h.memory.text}" for h in hits)


def forget(ctx: RunContext[CoDeps], memory_id: str) -> str:
    """Forget a memory that is wrong or no longer true (the user can undo it).

    Args:
        memory_id: its id, e.g. m12.
    """
    _approved(ctx, FORGET_REASON)
    try:
        memory = ctx.deps.store.memories.forget(memory_id, actor="model")
    except CoError as exc:
        return f"not forgotten: {exc.message}"
    return f"forgot {memory.ref}: {memory.text}  (co memory undo restores it)"


def _offered(ctx: RunContext[CoDeps], tool_def: ToolDefinition) -> bool:
    return ctx.deps.memory_on


def memory_function_toolset() -> FunctionToolset[CoDeps]:
    return FunctionToolset[CoDeps]([remember, recall, forget], id="co-memory")


def build_memory_toolset() -> AbstractToolset[CoDeps]:
    """The memory tools, offered only while memory is on and the conversation is saved."""
    return memory_function_toolset().filtered(_offered)
