"""Session titles from the summarisation model, written in the background after the first exchange.

The first prompt is the title until then, and stays if the model fails or ``auto_title`` is off. A title is
saved only if the session still has its first-prompt title, so ``/rename`` (at any moment) always wins.
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING

from pydantic_ai import Agent
from pydantic_ai.models import Model

from co_cli.session.metering import UsageMeter
from co_cli.store.sessions import normalize_title

if TYPE_CHECKING:
    from co_cli.store.sessions import SessionStore

TITLE_MAX_WORDS = 8
PROMPT_CHARS = 2000
TITLE_INSTRUCTIONS = (
    "You name conversations. Reply with a title of at most 8 words for the conversation you are shown: "
    "plain words, no quotes, no trailing punctuation, nothing else."
)


def clean_title(text: str) -> str:
    """The model's answer as a title: its first non-empty line, without quotes, markup or a trailing period,
    at most TITLE_MAX_WORDS words; '' if nothing is left."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    line = re.sub(r"^(title\s*:\s*)", "", line.strip(), flags=re.IGNORECASE)
    line = line.strip().strip("\"'`*#_ ").rstrip(".!:;, ")
    words = line.split()
    return normalize_title(" ".join(words[:TITLE_MAX_WORDS]))


def title_request(prompt: str, answer: str) -> str:
    return (
        f"The user wrote:\n{prompt[:PROMPT_CHARS]}\n\nThe assistant answered:\n{answer[:PROMPT_CHARS]}\n\n"
        "Title (at most 8 words):"
    )


async def write_title(
    store: SessionStore, session_id: str, first_title: str, model: Model, prompt: str, answer: str
) -> str | None:
    """Ask ``model`` for a title and save it unless the session was renamed meanwhile; the title saved, or None
    (a failure of any kind keeps the first-prompt title). The call's usage is saved as the "title" spend."""
    from co_cli.store.usage import record_usage

    meter = UsageMeter(model, "title")
    try:
        agent: Agent[None, str] = Agent(meter, output_type=str, instructions=TITLE_INSTRUCTIONS)
        result = await agent.run(title_request(prompt, answer))
        title = clean_title(result.output)
    except asyncio.CancelledError:
        raise
    except Exception:
        title = ""
    usage = meter.drain()
    try:
        if usage is not None:
            record_usage(store, session_id, usage)
        if not title:
            return None
        with store._lock, store._write() as conn:
            changed = conn.execute(
                "UPDATE sessions SET title = ? WHERE id = ? AND title = ?", (title, session_id, first_title)
            ).rowcount
    except Exception:  # the store closed or failed meanwhile: the first-prompt title stays
        return None
    return title if changed else None
