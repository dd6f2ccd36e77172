"""Extraction keeps only what the user's message states, whatever a small model writes: the mistakes measured
with a 1.5B model behind a plain llama.cpp server (bench/bench_memory_quality.py), each replayed with a
FunctionModel that makes it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from co_cli.memory.extract import ExtractionWorker, Facts, plan, standing_rules
from co_cli.memory.grounding import from_a_secret, grounded, misattributed, only_asks, says_change
from co_cli.memory.structured_answer import ask
from co_cli.store.memories import Memories

pytestmark = pytest.mark.allow_model_requests
PROJECT = "/repo/one"


def model_saying(facts: list[str], calls: list[str] | None = None) -> FunctionModel:
    """A model that extracts ``facts`` from any message and reconciles nothing (an empty list of decisions, as
    the 1.5B model answers)."""

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if calls is not None:
            calls.append("request")
        args: dict[str, Any] = {"memory": []} if _reconciling(messages) else {"facts": facts}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, args)])

    return FunctionModel(answer)


def _reconciling(messages: list[ModelMessage]) -> bool:
    return any("EXISTING memories" in str(getattr(p, "content", "")) for m in messages for p in m.parts)


def extract(store: Memories, model: FunctionModel, message: str) -> list[str]:
    async def go() -> None:
        worker = ExtractionWorker(store, lambda: model, "auto", PROJECT)
        worker.submit(message, "s1", 2)
        await worker.drain()

    asyncio.run(go())
    return [m.text for m in store.list()]


@pytest.mark.parametrize(
    "message",
    ["Can you explain how Go channels work?", "What's the difference between a mutex and a channel?",
     "Write me a regex for matching ISO dates", "Translate 'good morning' into French for me",
     "How do I profile a Go program for allocations?", "Show me an example of a table-driven test in Go"],
)  # fmt: skip
def test_a_message_that_only_asks_is_not_sent_to_the_model(store: Memories, message: str) -> None:
    calls: list[str] = []
    assert only_asks(message)
    assert extract(store, model_saying(["The user wants to profile a Go program"], calls), message) == []
    assert calls == []


@pytest.mark.parametrize(
    "message",
    ["I use fish, how do I set PATH?", "Always write commit messages in the imperative mood please",
     "The Kestrel deadline slipped to April 14", "Remember that the API is on port 8080, how do I call it?",
     "My colleague Bob uses emacs"],
)  # fmt: skip
def test_a_message_that_says_something_is_sent(message: str) -> None:
    assert not only_asks(message)


@pytest.mark.parametrize(
    ("fact", "message"),
    [
        ("Lyon is a city in France", "I moved to Lyon last month"),
        ("French translates as 'Bonjour', which means 'Good Morning'", "Translate 'good morning' into French"),
        ("Go profiling uses the `pprof` package", "I profile Go programs every week"),
        ("The build broke again", "I'm annoyed, the build broke again"),
        ("A table-driven test in Go uses a slice of cases", "I write table-driven tests in Go"),
        ("The user's deadline is March 4", "Our deadline is March 3"),
    ],
)
def test_what_the_model_knows_or_invents_is_not_remembered(store: Memories, fact: str, message: str) -> None:
    assert not grounded(fact, message)
    assert extract(store, model_saying([fact]), message) == []


@pytest.mark.parametrize(
    ("fact", "message"),
    [
        ("The user's name is Sam", "Hi, I'm Sam. I live in Paris"),
        ("Kestrel is a billing service", "Our project Kestrel is a billing service in Go"),
        ("The deadline for Kestrel is March 3", "Kestrel is due, the deadline is March 3"),
        ("Carol reviews the user's pull requests now", "Alice left the team; Carol reviews my pull requests now"),
        ("The user uses Vim for everything", "I use vim for everything"),
        ("The user's colleague Bob uses emacs", "My colleague Bob uses emacs and swears by it"),
    ],
)
def test_what_the_user_said_is_grounded(fact: str, message: str) -> None:
    assert grounded(fact, message)


def test_a_colleagues_habit_is_not_taken_for_the_users(store: Memories) -> None:
    message = "My colleague Bob uses emacs and swears by it"
    assert misattributed("The user uses emacs", message)
    assert not misattributed("The user's colleague Bob uses emacs", message)
    assert not misattributed("The user uses vim", "I use vim and Bob uses emacs")
    facts = ["The user uses emacs", "The user swears by it", "The user's colleague Bob uses emacs"]
    assert extract(store, model_saying(facts), message) == ["The user's colleague Bob uses emacs"]


def test_nothing_is_taken_from_the_clause_that_holds_a_password(store: Memories) -> None:
    message = "The staging database password is tulip42, keep it handy. And I deploy on Fridays"
    assert from_a_secret("The user is using a staging database", message)
    assert not from_a_secret("The user deploys on Fridays", message)
    facts = ["The user is using a staging database", "The password to access the staging database is tulip42",
             "The user deploys on Fridays"]  # fmt: skip
    assert extract(store, model_saying(facts), message) == ["The user deploys on Fridays"]


def test_a_rule_the_user_states_is_kept_whatever_the_model_extracts(store: Memories) -> None:
    message = "Always write commit messages in the imperative mood please"
    kept = extract(store, model_saying(["The user specifies 'please' as a recommendation"]), message)
    assert "The user's standing rule: always write commit messages in the imperative mood please" in kept
    # a fact that already says the rule is enough
    assert standing_rules(message, ["The user writes commit messages in the imperative mood"]) == []
    assert standing_rules("I moved to Lyon last month") == []


def test_a_change_the_user_states_replaces_the_memory_on_its_topic(store: Memories) -> None:
    home = store.add("The user lives in Paris", actor="user")
    vim = store.add("The user uses vim", actor="user")
    bob = store.add("The user's colleague Bob uses emacs", actor="user")
    deadline = store.add("The deadline for the project Kestrel is March 3", actor="user")
    kestrel = store.add("The user's project Kestrel is a billing service in Go", actor="user")
    alice = store.add("Alice reviews the user's pull requests", actor="user")
    moved = store.add("The user moved to Lyon last month", actor="user")
    neighbours = [home, vim, bob, deadline, kestrel, alice]

    def replaced(fact: str, message: str) -> int | None:
        [change] = plan([fact], neighbours, [], message)
        return change.target if change.op == "update" else None

    assert says_change("I moved to Lyon last month")
    assert replaced("The user moved to Lyon last month", "I moved to Lyon last month") == home.id
    assert replaced("The user switched from vim to helix", "I switched from vim to helix last week") == vim.id
    # "last week" and "last month" say when, not what
    [change] = plan(["The user switched from vim to helix last week"], [vim, moved, bob], [], "I switched last week")
    assert (change.op, change.target) == ("update", vim.id)
    assert replaced("The user's Kestrel deadline is April 14", "The Kestrel deadline slipped to April 14") == (
        deadline.id
    )
    assert replaced("Carol reviews the user's pull requests now", "Carol reviews my pull requests now") == alice.id
    # a shared name alone says whose, not what: Alice leaving does not replace what Alice does
    assert replaced("Alice left the team", "Alice left the team") is None
    # no word of change: a new fact beside the old one, as the model decides
    assert not says_change("I live in Lyon and I like it")
    assert replaced("The user lives in Lyon", "I live in Lyon and I like it") is None


def test_structured_answers_are_asked_for_at_temperature_zero() -> None:
    seen: list[object] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append((info.model_settings or {}).get("temperature"))
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"facts": []})])

    asyncio.run(ask(FunctionModel(answer), Facts, "instructions", "prompt"))
    assert seen == [0.0]
