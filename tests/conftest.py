"""Shared fixtures: a hermetic environment for co, the scripted model server, and the model-request guard."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# Test modules import helpers as ``tests.support...``: make the repository root importable in any import mode.
REPO_ROOT = str(Path(__file__).resolve().parent.parent)
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

from co_cli.store.db import Database  # noqa: E402
from co_cli.store.memories import Memories  # noqa: E402
from tests.support.scripted_server import ScriptedServer  # noqa: E402

PROVIDER_ENV_VARS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "OPENROUTER_API_KEY",
    "OLLAMA_BASE_URL",
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: end-to-end tests that run the real co binary in a pseudo-terminal")
    config.addinivalue_line("markers", "local: tests that load the embedded local model")
    config.addinivalue_line(
        "markers", "allow_model_requests: let pydantic-ai models send requests (e.g. to the scripted server)"
    )


def _is_provider_or_co_var(name: str) -> bool:
    return name.startswith("CO_CLI_") or name in PROVIDER_ENV_VARS or name.endswith("_API_KEY")


@pytest.fixture(autouse=True)
def _hermetic_environment(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts with no co settings or provider keys from the environment, and co's two directories
    in a fresh temporary place (never the user's)."""
    for name in list(os.environ):
        if _is_provider_or_co_var(name):
            monkeypatch.delenv(name)
    home = tmp_path_factory.mktemp("co-dirs")
    monkeypatch.setenv("CO_CLI_DATA_DIR", str(home / "data"))
    monkeypatch.setenv("CO_CLI_CONFIG_DIR", str(home / "config"))
    # Background titles send a request of their own; the tests of titles turn them back on.
    monkeypatch.setenv("CO_CLI_AUTO_TITLE", "false")


@pytest.fixture
def co_env(tmp_path: Path) -> dict[str, str]:
    """A copy of the environment with no co settings or provider keys, and every directory under tmp_path."""
    env = {k: v for k, v in os.environ.items() if not _is_provider_or_co_var(k)}
    env.pop("NO_COLOR", None)
    home = tmp_path / "home"
    dirs = {
        "HOME": home,
        "XDG_CONFIG_HOME": home / ".config",
        "XDG_DATA_HOME": home / ".local" / "share",
        "XDG_CACHE_HOME": home / ".cache",
        "XDG_STATE_HOME": home / ".local" / "state",
        "CO_CLI_DATA_DIR": tmp_path / "co-data",
        "CO_CLI_CONFIG_DIR": tmp_path / "co-config",
    }
    for name, path in dirs.items():
        path.mkdir(parents=True, exist_ok=True)
        env[name] = str(path)
    # Memory extraction sends its own model requests after each turn: off unless a test is about it, so
    # the scripted replies go to the chat requests they were written for.
    env["CO_CLI_MEMORY_EXTRACT"] = "off"
    env["CO_CLI_AUTO_TITLE"] = "false"  # see _hermetic_environment
    return env


@pytest.fixture
def scripted_server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


@pytest.fixture
def co_server_env(co_env: dict[str, str], scripted_server: ScriptedServer) -> dict[str, str]:
    """``co_env`` pointing co at the scripted server as model ``scripted`` with API key ``test-key``."""
    return {
        **co_env,
        "CO_CLI_BASE_URL": scripted_server.base_url,
        "CO_CLI_MODEL": "scripted",
        "CO_CLI_API_KEY": "test-key",
    }


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Memories]:
    """Long-term memory on a database of its own (a test module may name its own ``store``)."""
    db = Database.open(tmp_path / "co.db")
    yield Memories(db)
    db.close()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """An empty directory to run co in."""
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture(autouse=True)
def _block_model_requests(request: pytest.FixtureRequest) -> Iterator[None]:
    """Forbid real model requests in-process unless the test is marked ``allow_model_requests``.

    End-to-end tests run co in a subprocess, so the guard (and the pydantic-ai import it costs) is skipped.
    """
    if request.node.get_closest_marker("allow_model_requests") or request.node.get_closest_marker("e2e"):
        yield
        return
    from pydantic_ai.models import override_allow_model_requests

    with override_allow_model_requests(False):
        yield
