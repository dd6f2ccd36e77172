"""Tools over what context governance moved out of the model's view: the transcript and offloaded outputs."""

from __future__ import annotations

from datetime import datetime

from pydantic_ai import RunContext
from pydantic_ai.toolsets import FunctionToolset

from co_cli.context.offload import read_tool_output as read_offloaded
from co_cli.deps import CoDeps
from co_cli.tools.blocking import run_blocking

QUERY_SHOWN_CHARS = 200


async def search_conversation_history(ctx: RunContext[CoDeps], query: str, limit: int = 8) -> str:
    """Full-text search over this conversation's complete transcript, including parts that were summarised away.

    Args:
        query: words to look for.
        limit: maximum number of matches.
    """
    session_id = ctx.deps.session_id
    if session_id is None:
        return "No transcript to search yet (this conversation has no messages)."
    # In a thread a cancelled turn abandons; the query itself ends soon after (it holds the store's lock).
    hits = await run_blocking(
        lambda stop: ctx.deps.store.search.messages(
            query, session_id=session_id, limit=max(1, min(limit, 50)), stop=lambda: stop.is_set
        )
    )
    shown = repr(query) if len(query) <= QUERY_SHOWN_CHARS else repr(query[:QUERY_SHOWN_CHARS]) + "…"
    if not hits:
        return f"No matches for {shown} in this conversation."
    lines = [f"{len(hits)} match(es) for {shown}:"]
    for hit in hits:
        when = datetime.fromtimestamp(hit.created_at).strftime("%Y-%m-%d %H:%M")
        lines.append(f"- #{hit.seq} {hit.kind} at {when}: {hit.snippet}")
    return "\n".join(lines)


def read_tool_output(ctx: RunContext[CoDeps], ref: str, offset: int = 0, limit: int = 4000) -> str:
    """Read part of a large tool output that was saved to a file instead of being kept in the conversation.

    Args:
        ref: the ref given in the preview.
        offset: character offset to start at.
        limit: number of characters to read.
    """
    return read_offloaded(ctx.deps.tool_output_dir, ref, offset=offset, limit=limit)


def build_history_toolset() -> FunctionToolset[CoDeps]:
    return FunctionToolset([search_conversation_history, read_tool_output])
