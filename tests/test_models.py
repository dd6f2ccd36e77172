"""Model resolution: explicit strings, base_url, auto order, errors, context windows."""

from __future__ import annotations

import contextlib

import pytest

from co_cli.config import Settings
from co_cli.errors import ModelConfigError
from co_cli.models import ASSUMED_CONTEXT_WINDOW, build_model, choose_model, context_window_for, resolve_model

PROVIDER_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    for key in PROVIDER_KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("CO_CLI_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("CO_CLI_CONFIG_DIR", str(tmp_path))


def settings(**kw: object) -> Settings:
    return Settings(**kw)  # type: ignore[arg-type]


def test_explicit_model_string_wins() -> None:
    choice = choose_model(settings(model="openai-chat:gpt-4o"), "environment")
    assert choice.spec == "openai-chat:gpt-4o"
    assert "environment" in choice.reason


def test_base_url_comes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "x")
    choice = choose_model(settings(base_url="http://127.0.0.1:9/v1", model="qwen"))
    assert choice.base_url and choice.spec == "qwen"
    assert "127.0.0.1" in choice.reason


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ({"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"}, "anthropic:"),
        ({"OPENAI_API_KEY": "o", "GEMINI_API_KEY": "g"}, "openai:"),
        ({"GEMINI_API_KEY": "g"}, "google:"),
        ({"GOOGLE_API_KEY": "g"}, "google:"),
    ],
)
def test_auto_picks_provider_by_key(monkeypatch: pytest.MonkeyPatch, keys: dict[str, str], expected: str) -> None:
    for key, value in keys.items():
        monkeypatch.setenv(key, value)
    choice = choose_model(settings())
    assert choice.spec.startswith(expected)
    assert "auto" in choice.reason


def test_auto_falls_back_to_local_or_explains(monkeypatch: pytest.MonkeyPatch) -> None:
    import co_cli.local.weights as weights

    monkeypatch.setattr(weights, "local_model_available", lambda: True)
    assert choose_model(settings()).spec == "local"
    monkeypatch.setattr(weights, "local_model_available", lambda: False)
    with pytest.raises(ModelConfigError) as err:
        choose_model(settings())
    assert "CO_CLI_MODEL" in err.value.message and "co-cli[local]" in err.value.message


def test_unknown_model_is_a_clear_error() -> None:
    with pytest.raises(ModelConfigError, match="unknown model"):
        build_model(choose_model(settings(model="gpt-nonsense")), settings())
    with pytest.raises(ModelConfigError, match="nosuchprovider"):
        build_model(choose_model(settings(model="nosuchprovider:model")), settings())


def test_missing_key_is_a_clear_error() -> None:
    with pytest.raises(ModelConfigError) as err:
        build_model(choose_model(settings(model="anthropic:claude-sonnet-4-5")), settings())
    assert "ANTHROPIC_API_KEY" in err.value.message


def test_compatible_server_never_gets_openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-secret")
    s = settings(base_url="http://127.0.0.1:9/v1", model="m", api_key="server-key")
    model = build_model(choose_model(s), s)
    client = model._provider.client  # type: ignore[attr-defined]
    assert client.api_key == "server-key"
    s2 = settings(base_url="http://127.0.0.1:9/v1", model="m")
    client2 = build_model(choose_model(s2), s2)._provider.client  # type: ignore[attr-defined]
    assert client2.api_key != "sk-openai-secret"


def test_context_window_sources() -> None:
    resolved = resolve_model(settings(model="test"))
    assert resolved.context_window == ASSUMED_CONTEXT_WINDOW
    assert "assumed" in resolved.window_source
    window, source = context_window_for(resolved.model, settings(context_window=32000))
    assert (window, source) == (32000, "context_window setting")


def test_ollama_defaults_to_localhost(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_BASE_URL", raising=False)
    model = build_model(choose_model(settings(model="ollama:qwen2.5")), settings())
    assert model.model_name == "qwen2.5"
    assert "127.0.0.1:11434" in str(model._provider.client.base_url)  # type: ignore[attr-defined]
    monkeypatch.setenv("OLLAMA_BASE_URL", "http://10.1.2.3:9999/v1")
    model = build_model(choose_model(settings(model="ollama:llama3.2")), settings())
    assert "10.1.2.3:9999" in str(model._provider.client.base_url)  # type: ignore[attr-defined]


def test_shown_reason_masks_url_credentials_but_the_client_gets_the_url() -> None:
    url = "http://bob:hunter2@127.0.0.1:9/v1?api-key=sk-in-query"
    choice = choose_model(settings(base_url=url, model="m"))
    assert "hunter2" not in choice.reason and "sk-in-query" not in choice.reason
    assert "127.0.0.1:9/v1" in choice.reason
    assert choice.base_url == url


@pytest.mark.parametrize(
    ("spec", "key", "provider_class"),
    [
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY", "AnthropicProvider"),
        ("openai:gpt-4o", "OPENAI_API_KEY", "OpenAIProvider"),
        ("openai-chat:gpt-4o", "OPENAI_API_KEY", "OpenAIProvider"),
    ],
)
def test_a_provider_prefixed_model_goes_to_its_provider_not_to_base_url(
    monkeypatch: pytest.MonkeyPatch, spec: str, key: str, provider_class: str
) -> None:
    """With CO_CLI_BASE_URL set, `-m anthropic:…` and `/model openai:…` were sent to that server."""
    s = settings(base_url="http://127.0.0.1:9/v1", model=spec, api_key="server-key")
    choice = choose_model(s, "command line")
    assert choice.base_url == "" and choice.spec == spec and "127.0.0.1" not in choice.reason
    with pytest.raises(ModelConfigError) as err:  # no key for the provider: a clear line, not the server
        build_model(choice, s)
    assert key in err.value.message
    monkeypatch.setenv(key, "provider-key")
    model = build_model(choice, s)
    assert type(model._provider).__name__ == provider_class  # type: ignore[attr-defined]
    assert "127.0.0.1" not in str(model._provider.base_url)  # type: ignore[attr-defined]


@pytest.mark.parametrize("spec", ["qwen2.5:7b", "llama3", "org/model:latest", "default"])
def test_names_without_a_provider_prefix_are_the_servers(spec: str) -> None:
    choice = choose_model(settings(base_url="http://127.0.0.1:9/v1", model=spec))
    assert choice.base_url and choice.spec == spec


def test_every_provider_prefix_co_recognises_is_one_pydantic_ai_knows() -> None:
    from pydantic_ai.providers import infer_provider_class

    from co_cli.models import PROVIDER_PREFIXES

    for name in PROVIDER_PREFIXES:
        with contextlib.suppress(ImportError):  # known, its SDK not installed here
            infer_provider_class(name)  # ValueError for an unknown provider


@pytest.mark.parametrize(
    ("name", "provider"),
    [("gpt-4o", "openai"), ("claude-sonnet-4-5", "anthropic"), ("gemini-2.5-pro", "google"), ("grok-4", "xai")],
)
def test_a_known_model_name_gets_its_provider(name: str, provider: str) -> None:
    from co_cli.models import qualified

    choice = qualified(choose_model(settings(model=name), "environment"))
    assert choice.spec == f"{provider}:{name}"
    assert choice.reason == "model setting (environment); provider from pydantic-ai's model data"


def test_a_name_listed_under_several_providers_asks_for_one(monkeypatch: pytest.MonkeyPatch) -> None:
    import pydantic_ai.models

    from co_cli import models

    monkeypatch.setattr(pydantic_ai.models, "known_model_names", lambda: ("groq:shared-x", "cerebras:shared-x"))
    monkeypatch.setattr(models, "_price_data_provider", lambda name: None)
    with pytest.raises(ModelConfigError) as err:
        models.qualified(choose_model(settings(model="shared-x")))
    assert err.value.message == "model 'shared-x' is served by cerebras, groq: name one, e.g. 'cerebras:shared-x'"
