"""Titles from the summarisation model: in the background after the first exchange; /rename wins; failures
keep the first-prompt title."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from co_cli.config import load_settings
from co_cli.session import Conversation
from co_cli.session.titles import clean_title
from tests.support.turn_core import Core, RecordingView, core, streaming_model

__all__ = ["core"]

pytestmark = pytest.mark.allow_model_requests


def titler(answer: str | Callable[[], str], delay: float = 0.0, calls: list[float] | None = None) -> FunctionModel:
    async def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if calls is not None:
            calls.append(time.monotonic())
        await asyncio.sleep(delay)
        return ModelResponse(parts=[TextPart(answer() if callable(answer) else answer)])

    return FunctionModel(reply, model_name="titler")


@pytest.fixture
def titling(core: Core, monkeypatch: pytest.MonkeyPatch) -> Core:
    monkeypatch.setenv("CO_CLI_AUTO_TITLE", "true")
    core.loaded = load_settings(cwd=core.cwd)
    return core


def test_clean_title() -> None:
    assert clean_title('Title: "Planning a trip to Lisbon."\nmore') == "Planning a trip to Lisbon"
    assert clean_title("one two three four five six seven eight nine ten") == "one two three four five six seven eight"
    assert clean_title("**Bold title**") == "Bold title"
    assert clean_title("\n\n  ") == ""


def turns(conv: Conversation, *prompts: str, then: Callable[[], None] | None = None) -> list[str]:
    """Run the prompts in one event loop; ``then`` runs before background work is awaited."""

    async def main() -> list[str]:
        from pydantic_ai import CancellationToken

        statuses: list[str] = []
        for prompt in prompts:
            statuses.append((await conv.run_turn(prompt, RecordingView(), CancellationToken())).status)
        if then is not None:
            then()
        await conv.close()
        return statuses

    return asyncio.run(main())


def test_the_first_exchange_is_titled_in_the_background(titling: Core) -> None:
    calls: list[float] = []
    conv = titling.conversation(streaming_model(lambda m: "sure"), summarizer=titler("Lisbon Trip Plans", 0.3, calls))
    seen: dict[str, str] = {}

    def right_after_the_turn() -> None:
        assert conv.session is not None
        seen["title"] = titling.store.sessions.get(conv.session.id).title

    assert turns(conv, "help me plan a trip to lisbon in may", then=right_after_the_turn) == ["ok"]
    # the turn did not wait for the title: right after it the session still has the prompt's words
    assert seen["title"] == "help me plan a trip to lisbon in may"
    assert conv.session is not None
    assert titling.store.sessions.get(conv.session.id).title == "Lisbon Trip Plans" == conv.session.title
    assert len(calls) == 1
    assert list(titling.store.usage.by_role(conv.session.id)) == ["chat", "title"]
    turns(conv, "and in june?")
    assert len(calls) == 1  # only after the first exchange


def test_rename_while_the_title_is_written_wins(titling: Core) -> None:
    conv = titling.conversation(streaming_model(lambda m: "sure"), summarizer=titler("Model Title", 0.2))

    def rename() -> None:
        assert conv.session is not None
        titling.store.sessions.rename(conv.session.id, "my own name")

    turns(conv, "first prompt", then=rename)
    assert conv.session is not None
    assert titling.store.sessions.get(conv.session.id).title == "my own name"


def test_a_failing_model_keeps_the_first_prompt_title(titling: Core) -> None:
    def broken() -> str:
        raise RuntimeError("no titles today")

    conv = titling.conversation(streaming_model(lambda m: "sure"), summarizer=titler(broken))
    assert turns(conv, "what is a monad") == ["ok"]
    assert conv.session is not None
    assert titling.store.sessions.get(conv.session.id).title == "what is a monad"


def test_auto_title_off_sends_nothing(core: Core) -> None:
    calls: list[float] = []
    conv = core.conversation(streaming_model(lambda m: "sure"), summarizer=titler("Nope", calls=calls))
    turns(conv, "a prompt")
    assert calls == [] and conv.session is not None
    assert core.store.sessions.get(conv.session.id).title == "a prompt"


def test_background_work_left_at_exit_is_bounded(titling: Core) -> None:
    conv = titling.conversation(streaming_model(lambda m: "sure"), summarizer=titler("Slow Title", 30))

    async def main() -> float:
        from pydantic_ai import CancellationToken

        await conv.run_turn("slow one", RecordingView(), CancellationToken())
        started = time.monotonic()
        await conv.close(timeout=0.2)
        return time.monotonic() - started

    assert asyncio.run(main()) < 2
    assert conv.session is not None and titling.store.sessions.get(conv.session.id).title == "slow one"
