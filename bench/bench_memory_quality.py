"""Memory quality: which facts long-term memory ends up holding after a conversation where facts change, with
co's extraction and with add-only extraction on the same model and messages.

Run: python bench/bench_memory_quality.py [-m MODEL] [--no-baseline]

Three sessions of a user's messages (below): nine durable facts, four of them changed later (a move to another
city, a new editor, a new reviewer, a slipped deadline), one-off questions and passing moods, a colleague's
habit and two passwords. Each message goes through co's extraction worker in ``auto`` mode, as after a turn.
MODEL is any co model string ('local' for the embedded model, a provider string, or a name on
CO_CLI_BASE_URL's OpenAI-compatible server) or ``scripted`` (the default): a deterministic stand-in that
makes the mistakes measured with a 1.5B model behind a plain llama.cpp server. It answers in prose when a
tool call is forced (``--tool-calls``: it calls the tool), writes facts in the first person, reports moods,
one-off requests and passwords as facts, answers NONE for a new fact, and merges a new fact into whatever
neighbour it is shown.

Then one question per fact (a fourth session): how many find their fact among the memories a request is sent,
with and without query expansion, and how many of the memories sent hold the asked fact.

Reported: current facts kept (of 9), superseded facts still active (of 4: a memory with the old value and not
the new one), junk memories (about none of the facts, the colleague or Alice leaving), secrets stored (of 2),
the requests made, and the most requests one message took.
The add-only baseline stores every extracted fact as it is (asked for JSON in prompted mode, so it never
fails on a prose answer).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYDANTIC_AI_NO_BANNER", "1")

from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models import Model  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

from co_cli.memory.extract import ExtractionWorker, extract_facts  # noqa: E402
from co_cli.store.db import Database  # noqa: E402
from co_cli.store.memories import Memories  # noqa: E402
from co_cli.store.queue import ExtractionQueue  # noqa: E402

PROJECT = "/repo/kestrel"


@dataclass(frozen=True)
class Message:
    text: str
    facts: tuple[str, ...] = ()
    """What the scripted model extracts from it (mistakes included)."""


SESSIONS: tuple[tuple[Message, ...], ...] = (
    (
        Message(
            "Hi, I'm Sam. I live in Paris and I write mostly Go these days.",
            ("The user's name is Sam", "I live in Paris", "The user writes mostly Go"),
        ),  # fmt: skip
        Message("I'm in a terrible mood today, the build broke again", ("The user is in a terrible mood today",)),
        Message("I use vim for everything, and my shell is fish", ("I use vim for everything", "My shell is fish")),
        Message("Can you explain how Go channels work?"),
        Message("Alice reviews my pull requests on this project", ("Alice reviews my pull requests",)),
        Message(
            "Our project Kestrel is a billing service in Go, the deadline is March 3",
            ("The project Kestrel is a billing service written in Go", "The Kestrel deadline is March 3"),
        ),
    ),
    (
        Message("What's the difference between a mutex and a channel?"),
        Message(
            "Always write commit messages in the imperative mood please",
            ("The user wants commit messages written in the imperative mood",),
        ),  # fmt: skip
        Message("My colleague Bob uses emacs and swears by it", ("The user's colleague Bob uses emacs",)),
        Message(
            "The staging database password is tulip42, keep it handy", ("The staging database password is tulip42",)
        ),  # fmt: skip
        Message("Write me a regex for matching ISO dates", ("The user needs a regex for ISO dates",)),
        Message("Translate 'good morning' into French for me", ("The user wants good morning translated into French",)),
    ),
    (
        Message("I moved to Lyon last month, finally settled", ("I moved to Lyon last month",)),
        Message("I switched from vim to helix last week", ("The user switched from vim to helix",)),
        Message(
            "Alice left the team; Carol reviews my pull requests now",
            ("Carol reviews my pull requests now", "Alice left the team"),
        ),  # fmt: skip
        Message("The Kestrel deadline slipped to April 14", ("The Kestrel deadline slipped to April 14",)),
        Message("my VPN password is hunter2 if you need it", ("The user's VPN password is hunter2",)),
        Message("How do I profile a Go program for allocations?", ("The user wants to profile a Go program",)),
        Message("Thanks, I'm feeling much better about the release now", ("The user is feeling better now",)),
        Message("Show me an example of a table-driven test in Go"),
    ),
)

CURRENT = {  # the fact -> words one of which an active memory must hold (all of a tuple's words)
    "name": ("sam",),
    "city": ("lyon",),
    "language": ("go",),
    "editor": ("helix",),
    "shell": ("fish",),
    "reviewer": ("carol",),
    "project": ("kestrel", "billing"),
    "deadline": ("april",),
    "commits": ("imperative",),
}
SUPERSEDED = {  # the old fact -> (its words, the new value): active while a memory says the one without the other
    "city": (("paris",), "lyon"),
    "editor": (("vim",), "helix"),
    "reviewer": (("alice", "reviews"), "carol"),
    "deadline": (("march",), "april"),
}
COLLEAGUE = ("bob",)
SECRETS = ("tulip42", "hunter2")
QUESTIONS = {  # a fourth session: one question per fact, for recall (which memories the request is sent)
    "name": "What's my name again?",
    "city": "What is the weather like where I live?",
    "language": "Which programming language do I mostly write?",
    "editor": "How do I set up my editor for this project?",
    "shell": "Which shell should this install script target for me?",
    "reviewer": "Who should review my pull request?",
    "project": "Remind me what Kestrel is for",
    "deadline": "When is the Kestrel deadline?",
    "commits": "Write a commit message for this change",
}
_SLOTS = (("paris", "lyon", "live", "lives", "moved"), ("vim", "helix"), ("alice", "carol", "reviews"),
          ("deadline",), ("shell", "fish"))  # fmt: skip


def _has(text: str, needed: Sequence[str]) -> bool:
    found = set(re.findall(r"[a-z0-9]+", text.lower()))
    return all(w in found for w in needed)


@dataclass
class Recall:
    found: int = 0
    sent: int = 0
    relevant_sent: int = 0


def recall(store: Memories, expanded: bool) -> Recall:
    """For each question, whether the memories a request would be sent hold the asked fact, and how many of
    those sent hold it (precision)."""
    import co_cli.memory.expansion as expansion
    from co_cli.memory.inject import relevant_memories

    saved = expansion.expand
    if not expanded:
        expansion.expand = lambda terms: []
    outcome = Recall()
    try:
        for key, question in QUESTIONS.items():
            sent = [s.text for s in relevant_memories(store, question, PROJECT, 800, time.time())]
            outcome.found += any(_has(t, CURRENT[key]) for t in sent)
            outcome.sent += len(sent)
            outcome.relevant_sent += sum(_has(t, CURRENT[key]) for t in sent)
    finally:
        expansion.expand = saved
    return outcome


@dataclass
class Outcome:
    kept: int = 0
    superseded: int = 0
    junk: int = 0
    secrets: int = 0
    requests: int = 0
    most_per_message: int = 0


def score(texts: Sequence[str], requests: int, most: int) -> Outcome:
    outcome = Outcome(requests=requests, most_per_message=most)
    outcome.kept = sum(any(_has(t, words) for t in texts) for words in CURRENT.values())
    outcome.superseded = sum(
        any(_has(t, old) and not _has(t, (new,)) for t in texts) for old, new in SUPERSEDED.values()
    )
    outcome.secrets = sum(any(s in t.lower() for t in texts) for s in SECRETS)
    known = [*CURRENT.values(), *(old for old, _ in SUPERSEDED.values()), COLLEAGUE, ("alice",)]
    outcome.junk = sum(not any(_has(t, words) for words in known) for t in texts)
    return outcome


# ----- the scripted stand-in for a small model on a server that ignores forced tool calls -----


def _prompt(messages: list[ModelMessage]) -> str:
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                return part.content
    return ""


def _slot(text: str) -> int | None:
    found = set(re.findall(r"[a-z0-9]+", text.lower()))
    return next((i for i, slot in enumerate(_SLOTS) if found & set(slot)), None)


def _decisions(prompt: str) -> list[dict[str, str]]:
    existing = re.findall(r"^- (m\d+): (.*)$", prompt.split("NEW facts:")[0], re.MULTILINE)
    new = re.findall(r"^- (.*)$", prompt.split("NEW facts:")[1], re.MULTILINE)
    decisions: list[dict[str, str]] = []
    for fact in new:
        same = [(ref, text) for ref, text in existing if _slot(text) is not None and _slot(text) == _slot(fact)]
        if "left" in fact and same:
            decisions.append({"event": "DELETE", "id": same[0][0]})
        elif same:
            decisions.append({"event": "UPDATE", "id": same[0][0], "text": fact})
        elif existing:  # a small model glues the fact onto the neighbour it is shown
            ref, text = existing[0]
            decisions.append({"event": "UPDATE", "id": ref, "text": f"{text} and {fact[0].lower()}{fact[1:]}"})
        else:
            decisions.append({"event": "NONE", "text": fact})  # ... or drops it
    return decisions


def scripted_model(facts_of: dict[str, tuple[str, ...]], tool_calls: bool = False) -> FunctionModel:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = _prompt(messages)
        if prompt.startswith("EXISTING"):
            payload: dict[str, object] = {"memory": _decisions(prompt)}
        else:
            message = prompt.split("<message>\n", 1)[-1].split("\n</message>", 1)[0]
            payload = {"facts": list(facts_of.get(message, ()))}
        if info.output_tools and tool_calls:
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, payload)])
        if info.output_tools:  # a forced tool call is ignored: the model answers in prose
            return ModelResponse(parts=[TextPart("Here is what I found about the user.")])
        return ModelResponse(parts=[TextPart(json.dumps(payload))])

    return FunctionModel(answer)


class Counting:
    """Counts the model's requests per message (wraps the model the worker is given)."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.total = 0

    def wrap(self) -> Model:
        from pydantic_ai.models.wrapper import WrapperModel

        counter = self

        class _Counted(WrapperModel):
            async def request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
                counter.total += 1
                return await super().request(*args, **kwargs)

        return _Counted(self.model)


async def run_co(model: Model, work: Path, show: bool = False) -> Outcome:
    db = Database.open(work / "co.db")
    store = Memories(db)
    counted = Counting(model)
    wrapped = counted.wrap()
    worker = ExtractionWorker(store, lambda: wrapped, "auto", PROJECT)
    ExtractionQueue.RETRY_AFTER = 0.0  # no waiting here: a failed message is retried before the next one
    most = 0
    seq = 0
    for session in SESSIONS:
        for message in session:
            before = counted.total
            worker.submit(message.text, "bench", seq)
            await worker.drain()
            most = max(most, counted.total - before)
            seq += 2
    worker.start()  # what is left to retry
    await worker.drain()
    texts = [m.text for m in store.list()]
    for expanded in (False, True):
        r = recall(store, expanded)
        print(
            f"  recall {'with' if expanded else 'without'} query expansion: {r.found}/{len(QUESTIONS)} questions "
            f"found their fact; {r.relevant_sent}/{r.sent} memories sent held it"
        )
    db.close()
    if show:
        print("\n".join(f"  {t}" for t in texts))
    return score(texts, counted.total, most)


async def run_add_only(model: Model) -> Outcome:
    texts: list[str] = []
    counted = Counting(model)
    wrapped = counted.wrap()
    for session in SESSIONS:
        for message in session:
            try:
                texts += await extract_facts(wrapped, message.text, prompted=True)
            except Exception:
                continue
    return score(texts, counted.total, 1)


def row(name: str, o: Outcome) -> str:
    return (
        f"| {name} | {o.kept}/{len(CURRENT)} | {o.superseded}/{len(SUPERSEDED)} | {o.junk} | "
        f"{o.secrets}/{len(SECRETS)} | {o.requests} | {o.most_per_message} |"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-m", "--model", default="scripted")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--show", action="store_true", help="print the memories co kept")
    parser.add_argument("--tool-calls", action="store_true", help="the scripted model honours forced tool calls")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.environ.setdefault("CO_CLI_DATA_DIR", str(work / "data"))
        os.environ.setdefault("CO_CLI_CONFIG_DIR", str(work / "config"))
        if args.model == "scripted":
            facts_of = {m.text: m.facts for session in SESSIONS for m in session}
            model: Model = scripted_model(facts_of, args.tool_calls)
            label = "scripted small model" + ("" if args.tool_calls else " (prose on forced tool calls)")
        else:
            from co_cli.config import load_settings
            from co_cli.models import resolve_model

            resolved = resolve_model(load_settings(model=args.model).settings, "command line")
            model, label = resolved.model, resolved.label
        messages = sum(len(s) for s in SESSIONS)
        print(f"model {label}, {len(SESSIONS)} sessions, {messages} messages")
        print("| extraction | current facts kept | superseded still active | junk | secrets stored | requests "
              "| most requests for one message |")  # fmt: skip
        print("|---|---|---|---|---|---|---|")
        print(row("co", await run_co(model, work, args.show)), flush=True)
        if not args.no_baseline:
            print(row("add-only", await run_add_only(model)), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
