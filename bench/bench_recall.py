"""Recall through repeated compaction: how many planted facts survive, with co's compaction and with a plain
rolling summary on the same model.

Run: python bench/bench_recall.py [-m MODEL] [--base-url URL] [--window N] [--turns 36] [--limits 40 12]
                                    [--ask] [--no-baseline] [--scripted copy|lossy] [--dump DIR]
                                    [--variant en|en-other|de] [--no-readings]

A scripted conversation (tests/support/planted_facts.py; with --variant, bench/recall_variants.py: ``en-other``,
a bookshop's checkout in other words, or ``de``, a warehouse service in German) states 12 facts early (a
codename, a region, a port, a config path, an error code and its fix, a decision, a hard rule, a style
preference, a failed upgrade, a reviewer, a date, the next step) and three of harder kinds (a name the
assistant proposed and the user accepted, a value only a tool output shows, a host the user later changes),
then asks ordinary questions, some with tool outputs. It is fed turn by turn through co's context governance,
exactly as runs do (before every model request, then the run's history adopted), with MODEL as the
summariser. MODEL is any co model string: 'local' (the embedded model), 'local:/path/model.gguf' (any GGUF), a
provider string, or a model name on an OpenAI-compatible server given by --base-url (llama.cpp's llama-server,
vLLM, Ollama's /v1); --window gives that server's context window when co cannot know it.

--scripted runs without any model: the summariser is a script that answers every summary request with a
copy of the transcript's last assistant paragraph ("copy", the failure seen on small models) or with the
user's last line only ("lossy"). It measures co's safety nets on the worst summariser; --ask needs a model.

For each max_history_messages it reports the compactions made (and how: summary, digest, marker) and the
facts found (a) in what the last request would send (instructions with pins included; the facts missing from
co's are named under its row) and, with --ask, (b) in the model's answers to one question per fact, the harder
kinds apart ("+3": of 3), and how many answers gave a value the user had since changed. The baseline is a
plain rolling summary: past the same message limit, the middle (earlier summary included) is replaced by the
model's answer to "Summarise this conversation", with no ledger, no digest and no pins. --dump DIR writes each
row's final context (what the questions are asked with) to DIR as a transcript. With a model, each of the user's
messages is also read as memory extraction reads it after a turn (one request, and one more for a part read as
a rule), and compaction acts on those readings, as in a session with memory extraction on (the default);
--no-readings leaves them out.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYDANTIC_AI_NO_BANNER", "1")

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart  # noqa: E402
from pydantic_ai.models import Model, ModelRequestContext, ModelRequestParameters  # noqa: E402
from pydantic_ai.models.function import AgentInfo  # noqa: E402

from bench.recall_variants import VARIANTS, Variant  # noqa: E402
from co_cli.config import Settings, load_settings  # noqa: E402
from co_cli.context.boundaries import find_head_end, find_tail_start  # noqa: E402
from co_cli.context.governor import ContextGovernor, GovernorEvent  # noqa: E402
from co_cli.context.policy import GovernorConfig  # noqa: E402
from co_cli.context.summarize import render_transcript  # noqa: E402
from co_cli.context.tokens import estimate_messages_tokens  # noqa: E402
from co_cli.context.user_quotes import said_key  # noqa: E402
from co_cli.memory.extract import read_message, said_parts  # noqa: E402
from co_cli.message_view import user_text, views  # noqa: E402
from co_cli.models import resolve_model  # noqa: E402
from co_cli.session.instructions import pins_section  # noqa: E402
from co_cli.store import ReadPart, Store  # noqa: E402
from tests.support.planted_facts import (  # noqa: E402
    PlantedFact,
    answer_is_stale,
    facts_kept,
    planted_script,
    turn_messages,
)
from tests.support.summariser import scripted_summariser  # noqa: E402

PLAIN_PROMPT = "Summarise this conversation.\n\n<transcript>\n{transcript}\n</transcript>"


@dataclass
class Outcome:
    compactions: int = 0
    methods: dict[str, int] = field(default_factory=dict)
    kept: int = 0
    kept_new: int = 0
    answered: int | None = None
    answered_new: int | None = None
    stale: int | None = None
    seconds: float = 0.0
    lost: list[PlantedFact] = field(default_factory=list)
    """The facts not in the final context"""

    def count_kept(self, text: str, variant: Variant) -> None:
        self.kept = len(facts_kept(text, variant.script.facts))
        self.kept_new = len(facts_kept(text, variant.script.harder))
        self.lost = [f for f in (*variant.script.facts, *variant.script.harder) if f.key not in text]


def text_of(messages: list[ModelMessage]) -> str:
    return "\n".join(view.text for message in messages for view in views(message))


def states(fact: PlantedFact, answer: str) -> bool:
    """The answer gives the fact's value, in any case ("Ap-southeast-1" at the start of a sentence)."""
    return fact.key.casefold() in answer.casefold()


async def ask(model: Model, context: list[ModelMessage], instructions: str, outcome: Outcome, variant: Variant) -> None:
    """Facts the model states when asked one question per fact with ``context`` as the history."""
    # Temperature 0: the same context gives the same answer, so co and the baseline are compared, not samples.
    agent: Agent[None, str] = Agent(model, instructions=instructions or None, model_settings={"temperature": 0.0})

    async def answers(facts: tuple[PlantedFact, ...]) -> list[tuple[PlantedFact, str]]:
        out = []
        for fact in facts:
            result = await agent.run(f"{fact.question} {variant.few_words}", message_history=context)
            out.append((fact, result.output))
            if not states(fact, result.output):
                print(f"    missed {fact.kind} ({fact.key}): {' '.join(result.output.split())[:160]}", flush=True)
        return out

    outcome.answered = sum(states(fact, answer) for fact, answer in await answers(variant.script.facts))
    harder = await answers(variant.script.harder)
    outcome.answered_new = sum(states(fact, answer) for fact, answer in harder)
    outcome.stale = sum(answer_is_stale(fact, answer) for fact, answer in harder)


Reader = Callable[[str], Awaitable[dict[str, tuple[ReadPart, ...]]]]


def message_reader(model: Model, store: Store) -> Reader:
    """Each user message read as memory extraction reads it after a turn (``read_message`` with the memories of
    ``store``, which stays empty), as what compaction acts on: its rules, changes and next steps. A message whose
    reading fails has none (compaction then has the summariser's reading of it)."""

    async def read(text: str) -> dict[str, tuple[ReadPart, ...]]:
        try:
            reading, _ = await read_message(model, store.memories, text, "/bench")
        except Exception:
            return {}
        return {said_key(text): tuple(said_parts(reading, text))}

    return read


def scripted_model(kind: str) -> Model:
    """A summariser without a model: a copy of the transcript's last assistant paragraph, or the user's last
    line only."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = text_of(messages[-1:])
        prefix = "Assistant: " if kind == "copy" else "User: "
        lines = [line[len(prefix) :] for line in prompt.splitlines() if line.startswith(prefix)]
        return ModelResponse(parts=[TextPart(lines[-1] if lines else "Nothing happened.")])

    return scripted_summariser(respond, model_name=f"scripted-{kind}")


async def governed(
    governor: ContextGovernor, model: Model, working: list[ModelMessage], question: str
) -> list[ModelMessage]:
    """The context the questions are asked with, as the REPL sends it: the next request goes through the
    governor, which compacts first when the conversation is over its limits (the last turn's answer may have
    taken it there). Without this the questions could be asked with more than the window holds, and the
    model's server would cut the start of the conversation (the summary) away."""
    probe = ModelRequest(parts=[UserPromptPart(question)])
    request = ModelRequestContext(
        model=model,
        messages=[*working, probe],
        model_settings=None,
        model_request_parameters=ModelRequestParameters(),
    )
    ctx: Any = SimpleNamespace(run_id="questions")
    return list((await governor.before_model_request(ctx, request)).messages)[:-1]


def dump_context(path: Path | None, instructions: str, context: list[ModelMessage]) -> None:
    """The context the questions are asked with, as a transcript, for reading what the model saw."""
    if path is None:
        return
    tokens = estimate_messages_tokens(context)
    lines = [f"~{tokens:,} tokens in {len(context)} messages", f"[Instructions]\n{instructions or '(none)'}"]
    path.write_text("\n\n".join([*lines, *render_transcript(context)]) + "\n")


async def run_co(
    model: Model,
    window: int,
    limit: int,
    turns: int,
    ask_model: bool,
    work: Path,
    dump: Path | None = None,
    variant: Variant = VARIANTS["en"],
    reader: Reader | None = None,
) -> Outcome:
    """co's governance of the conversation; ``reader`` reads each of the user's messages as memory extraction
    does after a turn (what compaction acts on for them), None for none."""
    outcome = Outcome()
    pins: list[str] = []
    said: dict[str, tuple[ReadPart, ...]] = {}

    def listen(event: GovernorEvent) -> None:
        if event.kind == "compaction" and event.result is not None:
            outcome.compactions += 1
            outcome.methods[event.result.method] = outcome.methods.get(event.result.method, 0) + 1
            pins.extend(p for p in event.result.standing_instructions if p not in pins)

    settings = Settings(max_history_messages=limit, data_dir=work, config_dir=work)
    governor = ContextGovernor(
        GovernorConfig.from_settings(settings, window),
        summarizer=model,
        offload_dir=lambda: work / "offload",
        overhead_tokens=1000,
        on_event=listen,
        said=lambda: said,
    )
    working: list[ModelMessage] = []
    sent: list[ModelMessage] = []
    start = time.perf_counter()
    for index, turn in enumerate(planted_script(turns, variant.script)):
        history = list(working)
        for message in turn_messages(turn, index):
            history.append(message)
            prompt = user_text(message)
            if reader is not None and prompt:
                said.update(await reader(prompt))
            if isinstance(message, ModelRequest):
                context = ModelRequestContext(
                    model=model,
                    messages=list(history),
                    model_settings=None,
                    model_request_parameters=ModelRequestParameters(),
                )
                ctx: Any = SimpleNamespace(run_id=f"turn-{index}")
                sent = (await governor.before_model_request(ctx, context)).messages
        working, _ = governor.adopt(history)
    outcome.seconds = time.perf_counter() - start
    instructions = pins_section(pins)
    outcome.count_kept(text_of(sent) + instructions, variant)
    final = await governed(governor, model, working, variant.script.facts[0].question)
    dump_context(dump / f"co-{limit}.txt" if dump else None, instructions, final)
    if ask_model:
        await ask(model, final, instructions, outcome, variant)
    return outcome


async def run_plain(
    model: Model, limit: int, turns: int, ask_model: bool, dump: Path | None = None, variant: Variant = VARIANTS["en"]
) -> Outcome:
    """The baseline: a plain rolling summary past the same message limit."""
    outcome = Outcome()
    agent: Agent[None, str] = Agent(model)
    working: list[ModelMessage] = []
    start = time.perf_counter()
    for index, turn in enumerate(planted_script(turns, variant.script)):
        working.extend(turn_messages(turn, index))
        if len(working) <= limit:
            continue
        head_end = find_head_end(working)
        tail = find_tail_start(working, max(4, limit // 2), head_end=head_end)
        if tail <= head_end:
            continue
        transcript = "\n\n".join(render_transcript(working[head_end:tail]))
        summary = (await agent.run(PLAIN_PROMPT.format(transcript=transcript))).output
        working = [
            *working[:head_end],
            ModelRequest(parts=[UserPromptPart(f"Summary of the earlier conversation:\n{summary}")]),
            ModelResponse(parts=[TextPart("Understood.")]),
            *working[tail:],
        ]
        outcome.compactions += 1
    outcome.seconds = time.perf_counter() - start
    outcome.methods = {"plain": outcome.compactions}
    outcome.count_kept(text_of(working), variant)
    dump_context(dump / f"plain-{limit}.txt" if dump else None, "", working)
    if ask_model:
        await ask(model, working, "", outcome, variant)
    return outcome


def row(label: str, limit: int, outcome: Outcome, variant: Variant) -> str:
    methods = ", ".join(f"{k} {v}" for k, v in sorted(outcome.methods.items())) or "-"
    facts, harder = len(variant.script.facts), len(variant.script.harder)
    kept = f"{outcome.kept}/{facts} +{outcome.kept_new}/{harder}"
    answered = "-"
    if outcome.answered is not None:
        answered = f"{outcome.answered}/{facts} +{outcome.answered_new}/{harder}, {outcome.stale} stale"
    return f"| {label} | {limit} | {outcome.compactions} ({methods}) | {kept} | {answered} | {outcome.seconds:.0f} s |"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-m", "--model", default="local")
    parser.add_argument("--base-url", help="an OpenAI-compatible server to send MODEL's requests to")
    parser.add_argument("--window", type=int, help="the model's context window in tokens, when co cannot know it")
    parser.add_argument("--scripted", choices=("copy", "lossy"), help="no model: a scripted summariser")
    parser.add_argument("--variant", choices=VARIANTS, default="en", help="the conversation (wording, language)")
    parser.add_argument("--turns", type=int, default=36)
    parser.add_argument("--limits", type=int, nargs="+", default=[40, 12])
    parser.add_argument("--ask", action="store_true", help="also ask the model one question per fact at the end")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--dump", type=Path, help="write the final context of each row to this directory")
    parser.add_argument(
        "--no-readings", action="store_true", help="no reading of each message (as with memory extraction off)"
    )
    args = parser.parse_args()
    if args.scripted and args.ask:
        parser.error("--ask needs a model to answer; --scripted has none")
    variant = VARIANTS[args.variant]
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
    if args.base_url:
        os.environ["CO_CLI_BASE_URL"] = args.base_url
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.environ.setdefault("CO_CLI_DATA_DIR", str(work / "data"))
        os.environ.setdefault("CO_CLI_CONFIG_DIR", str(work / "config"))
        if args.scripted:
            model, window, label = scripted_model(args.scripted), args.window or 32_768, f"scripted {args.scripted}"
        else:
            loaded = load_settings(model=args.model)
            resolved = resolve_model(loaded.settings, "command line")
            model, window, label = resolved.model, args.window or resolved.context_window, resolved.label
        print(
            f"model {label}, window {window:,} tokens, conversation {args.variant}, {args.turns} turns, "
            f"{len(variant.script.facts)} planted facts + {len(variant.script.harder)} of harder kinds"
        )
        print(
            "| compaction | max_history_messages | compactions | facts in the final context | facts answered | time |"
        )
        print("|---|---|---|---|---|---|")
        store = Store.open(work / "readings.db")
        reader = None if args.scripted or args.no_readings else message_reader(model, store)
        for limit in args.limits:
            outcome = await run_co(model, window, limit, args.turns, args.ask, work, args.dump, variant, reader)
            print(row("co", limit, outcome, variant), flush=True)
            if outcome.lost:
                print(f"    not in co's final context: {', '.join(f'{f.kind} ({f.key})' for f in outcome.lost)}")
            if not args.no_baseline:
                outcome = await run_plain(model, limit, args.turns, args.ask, args.dump, variant)
                print(row("plain rolling", limit, outcome, variant), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
