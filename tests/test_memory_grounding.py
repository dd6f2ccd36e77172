"""The checks of what a model read against the user's message: they read characters, not a language, so they
hold for any script (quotes of a message without spaces included)."""

from __future__ import annotations

import asyncio

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles import ModelProfile

from co_cli.memory.extract import Reading
from co_cli.memory.grounding import (
    from_a_secret,
    grounded,
    in_their_words,
    names,
    normalise,
    quoted,
    said,
    shares_a_word,
)
from co_cli.models.structured_answer import ask

pytestmark = pytest.mark.allow_model_requests


@pytest.mark.parametrize(
    ("quote", "message"),
    [
        ("wohne ich in Leipzig", "Seit dem Sommer   wohne ich in Leipzig!"),
        ("i moved to lisbon", "I moved to Lisbon, finally."),
        ("“Tabs, nicht Leerzeichen”", 'Bitte: "Tabs, nicht Leerzeichen".'),
        ("京都に引っ越しました", "先月、京都に引っ越しました。"),
        ("大阪で働いています", "今は大阪で　働いています"),  # an ideographic space
        ("ＡＰＩ ｖ２", "the API v2 is ours"),  # full-width letters and digits (NFKC)
        ("живу в Казани", "Теперь я живу в Казани."),
    ],
)
def test_a_quote_is_found_in_any_script(quote: str, message: str) -> None:
    assert quoted(quote, message)


@pytest.mark.parametrize(
    ("quote", "message"),
    [
        ("I work as a data engineer", "Yesterday I finished the database migration"),
        ("京都に住んでいます", "先月、京都に引っ越しました。"),
        ("", "anything at all"),
        ("!", "Hello!"),
    ],
)
def test_a_quote_the_user_did_not_write_is_not_found(quote: str, message: str) -> None:
    assert not quoted(quote, message)


def test_normalising_ignores_case_spaces_and_punctuation() -> None:
    assert normalise("Straße, Ärger!") == normalise("STRASSE ärger") == "strasseärger"


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("My prompt is oh-my-posh and my-app ships with make", ["oh-my-posh", "my-app"]),
        ("Ich nutze jetzt Helix statt Vim", ["Helix", "Vim"]),
        ("Since May I'm at AWS, using iTerm", ["May", "AWS", "iTerm"]),
        ('The branch is called "release train"', ["release train"]),
        ("Kestrel is our billing service. Emacs is Dana's", ["Dana's"]),  # sentence starts are not names
        ("東京の会社で働いています", []),
    ],
)
def test_names_of_a_fact(text: str, found: list[str]) -> None:
    assert names(text) == found


def test_names_that_start_a_sentence_are_names_when_asked_for() -> None:
    assert names("Helix is my editor. Kiel too") == []
    assert names("Helix is my editor. Kiel too", starts=True) == ["Helix", "Kiel"]


@pytest.mark.parametrize(
    ("fact", "message"),
    [
        ("Ich arbeite seit 2021 bei Zalando", "seit 2021 arbeite ich bei zalando"),
        ("Dana's editor is Emacs", "my colleague Dana swears by emacs as her editor"),
        ("Я живу в Москве", "Теперь я живу в Москва-Сити"),  # another case ending of the same name
        ("My project my-app deploys on Fridays", "my-app deploys every friday"),
        ("私は東京に住んでいます", "東京に住んでいます"),
    ],
)
def test_names_and_numbers_the_user_wrote_are_grounded(fact: str, message: str) -> None:
    assert grounded(fact, message)


@pytest.mark.parametrize(
    ("fact", "message"),
    [
        ("Our deadline is June 4", "our deadline is June 3"),
        ("Lisbon is the capital of Portugal", "I moved to Lisbon last year"),
        ("Ich nutze Vim in der Firma Initech", "Ich nutze Vim"),
        ("The build uses Bazel 7", "the build uses bazel"),
    ],
)
def test_names_and_numbers_the_user_did_not_write_are_not(fact: str, message: str) -> None:
    assert not grounded(fact, message)


def test_a_person_is_said_with_another_ending_but_not_another_name() -> None:
    assert said("Ольгой", "Ольга пишет на Kotlin")
    assert said("佐藤", "同僚の佐藤さんは")
    assert not said("Olga", "Ольга пишет на Kotlin")


@pytest.mark.parametrize(
    ("terms", "text", "shares"),
    [
        (["moving"], "Tove moved to Malmö", True),
        (["umgezogen"], "Ich bin nach Köln umgezogen", True),
        (["go"], "Our services are written in Go", True),
        (["ines"], "a build tool in Go", False),  # the index stems "ines" to "in"
        (["reviews"], "Karin does our code reviewing", True),
        (["tea"], "I drink coffee", False),
    ],
)
def test_a_word_is_shared_as_characters(terms: list[str], text: str, shares: bool) -> None:
    assert shares_a_word(terms, text) is shares


@pytest.mark.parametrize(
    ("text", "message", "theirs"),
    [
        ("I moved to Lyon", "Oh, and I moved to Lyon last spring.", True),
        ("Wir deployen mit Helm", "Seit gestern deployen wir alles mit Helm", True),
        ("We deploy with Helm", "Seit gestern deployen wir alles mit Helm", False),
        ("家族と大阪に住んでいます", "今は家族と大阪に住んでいます。", True),
        ("I live in Osaka with my family", "今は家族と大阪に住んでいます。", False),
    ],
)
def test_a_statement_is_in_the_users_words_when_most_of_its_words_are_theirs(
    text: str, message: str, theirs: bool
) -> None:
    assert in_their_words(text, message) is theirs


def test_nothing_comes_from_the_sentence_that_holds_a_secret() -> None:
    message = "La base de staging usa password: pez-luna-42 desde ayer. Despliego los viernes"
    assert from_a_secret("La base de staging", message)
    assert not from_a_secret("Despliego los viernes", message)
    assert from_a_secret("GITHUB_TOKEN=abc123def456ghi7", "ok")


@pytest.mark.parametrize("native", [True, False])
def test_structured_answers_are_asked_for_at_temperature_zero(native: bool) -> None:
    seen: list[object] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append((info.model_settings or {}).get("temperature"))
        if info.output_tools:
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"facts": []})])
        return ModelResponse(parts=[TextPart('{"facts": []}')])

    profile = ModelProfile(supports_json_schema_output=native)
    asyncio.run(ask(FunctionModel(answer, profile=profile), Reading, "instructions", "prompt"))
    assert seen == [0.0]
