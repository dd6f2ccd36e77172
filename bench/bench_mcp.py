"""MCP benchmark: time-to-prompt with MCP servers configured, and what a 50-tool server costs per request.

Usage: python bench/bench_mcp.py [--runs N]

1. `co chat` time-to-prompt (median of N) with no server, one and three stdio servers (the tests' MCP server,
   tests/support/mcp_server.py, a Python process that imports the `mcp` package): the servers start in the
   background, so the prompt should not wait for them.
2. `co chat -p` against the tests' scripted OpenAI-compatible server with one 50-tool MCP server (plus its six
   own tools): the first request's tools and size, with the schemas sent whole (mcp_schema_budget_tokens 0) and
   with the default budget (names and one-line descriptions, schemas loaded with search_tools).

Tokens are the request body's characters / 4 (the scripted server's estimate); no key or network is needed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pexpect

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support.scripted_server import ScriptedServer, Text  # noqa: E402

PROMPT = r"\x1b\[\?2004h.*?co>"
SERVER = str(REPO / "tests" / "support" / "mcp_server.py")


def env_for(tmp: str, servers: dict[str, object], **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CO_CLI_")}
    env.update(
        CO_CLI_DATA_DIR=f"{tmp}/data",
        CO_CLI_CONFIG_DIR=f"{tmp}/config",
        CO_CLI_MODEL="test",
        CO_CLI_MEMORY_EXTRACT="off",
        CO_CLI_AUTO_TITLE="false",
        TERM="xterm",
        PROMPT_TOOLKIT_NO_CPR="1",
        PYTHONPATH=str(REPO),
    )
    env.update(extra)
    if servers:
        env["CO_CLI_MCP_SERVERS"] = json.dumps(servers)
    return env


def stdio(*args: str) -> dict[str, object]:
    return {"command": sys.executable, "args": [SERVER, "stdio", *args]}


def time_to_prompt(env: dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    child = pexpect.spawn(sys.executable, ["-m", "co_cli", "chat"], env=env, cwd=cwd, encoding="utf-8", timeout=30)
    child.expect(PROMPT)
    elapsed = time.perf_counter() - start
    child.sendcontrol("d")
    child.expect(pexpect.EOF, timeout=30)
    return elapsed


def prompt_times(runs: int) -> list[tuple[str, list[float]]]:
    cases = {
        "no MCP server": {},
        "1 stdio server": {"a": stdio()},
        "3 stdio servers": {"a": stdio(), "b": stdio(), "c": stdio("--tools", "50")},
    }
    times: dict[str, list[float]] = {label: [] for label in cases}
    with tempfile.TemporaryDirectory() as tmp:
        envs = {label: env_for(tmp, servers) for label, servers in cases.items()}
        for env in envs.values():
            time_to_prompt(env, tmp)  # warm the file cache and bytecode
        for _ in range(runs):  # interleaved, so a busy moment of the machine falls on every case alike
            for label, env in envs.items():
                times[label].append(time_to_prompt(env, tmp))
    return list(times.items())


def first_request(budget: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp, ScriptedServer() as server:
        server.script(Text("ok"))
        env = env_for(
            tmp,
            {"big": stdio("--tools", "50")},
            CO_CLI_MODEL="scripted",
            CO_CLI_BASE_URL=server.base_url,
            CO_CLI_API_KEY="bench-key",
            CO_CLI_MCP_SCHEMA_BUDGET_TOKENS=str(budget),
        )
        subprocess.run(
            [sys.executable, "-m", "co_cli", "chat", "-p", "hi"], env=env, cwd=tmp, capture_output=True, check=True
        )
        body = server.chat_requests[0].body or {}
    tools = body.get("tools", [])
    mcp_tools = [t for t in tools if t["function"]["name"].startswith("mcp__")]
    system = "".join(str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "system")
    return {
        "tools sent": len(tools),
        "MCP tools sent": len(mcp_tools),
        "tools JSON tokens": len(json.dumps(tools)) // 4,
        "instructions tokens": len(system) // 4,
        "request tokens": len(json.dumps(body)) // 4,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"{'co chat time-to-prompt':<28}{'median':>10}{'min':>10}{'max':>10}")
    for label, times in prompt_times(args.runs):
        print(f"{label:<28}{statistics.median(times):>9.3f}s{min(times):>9.3f}s{max(times):>9.3f}s")
    print()
    whole, budgeted = first_request(0), first_request(4000)
    print(f"{'50-tool server, 1st request':<28}{'whole':>12}{'budget 4000':>14}")
    for key in whole:
        print(f"{key:<28}{whole[key]:>12,}{budgeted[key]:>14,}")


if __name__ == "__main__":
    main()
