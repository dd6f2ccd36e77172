"""Memory benchmark: retrieval + injection per request over many memories, and extraction off the critical path.

Usage: python bench/bench_memory.py [--sizes 1000 10000] [--runs 200]

1. Per request: the ``## Memory`` section for a prompt (FTS5 BM25 candidates, ranking with recency, near-
   duplicate check, budget), as the agent's instructions function computes it before each model request.
2. Time to the next prompt: a whole turn through the turn core (FunctionModel), with extraction off and with
   extraction on (its model answering only after 300 ms): the turn returns as fast either way, because the
   extraction runs in a background task.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from co_cli.memory.inject import relevant_memories, render_memory_section  # noqa: E402
from co_cli.store.db import Database  # noqa: E402
from co_cli.store.memories import Memories  # noqa: E402

_WORD_TEXT = (
    "kestrel deploy build test docker python rust go postgres redis cache queue vim emacs tabs spaces lint "
    "format review branch release staging prod api client server schema migration backup monitor alert log "
    "trace metric token budget window model prompt editor theme dark light keyboard shell zsh bash fish"
)
WORDS = _WORD_TEXT.split()
PROMPTS = (
    "how do I deploy kestrel to staging?",
    "which editor theme do I like?",
    "write a postgres migration for the queue schema",
    "why is the redis cache slow in prod?",
    "hello, what can you do?",
)


VOCABULARY = [*WORDS, *(f"term{i}" for i in range(5000))]
ZIPF = [1.0 / (rank + 1) for rank in range(len(VOCABULARY))]
"""Word frequencies as in natural text (Zipf): a few words are everywhere, most are rare."""


def populate(store: Memories, count: int, rng: random.Random, *, narrow: bool = False) -> None:
    """``count`` active memories; ``narrow``: drawn from only 48 words (every prompt word then matches ~20%
    of all memories, the worst case for full-text ranking)."""
    now = time.time()
    with store.db.transaction() as tx:
        for i in range(count):
            n = rng.randint(5, 14)
            picked = [rng.choice(WORDS) for _ in range(n)] if narrow else rng.choices(VOCABULARY, ZIPF, k=n)
            text = "The user " + " ".join(picked) + f" (note {i})"
            kind = "instruction" if i % 500 == 0 else rng.choice(("fact", "preference"))
            scope = "project" if i % 3 == 0 else "user"
            project = f"/repo/{i % 7}" if scope == "project" else ""
            at = now - rng.uniform(0, 365) * 86400
            tx.execute(
                "INSERT INTO memories (text, scope, project, kind, status, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, 'active', ?, ?)",
                (text, scope, project, kind, at, at),
            )


def bench_retrieval(sizes: list[int], runs: int) -> None:
    print(
        f"{'memories':>9} | {'vocabulary':>10} | {'retrieval+injection ms median':>30} | {'p95':>6} | {'max':>6} | "
        f"{'memories sent':>13}"
    )
    for size, narrow in [(size, narrow) for size in sizes for narrow in (False, True)]:
        with tempfile.TemporaryDirectory() as tmp:
            db = Database.open(Path(tmp) / "co.db")
            store = Memories(db)
            populate(store, size, random.Random(size), narrow=narrow)
            timings: list[float] = []
            sent: list[int] = []
            for i in range(runs):
                prompt = PROMPTS[i % len(PROMPTS)]
                start = time.perf_counter()
                chosen = relevant_memories(store, prompt, "/repo/3", 800, time.time())
                render_memory_section(chosen)
                timings.append((time.perf_counter() - start) * 1000)
                sent.append(len(chosen))
            timings.sort()
            p95 = timings[int(len(timings) * 0.95) - 1]
            print(
                f"{size:>9} | {'48 words' if narrow else 'Zipf 5k':>10} | {statistics.median(timings):>30.2f} | "
                f"{p95:>6.2f} | {timings[-1]:>6.2f} | {statistics.median(sent):>13.0f}"
            )
            db.close()


def bench_next_prompt(runs: int) -> None:
    from pydantic_ai import CancellationToken
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from co_cli.config import load_settings
    from co_cli.deps import CoDeps
    from co_cli.models import ModelChoice, ResolvedModel
    from co_cli.session import Conversation
    from co_cli.store import Store

    async def chat(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if info.model_request_parameters.output_mode != "text":  # the extraction call: a slow summariser
            await asyncio.sleep(0.3)
            if info.output_tools:
                return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"facts": []})])
            return ModelResponse(parts=[TextPart('{"facts": []}')])
        return ModelResponse(parts=[TextPart("ok")])

    class Quiet:
        def working(self, what: str) -> None: ...
        def text(self, delta: str) -> None: ...
        def tool_call(self, name: str, args: object) -> None: ...
        def tool_result(self, name: str, content: object) -> None: ...
        def notice(self, message: str) -> None: ...
        def end(self, interrupted: bool = False) -> None: ...

    print(f"\n{'extraction':>10} | {'turn -> next prompt ms (median)':>32} | {'max':>6}")
    for extract in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            import os

            os.environ["CO_CLI_DATA_DIR"] = f"{tmp}/data"
            os.environ["CO_CLI_CONFIG_DIR"] = f"{tmp}/config"
            loaded = load_settings(cwd=Path(tmp))
            loaded.paths.ensure_data_dir()
            store = Store.open(loaded.paths.db)
            model = FunctionModel(chat, model_name="bench")
            resolved = ResolvedModel(model=model, choice=ModelChoice(spec="bench", reason="bench"),
                                     context_window=100_000, window_source="bench")  # fmt: skip
            deps = CoDeps(settings=loaded.settings, paths=loaded.paths, cwd=Path(tmp), store=store)
            conv = Conversation(resolved=resolved, deps=deps)
            if extract:
                conv.background.attach_extraction()

            async def turns(conv: Conversation = conv) -> list[float]:
                timings = []
                for i in range(runs):
                    start = time.perf_counter()
                    await conv.run_turn(
                        f"I like the number {i} and the colour blue a lot", Quiet(), CancellationToken()
                    )
                    timings.append((time.perf_counter() - start) * 1000)
                if conv.background.memory_worker is not None:
                    await conv.background.memory_worker.drain()
                return timings

            timings = asyncio.run(turns())
            print(f"{'on' if extract else 'off':>10} | {statistics.median(timings):>32.1f} | {max(timings):>6.1f}")
            store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    bench_retrieval(args.sizes, args.runs)
    bench_next_prompt(args.turns)


if __name__ == "__main__":
    main()
