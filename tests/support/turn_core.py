"""The turn core in process: a store in a temporary directory, scripted FunctionModels, and a view that records the
events of a turn."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import CancellationToken
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from co_cli.config import LoadedSettings, load_settings
from co_cli.deps import CoDeps
from co_cli.message_view import user_text
from co_cli.models import ModelChoice, ResolvedModel
from co_cli.session import Conversation
from co_cli.store import Store

Step = Callable[[list[ModelMessage]], "str | tuple[str, dict[str, Any]]"]


@dataclass
class RecordingView:
    texts: list[str] = field(default_factory=list)
    tools: list[tuple[str, Any]] = field(default_factory=list)
    results: list[tuple[str, Any]] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    ends: list[bool] = field(default_factory=list)
    waits: list[str] = field(default_factory=list)
    on_text: Callable[[str], None] | None = None

    def working(self, what: str) -> None:
        self.waits.append(what)

    def text(self, delta: str) -> None:
        self.texts.append(delta)
        if self.on_text is not None:
            self.on_text(delta)

    def tool_call(self, name: str, args: Any) -> None:
        self.tools.append((name, args))

    def tool_result(self, name: str, content: Any) -> None:
        self.results.append((name, content))

    def notice(self, message: str) -> None:
        self.notices.append(message)

    def end(self, interrupted: bool = False) -> None:
        self.ends.append(interrupted)


def streaming_model(step: Step, *, name: str = "scripted") -> FunctionModel:
    """A model whose answer to each request is ``step(messages)``: text, or (tool name, args) for a call."""

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        answer = step(messages)
        if isinstance(answer, tuple):
            tool, args = answer
            import json

            yield {0: DeltaToolCall(name=tool, json_args=json.dumps(args), tool_call_id=f"call-{len(messages)}")}
            return
        for i in range(0, len(answer), 6):
            yield answer[i : i + 6]
            await asyncio.sleep(0)

    return FunctionModel(stream_function=stream, model_name=name)


def echo(messages: list[ModelMessage]) -> str:
    return f"echo: {user_text(messages[-1])}"


@dataclass
class Core:
    loaded: LoadedSettings
    store: Store
    cwd: Path

    def conversation(self, model: FunctionModel, *, ask: Any = None, summarizer: Any = None) -> Conversation:
        resolved = ResolvedModel(
            model=model, choice=ModelChoice(spec="scripted", reason="test"), context_window=100_000, window_source="t"
        )
        deps = CoDeps(settings=self.loaded.settings, paths=self.loaded.paths, cwd=self.cwd, store=self.store)
        conv = Conversation(resolved=resolved, deps=deps, ask_approval=ask)
        if summarizer is not None:
            conv.engine.set_summarizer(summarizer)
        return conv


@pytest.fixture
def core(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Core:
    monkeypatch.setenv("CO_CLI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CO_CLI_CONFIG_DIR", str(tmp_path / "config"))
    cwd = tmp_path / "work"
    cwd.mkdir()
    loaded = load_settings(cwd=cwd)
    loaded.paths.ensure_data_dir()
    store = Store.open(loaded.paths.db)
    yield Core(loaded, store, cwd)  # type: ignore[misc]
    store.close()


def run(conv: Conversation, prompt: str, view: RecordingView | None = None, token: CancellationToken | None = None):  # type: ignore[no-untyped-def]
    return asyncio.run(conv.run_turn(prompt, view or RecordingView(), token or CancellationToken()))


def dumped(messages: list[ModelMessage]) -> Any:
    return ModelMessagesTypeAdapter.dump_python(messages, mode="json")


def summarizer(**fields: Any) -> FunctionModel:
    """The summariser's typed answer: one summary, and ``fields`` (its reading of the user's words)."""
    from tests.support.summariser import typed_summariser

    return typed_summariser(
        "SUMMARY: the user said hello several times, with padding words.", model_name="summariser", **fields
    )


def long_echo(messages: list[ModelMessage]) -> str:
    return f"echo: {user_text(messages[-1])} " + "and some more words to make it worth summarising " * 4
