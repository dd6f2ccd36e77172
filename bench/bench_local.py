"""Benchmark the embedded local model: load time, time to first token and tokens per second.

Runs a few prompts through a pydantic-ai Agent on the default (bundled) weights and prints a table.

    python bench/bench_local.py [--n-ctx 4096] [--max-tokens 128] [--threads N] [--model local]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from dataclasses import dataclass

from pydantic_ai import Agent, AgentRunResultEvent
from pydantic_ai.messages import PartDeltaEvent, PartStartEvent, TextPart, TextPartDelta

from co_cli.local.model import LocalModel, default_threads
from co_cli.local.weights import resolve_weights

LONG_TEXT = (
    "The terminal is where many developers spend their day. A chat assistant that lives there has to be quick "
    "to start, keep every conversation, and stay within the model's context window as a session grows. "
) * 12
PROMPTS = (
    "What is the capital of France?",
    "Explain in three sentences what a context window is.",
    "Write a short poem about the sea.",
    "List five fruits, one per line.",
    f"Summarise this text in one sentence:\n{LONG_TEXT}",
)
INSTRUCTIONS = "You are co, a helpful assistant in a terminal. Be concise."


@dataclass(frozen=True)
class Measurement:
    prompt: str
    prompt_tokens: int
    output_tokens: int
    first_token_s: float
    total_s: float

    @property
    def tokens_per_second(self) -> float:
        generating = self.total_s - self.first_token_s
        return (self.output_tokens - 1) / generating if self.output_tokens > 1 and generating > 0 else 0.0


async def measure(agent: Agent[None, str], prompt: str) -> Measurement:
    start = time.perf_counter()
    first: float | None = None
    async with agent.run_stream_events(prompt) as events:
        async for event in events:
            is_text = (isinstance(event, PartStartEvent) and isinstance(event.part, TextPart)) or (
                isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta)
            )
            if is_text and first is None:
                first = time.perf_counter() - start
            if isinstance(event, AgentRunResultEvent):
                usage = event.result.usage
    total = time.perf_counter() - start
    return Measurement(prompt, usage.input_tokens, usage.output_tokens, first if first is not None else total, total)


def print_table(load_s: float, model: LocalModel, rows: list[Measurement]) -> None:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"model {model.model_name}  n_ctx {model.n_ctx}  max_tokens {model.max_tokens}  ", end="")
    print(f"threads {model.n_threads or default_threads()}  load average {load:.2f}")
    print(f"load time {load_s:.2f} s\n")
    header = f"{'prompt':<54} {'in tok':>6} {'out tok':>7} {'TTFT s':>7} {'tok/s':>6} {'total s':>7}"
    print(header)
    print("-" * len(header))
    for row in rows:
        first_line = row.prompt.splitlines()[0]
        label = first_line if len(first_line) <= 54 else first_line[:51] + "..."
        print(
            f"{label:<54} {row.prompt_tokens:>6} {row.output_tokens:>7} {row.first_token_s:>7.2f} "
            f"{row.tokens_per_second:>6.1f} {row.total_s:>7.2f}"
        )
    generated = sum(row.output_tokens - 1 for row in rows if row.output_tokens > 1)
    generating = sum(row.total_s - row.first_token_s for row in rows if row.output_tokens > 1)
    ttft = sorted(row.first_token_s for row in rows)[len(rows) // 2]
    print("-" * len(header))
    print(f"median TTFT {ttft:.2f} s   overall {generated / generating if generating else 0:.1f} tok/s")


async def run(spec: str, n_ctx: int, max_tokens: int, n_threads: int | None) -> None:
    model = LocalModel(resolve_weights(spec), n_ctx=n_ctx, max_tokens=max_tokens, n_threads=n_threads)
    start = time.perf_counter()
    model.ensure_loaded()
    load_s = time.perf_counter() - start
    agent = Agent(model, instructions=INSTRUCTIONS)
    rows = [await measure(agent, prompt) for prompt in PROMPTS]
    print_table(load_s, model, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local", help="'local' or 'local:/path/model.gguf'")
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: half the CPUs)")
    args = parser.parse_args()
    asyncio.run(run(args.model, args.n_ctx, args.max_tokens, args.threads))


if __name__ == "__main__":
    main()
