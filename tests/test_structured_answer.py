"""structured_answer.ask picks the strongest mode a model's profile says it enforces (native JSON schema, a
forced output tool, prompted JSON) and spends exactly one request in each; FunctionModel and TestModel only."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.profiles import ModelProfile

from co_cli.config import Settings
from co_cli.local.model import LocalModel
from co_cli.models import ModelChoice, build_model
from co_cli.models.structured_answer import ProseAnswer, answer_mode, ask

pytestmark = pytest.mark.allow_model_requests


class Errand(BaseModel):
    what: str
    urgency: Literal["now", "later"]
    for_whom: str | None = None


class Errands(BaseModel):
    errands: list[Errand] = Field(default_factory=list)


ANSWER = {"errands": [{"what": "Brot kaufen", "urgency": "now"}, {"what": "llamar a Marta", "urgency": "later"}]}


def _settings(**values: Any) -> Settings:
    return Settings(data_dir="/nonexistent/data", config_dir="/nonexistent/config", **values)


class Seen:
    """What each request asked for, and the answer it gets in the mode it asked in."""

    def __init__(self, answer: dict[str, Any] | str = ANSWER) -> None:
        self.answer = answer
        self.modes: list[str] = []
        self.schemas: list[dict[str, Any] | None] = []
        self.instructions: list[str] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        params = info.model_request_parameters
        self.modes.append(params.output_mode)
        self.schemas.append(params.output_object.json_schema if params.output_object else None)
        self.instructions.append(info.instructions or "")
        text = self.answer if isinstance(self.answer, str) else json.dumps(self.answer)
        if info.output_tools:
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, text)])
        return ModelResponse(parts=[TextPart(text)])


# --- which mode --------------------------------------------------------------------------------------------


def test_the_mode_follows_what_the_profile_says_is_enforced(tmp_path: Path) -> None:
    assert answer_mode(FunctionModel(Seen())) == "native"  # FunctionModel's profile claims a JSON schema
    assert answer_mode(FunctionModel(Seen(), profile=ModelProfile(supports_json_schema_output=False))) == "tool"
    assert answer_mode(TestModel()) == "tool"
    no_tools = ModelProfile(supports_json_schema_output=False, supports_tools=False)
    assert answer_mode(FunctionModel(Seen(), profile=no_tools)) == "prompted"
    prefers_text = ModelProfile(supports_json_schema_output=False, default_structured_output_mode="prompted")
    assert answer_mode(FunctionModel(Seen(), profile=prefers_text)) == "prompted"
    # the caller's switch after a prose answer wins over everything
    assert answer_mode(FunctionModel(Seen()), prompted=True) == "prompted"
    # the embedded engine constrains sampling with the schema (no weights needed to read its profile)
    assert answer_mode(LocalModel(tmp_path / "absent.gguf")) == "native"


def test_a_server_co_cannot_name_gets_a_forced_tool_and_known_providers_their_schema(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-not-a-real-key")
    monkeypatch.delenv("OLLAMA_BASE_URL", raising=False)
    settings = _settings()
    server = build_model(ModelChoice("qwen2.5:7b", "test", base_url="http://127.0.0.1:9/v1"), settings)
    assert answer_mode(server) == "tool"
    assert answer_mode(build_model(ModelChoice("ollama:qwen2.5", "test"), settings)) == "tool"
    assert answer_mode(build_model(ModelChoice("openai:gpt-5-mini", "test"), settings)) == "native"
    # pydantic-ai's own word per model: an older Anthropic model has no structured output, a newer one has
    assert answer_mode(build_model(ModelChoice("anthropic:claude-3-5-haiku-latest", "test"), settings)) == "tool"
    assert answer_mode(build_model(ModelChoice("anthropic:claude-sonnet-4-5", "test"), settings)) == "native"


# --- one request in each mode ----------------------------------------------------------------------------------


def test_native_mode_sends_the_schema_and_reads_the_json_text() -> None:
    seen = Seen()
    answer = asyncio.run(ask(FunctionModel(seen), Errands, "List the errands.", "Kauf Brot und ruf Marta an."))
    assert answer == Errands.model_validate(ANSWER)
    assert seen.modes == ["native"]
    schema = seen.schemas[0]
    assert schema is not None and "errands" in schema["properties"] and "Errand" in schema["$defs"]
    assert "List the errands." in seen.instructions[0]


def test_tool_mode_and_prompted_mode_are_kept_for_models_without_a_schema() -> None:
    tool_only = ModelProfile(supports_json_schema_output=False)
    seen = Seen()
    asyncio.run(ask(FunctionModel(seen, profile=tool_only), Errands, "List the errands.", "Buy milk"))
    asyncio.run(ask(FunctionModel(seen, profile=tool_only), Errands, "List the errands.", "Buy milk", prompted=True))
    assert seen.modes == ["tool", "prompted"]
    assert seen.schemas[0] is None and '"errands"' in seen.instructions[1]  # prompted: the schema is in the text


def test_a_native_answer_cut_short_is_no_object_but_says_nothing_about_the_server() -> None:
    """A schema-held answer cut at the token cap holds no object (``ProseAnswer`` with its text, so the caller
    can ask again or use the text), marked ``constrained``: unlike prose, it is no sign that the server ignores
    structured output, and nothing switches to prompted JSON for good because of it."""
    seen = Seen('{"errands": [{"what": "Milch kaufen", "urg')
    with pytest.raises(ProseAnswer) as failure:
        asyncio.run(ask(FunctionModel(seen), Errands, "List the errands.", "Milch kaufen"))
    assert failure.value.constrained and failure.value.text.startswith('{"errands"')
    assert seen.modes == ["native"]


def test_a_prose_answer_to_a_forced_tool_still_asks_the_caller_for_prompted_json() -> None:
    def prose(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("Сначала хлеб, потом звонок.")])

    model = FunctionModel(prose, profile=ModelProfile(supports_json_schema_output=False))
    with pytest.raises(ProseAnswer) as failure:
        asyncio.run(ask(model, Errands, "List the errands.", "Купи хлеб и позвони Марте."))
    assert not failure.value.constrained
