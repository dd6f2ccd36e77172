"""Session titles from the summarisation model, written in the background after the first exchange.

The first prompt is the title until then, and stays if the model fails or ``auto_title`` is off. A title is
saved only if the session still has its first-prompt title, so ``/rename`` (at any moment) always wins.
"""

from __future__ import annotations

import asyncio
import re

from pydantic_ai import Agent
from pydantic_ai.models import Model

from co_cli.session.metering import UsageMeter
from co_cli.store.sessions import normalize_title
from co_cli.store.usage import TurnUsage

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


async def ask_title(model: Model, prompt: str, answer: str) -> tuple[str, TurnUsage | None]:
    """Ask ``model`` for a title of the exchange: the title ('' if the model failed in any way) and what the
    call spent (the "title" usage row, None if nothing was)."""
    meter = UsageMeter(model, "title")
    try:
        agent: Agent[None, str] = Agent(meter, output_type=str, instructions=TITLE_INSTRUCTIONS)
        result = await agent.run(title_request(prompt, answer))
        title = clean_title(result.output)
    except asyncio.CancelledError:
        raise
    except Exception:
        title = ""
    return title, meter.drain()
