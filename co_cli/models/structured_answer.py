"""One structured answer from a model, on any OpenAI-compatible server or the embedded engine, in one request.

Servers differ in what they enforce: most honour a forced tool call (pydantic-ai's output tool with
``tool_choice: required``), some (llama.cpp-based ones among them) ignore it and let the model answer in
text. In ``tool`` mode a text answer that holds the JSON object (bare or in a fenced block) is accepted,
validated by the same model; a prose answer raises ``ProseAnswer``, and the caller switches to ``prompted``
mode: the JSON schema goes in the instructions and the answer's text is parsed (pydantic-ai's
``PromptedOutput``). A model whose profile asks for prompted output (the embedded engine) gets it in either
mode. A prompted answer that holds no valid object raises ``ProseAnswer`` too, with its text. Either way
nothing is retried inside the call: a failing answer costs one request.

Used by memory extraction and by the summariser (``context.summarize``), which streams its request so that
the time limit bounds the silences of a long answer, not its length.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

if TYPE_CHECKING:
    from pydantic_ai.models import Model
    from pydantic_ai.settings import ModelSettings

T = TypeVar("T", bound=BaseModel)
_FENCED = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


class ProseAnswer(Exception):
    """The model answered in prose where a structured answer was asked (its server ignores a forced tool, or
    the model did not follow the schema it was shown)."""

    def __init__(self, text: str) -> None:
        super().__init__(f"the model answered in prose, not with the object asked for: {text[:80]!r}")
        self.text = text


def json_in_text(text: str, output: type[T]) -> T | None:
    """The ``output`` object a text answer holds (a bare JSON object or one in a fenced block), or None."""
    candidates = [m.group(1) for m in _FENCED.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return output.model_validate(json.loads(candidate))
        except (ValueError, ValidationError):
            continue
    return None


def prompted_by_default(model: Model | str) -> bool:
    """Whether ``model`` answers a structured request as prompted JSON anyway (its profile says so: the
    embedded engine), so asking again in ``prompted`` mode would only repeat the same request."""
    profile = getattr(model, "profile", None)
    return isinstance(profile, dict) and profile.get("default_structured_output_mode") == "prompted"


async def _ignore_events(ctx: Any, events: Any) -> None:
    async for _ in events:
        pass


async def ask(
    model: Model | str,
    output: type[T],
    instructions: str,
    prompt: str,
    *,
    prompted: bool = False,
    model_settings: ModelSettings | None = None,
    stream: bool = False,
) -> T:
    """``prompt`` answered as an ``output`` object: one request, no retries (see the module's doc).
    ``model_settings`` add to temperature 0; ``stream`` sends the request streamed."""
    from pydantic_ai import Agent, PromptedOutput, capture_run_messages
    from pydantic_ai.exceptions import UnexpectedModelBehavior
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

    # one right answer, not a creative one (dropped where unsupported); the caller's settings add to it
    settings: ModelSettings = {"temperature": 0.0, **(model_settings or {})}
    handler = _ignore_events if stream else None
    agent = Agent(
        model,
        output_type=PromptedOutput(output) if prompted else output,
        instructions=instructions,
        retries=0,
        model_settings=settings,
    )
    with capture_run_messages() as messages:
        try:
            return (await agent.run(prompt, event_stream_handler=handler)).output
        except UnexpectedModelBehavior:
            responses = [m for m in messages if isinstance(m, ModelResponse)]
            if not responses or any(isinstance(p, ToolCallPart) for p in responses[-1].parts):
                raise  # no answer, or a malformed tool call: a failure, not a server without forced tools
            text = "".join(p.content for p in responses[-1].parts if isinstance(p, TextPart))
            found = json_in_text(text, output)
            if found is None:
                raise ProseAnswer(text) from None
            return found
