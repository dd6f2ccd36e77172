"""Per-request overhead of context governance, without any model call.

Run: python bench/bench_context.py [--repeat N]

For histories of 100, 1,000 and 10,000 messages (user turns with tool calls; outputs of 300 and 2,500
characters, and 60,000 every tenth turn; responses carrying reported usage) it times:

- estimate:   estimate_history alone
- pipeline:   the governor's processing with no compaction cached: offload + trim + repair + estimate
- cached:     the whole before_model_request hook when a compaction is cached (the steady state of a
              long session: most of the history is replaced by head + summary)

and prints the median (and, for the pipeline, the best) in milliseconds. The target is under 5 ms at
1,000 messages and linear growth.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext, ModelRequestParameters  # noqa: E402
from pydantic_ai.models.function import FunctionModel  # noqa: E402
from pydantic_ai.usage import RequestUsage  # noqa: E402

from co_cli.config import Settings  # noqa: E402
from co_cli.context.governor import ContextGovernor  # noqa: E402
from co_cli.context.policy import GovernorConfig
from co_cli.context.tokens import estimate_history  # noqa: E402

SIZES = (100, 1_000, 10_000)


def build_history(n_messages: int) -> list[ModelMessage]:
    """User turns of 4 messages (prompt, tool call, tool result, answer), ending with a new prompt."""
    messages: list[ModelMessage] = []
    turn = 0
    while len(messages) < n_messages - 1:
        size = 60_000 if turn % 10 == 9 else (2_500 if turn % 2 else 300)
        output = "\n".join(f"{turn:05d} line {i} " + "x" * 60 for i in range(size // 70 + 1))[:size]
        call_id = f"call_{turn}"
        messages += [
            ModelRequest(parts=[UserPromptPart(f"Please look at module {turn} and fix the failing test.")]),
            ModelResponse(parts=[ToolCallPart("read_file", {"path": f"src/module_{turn}.py"}, call_id)]),
            ModelRequest(parts=[ToolReturnPart("read_file", output, call_id)]),
            ModelResponse(
                parts=[TextPart(f"Module {turn} looks fine; the bug was an off-by-one in the loop.")],
                usage=RequestUsage(input_tokens=1_000 + 40 * turn, output_tokens=20),
            ),
        ]
        turn += 1
    messages = messages[: n_messages - 1]
    while not isinstance(messages[-1], ModelResponse) or any(isinstance(p, ToolCallPart) for p in messages[-1].parts):
        messages.pop()
    messages.append(ModelRequest(parts=[UserPromptPart("And now the next one, please.")]))
    return messages


def _summarizer() -> FunctionModel:
    return FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("Summary: modules fixed so far.")]))


def make_governor(directory: Path, *, max_history_messages: int) -> ContextGovernor:
    settings = Settings(
        max_history_messages=max_history_messages,
        tool_output_trim_chars=2_000,
        tool_output_offload_chars=40_000,
        context_window=0,
    )
    return ContextGovernor(
        GovernorConfig.from_settings(settings, 10**9),
        summarizer=_summarizer(),
        offload_dir=lambda: directory,
        overhead_tokens=2_000,
    )


def _request_context(messages: list[ModelMessage]) -> ModelRequestContext:
    return ModelRequestContext(
        model=_summarizer(),
        messages=list(messages),
        model_settings=None,
        model_request_parameters=ModelRequestParameters(),
    )


async def _hook(governor: ContextGovernor, messages: list[ModelMessage]) -> list[ModelMessage]:
    ctx: Any = SimpleNamespace(run_id="bench", model=None)
    return (await governor.before_model_request(ctx, _request_context(messages))).messages


def timed_ms(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(median, best) milliseconds over ``repeat`` calls after one warm-up call (which writes files)."""
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), min(samples)


Row = tuple[int, float, tuple[float, float], float, int]


def run(repeat: int) -> list[Row]:
    rows = []
    loop = asyncio.new_event_loop()
    with tempfile.TemporaryDirectory() as tmp:
        for n in SIZES:
            history = build_history(n)
            directory = Path(tmp) / f"out-{n}"
            plain = make_governor(directory, max_history_messages=0)
            estimate, _ = timed_ms(lambda h=history: estimate_history(h, overhead_tokens=2_000), repeat)
            pipeline = timed_ms(lambda g=plain, h=history: g.process(h), repeat)
            cached_gov = make_governor(directory, max_history_messages=40)
            loop.run_until_complete(_hook(cached_gov, history))  # compacts once (summariser stub)
            grown = [
                *history,
                ModelResponse(parts=[ToolCallPart("read_file", {"path": "x"}, "next")]),
                ModelRequest(parts=[ToolReturnPart("read_file", "ok", "next")]),
            ]
            sent_len = len(loop.run_until_complete(_hook(cached_gov, grown)))
            cached, _ = timed_ms(lambda g=cached_gov, h=grown: loop.run_until_complete(_hook(g, h)), repeat)
            rows.append((len(history), estimate, pipeline, cached, sent_len))
    loop.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21)
    args = parser.parse_args()
    os.environ.pop("CO_CLI_MAX_HISTORY_MESSAGES", None)
    rows = run(args.repeat)
    header = ("messages", "estimate ms", "pipeline ms", "pipeline best", "cached hook ms", "sent msgs")
    print(" | ".join(f"{h:>14}" for h in header))
    print("-" * (17 * len(header) - 3))
    for n, estimate, (pipeline, best), cached, sent in rows:
        cells = (f"{n:,}", f"{estimate:.3f}", f"{pipeline:.3f}", f"{best:.3f}", f"{cached:.3f}", str(sent))
        print(" | ".join(f"{c:>14}" for c in cells))
    per_msg = ", ".join(f"{best / n * 1000:.2f}" for n, _, (_, best), _, _ in rows)
    print(f"pipeline best, µs per message: {per_msg}")


if __name__ == "__main__":
    main()
