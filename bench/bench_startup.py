"""Startup benchmark: `co --help` and `co chat` time-to-prompt (median of several runs).

Usage: python bench/bench_startup.py [--runs N]
Runs against a temporary data/config dir with model=test, so no key or network is needed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import pexpect

PROMPT = r"\x1b\[\?2004h.*?co>"  # prompt_toolkit switches on bracketed paste, then draws the prompt


def env_for(tmp: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CO_CLI_")}
    env.update(
        CO_CLI_DATA_DIR=f"{tmp}/data",
        CO_CLI_CONFIG_DIR=f"{tmp}/config",
        CO_CLI_MODEL="test",
        TERM="xterm",
        PROMPT_TOOLKIT_NO_CPR="1",
    )
    return env


def time_help(env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "co_cli", "--help"], env=env, capture_output=True, check=True)
    return time.perf_counter() - start


def time_to_prompt(env: dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    child = pexpect.spawn(sys.executable, ["-m", "co_cli", "chat"], env=env, cwd=cwd, encoding="utf-8", timeout=30)
    child.expect(PROMPT)
    elapsed = time.perf_counter() - start
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = env_for(tmp)
        time_help(env)  # warm the file cache and bytecode
        helps = [time_help(env) for _ in range(args.runs)]
        time_to_prompt(env, tmp)
        prompts = [time_to_prompt(env, tmp) for _ in range(args.runs)]
    print(f"{'measure':<28}{'median':>10}{'min':>10}{'max':>10}   target")
    for name, values, target in (
        ("co --help", helps, "< 0.30 s"),
        ("co chat time-to-prompt", prompts, "< 0.60 s"),
    ):
        print(f"{name:<28}{statistics.median(values):>9.3f}s{min(values):>9.3f}s{max(values):>9.3f}s   {target}")


if __name__ == "__main__":
    main()
