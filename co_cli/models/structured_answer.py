"""One structured answer from a model, in one request, in the strongest mode the model enforces.

- ``native``: the provider constrains the answer to the output's JSON schema (pydantic-ai's
  ``NativeOutput``), where the model's profile says it can: the embedded engine (a sampling grammar built
  from the schema), OpenAI, and the other providers whose pydantic-ai profile supports it. A server at a
  ``base_url`` or Ollama's is not assumed to (``co_cli.models`` says so in its profile): nothing tells co
  which server it is, and one that ignores the schema would leave a small model to answer in prose.
- ``tool``: a forced call of pydantic-ai's output tool (``tool_choice: required``). Some servers
  (llama.cpp-based ones among them) ignore it and let the model answer in text: a text answer that holds the
  JSON object (bare or in a fenced block) is accepted, validated by the same model; a prose answer raises
  ``ProseAnswer``, and the caller switches to ``prompted``.
- ``prompted``: the JSON schema goes in the instructions and the answer's text is parsed (pydantic-ai's
  ``PromptedOutput``): after a prose answer, or for a model whose profile asks for it.

An answer that holds no valid object raises ``ProseAnswer`` with its text, in any mode; in native mode it is
``constrained`` (the answer was held to the schema, so it was cut at the token cap: nothing is learnt about
the server). Nothing is retried inside the call: a failing answer costs one request.

Used by memory extraction and by the summariser (``context.summarize``), which streams its request so that
the time limit bounds the silences of a long answer, not its length.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

if TYPE_CHECKING:
    from pydantic_ai.models import Model
    from pydantic_ai.settings import ModelSettings

T = TypeVar("T", bound=BaseModel)
AnswerMode = Literal["native", "tool", "prompted"]
_FENCED = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


class ProseAnswer(Exception):
    """The model answered in prose where a structured answer was asked (its server ignores a forced tool, or
    the model did not follow the schema it was shown)."""

    def __init__(self, text: str, *, constrained: bool = False) -> None:
        super().__init__(f"the model answered in prose, not with the object asked for: {text[:80]!r}")
        self.text = text
        self.constrained = constrained
        """The answer was held to the schema (native mode): it fell short of the object (cut at the token cap),
        which says nothing about whether the server honours structured output."""


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
    """Whether ``model`` answers a structured request as prompted JSON anyway (see ``answer_mode``), so asking
    again in ``prompted`` mode would only repeat the same request."""
    return not isinstance(model, str) and answer_mode(model) == "prompted"


def answer_mode(model: Model, *, prompted: bool = False) -> AnswerMode:
    """The strongest mode ``model``'s profile says it enforces (``prompted``: the caller asks for prompted JSON)."""
    profile = model.profile
    if prompted:
        return "prompted"
    if profile.get("supports_json_schema_output", False):
        return "native"
    if profile.get("supports_tools", True) and profile.get("default_structured_output_mode", "tool") != "prompted":
        return "tool"
    return "prompted"


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
    from pydantic_ai import Agent, NativeOutput, PromptedOutput, ToolOutput, capture_run_messages
    from pydantic_ai.exceptions import UnexpectedModelBehavior
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models import infer_model

    # one right answer, not a creative one (dropped where unsupported); the caller's settings add to it
    settings: ModelSettings = {"temperature": 0.0, **(model_settings or {})}
    handler = _ignore_events if stream else None
    resolved = infer_model(model) if isinstance(model, str) else model
    mode = answer_mode(resolved, prompted=prompted)
    kinds = {"native": NativeOutput, "tool": ToolOutput, "prompted": PromptedOutput}
    agent = Agent(
        resolved, output_type=kinds[mode](output), instructions=instructions, retries=0, model_settings=settings
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
                raise ProseAnswer(text, constrained=mode == "native") from None
            return found
