"""llama.cpp's own server engine, embedded in this process through the ``xllamacpp`` binary wheel.

Answers are generated in process (``Server.handle_chat_completions`` with a callback that can stop
them). What the binding reaches only over HTTP (the chat template, tokenizing, the slot save/restore
that keeps the state after co's instructions between runs) goes over a unix socket in a private
directory (0700, made by ``tempfile.mkdtemp``) with a random key: the engine's listener is never a TCP
port, and another user cannot connect to it. The directory is removed when the engine is closed; one left
by a co that was killed is removed by the next engine started (once nothing serves its socket).

A trap of the engine: destroying it before its HTTP listener has started serving hangs the process (the
listener's stop is lost and its thread is joined forever). ``start_engine`` therefore returns only once
the listener has answered a request, so no path can destroy an engine that is not serving yet.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import secrets
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SOCKET_NAME = "engine.sock"
RUNTIME_PREFIX = "co-engine-"
STALE_AFTER_S = 600.0
READY_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 120.0
_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux


class EngineError(RuntimeError):
    """The engine refused or failed a request; the message is one line for the user."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


CLOSE_WAIT_S = 30.0
"""How long closing waits for the engine to stop (see ``Engine.close``)."""


@dataclass
class Engine:
    """A started engine: the in-process server, its private socket and key."""

    server: Any
    runtime_dir: Path
    key: str
    slot_dir: Path | None
    closed: bool = False
    _close_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def socket_path(self) -> Path:
        return self.runtime_dir / SOCKET_NAME

    # --- over the private socket --------------------------------------------------------------------------

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One request to the engine's listener, with the engine's key; the JSON answer. EngineError on any
        failure."""
        status, data = self.raw_request(method, path, body, key=self.key)
        try:
            answer = json.loads(data) if data else {}
        except ValueError:
            answer = {}
        if status != 200:
            error = answer.get("error") if isinstance(answer, dict) else None
            message = error.get("message") if isinstance(error, dict) else data[:200].decode("utf-8", "replace")
            raise EngineError(f"{method} {path}: HTTP {status}: {' '.join(str(message).split())}")
        return answer

    def raw_request(self, method: str, path: str, body: dict[str, Any] | None, *, key: str | None) -> tuple[int, bytes]:
        """The status and body of one HTTP request over the socket, sent with ``key`` (None: no key)."""
        headers = {"Content-Type": "application/json"}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        connection = _UnixConnection(str(self.socket_path), REQUEST_TIMEOUT_S)
        try:
            connection.request(method, path, json.dumps(body) if body is not None else None, headers)
            response = connection.getresponse()
            return response.status, response.read()
        except OSError as exc:
            raise EngineError(f"{method} {path}: {exc}") from None
        finally:
            connection.close()

    def props(self) -> dict[str, Any]:
        answer: dict[str, Any] = self.request("GET", "/props")
        return answer

    def apply_template(self, messages: list[dict[str, str]], *, add_generation_prompt: bool = True) -> str:
        """``messages`` rendered with the model's own chat template, as the engine renders them to answer."""
        body = {"messages": messages, "add_generation_prompt": add_generation_prompt}
        return str(self.request("POST", "/apply-template", body)["prompt"])

    def tokenize(self, text: str, *, special: bool) -> list[int]:
        """Tokens of ``text`` (``special``: special tokens written in it count as one token each)."""
        if not text:
            return []
        body = {"content": text, "add_special": False, "parse_special": special}
        return [int(token) for token in self.request("POST", "/tokenize", body)["tokens"]]

    def save_slot(self, filename: str) -> None:
        """Save the slot's state (tokens and KV cache) to ``filename`` in the slot directory."""
        self.request("POST", "/slots/0?action=save", {"filename": filename})

    def restore_slot(self, filename: str) -> int:
        """Load the slot's state from ``filename``; the number of tokens restored."""
        return int(self.request("POST", "/slots/0?action=restore", {"filename": filename}).get("n_restored", 0))

    def erase_slot(self) -> None:
        self.request("POST", "/slots/0?action=erase")

    # --- in process -----------------------------------------------------------------------------------------

    def chat(self, body: dict[str, Any], on_chunk: Callable[[dict[str, Any]], bool]) -> None:
        """Stream a chat completion; ``on_chunk`` gets each chunk and returns True to stop generating.

        A ``json_schema`` in ``body`` constrains the answer to it, through ``json_grammar``. Blocks until the
        answer is complete or stopped; run it in a worker thread. While the prompt is read the engine sends a
        progress chunk after each batch (``PROMPT_BATCH`` tokens), so ``on_chunk`` can stop it then too, not only
        once tokens come."""
        failure: list[str] = []
        if "json_schema" in body:
            body = dict(body)
            body["grammar"] = json_grammar(body.pop("json_schema"))

        def callback(chunk: Any) -> bool:
            if isinstance(chunk, dict) and "error" in chunk and "choices" not in chunk:
                failure.append(_error_text(chunk["error"]))
                return True
            if isinstance(chunk, dict) and "code" in chunk and "message" in chunk and "choices" not in chunk:
                failure.append(_error_text(chunk))
                return True
            return bool(on_chunk(chunk)) if isinstance(chunk, dict) else False

        self.server.handle_chat_completions({**body, "stream": True, "return_progress": True}, callback)
        if failure:
            raise EngineError(failure[0])

    def evaluate_prompt(self, prompt: str) -> None:
        """Read ``prompt`` into the slot without generating (what a later answer then starts from)."""
        answer = self.server.handle_completions({"prompt": prompt, "n_predict": 0, "cache_prompt": True})
        if isinstance(answer, dict) and ("error" in answer or "code" in answer) and "content" not in answer:
            raise EngineError(_error_text(answer.get("error", answer)))

    # --- lifetime -----------------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the engine and remove its private directory. Idempotent."""
        with self._close_lock:
            if self.closed:
                return
            self.closed = True
            held = [self.server]
            self.server = None
            # Dropping the last reference stops the engine here, not at interpreter shutdown. The binding's
            # destructor joins the engine's threads and has been seen to wait for ever when the engine is closed
            # while still starting on a busy machine: it runs in a thread of its own, waited for at most
            # CLOSE_WAIT_S, so that closing never hangs co (the files go either way).
            stopper = threading.Thread(target=held.clear, name="co-engine-close", daemon=True)
            stopper.start()
            stopper.join(CLOSE_WAIT_S)
            shutil.rmtree(self.runtime_dir, ignore_errors=True)


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return " ".join(str(error.get("message") or error).split())[:300]
    return " ".join(str(error).split())[:300]


def json_grammar(schema: dict[str, Any]) -> str:
    """The engine's grammar for JSON that follows ``schema``, on one line with one space after each comma and
    colon (``{"a": 1, "b": [2, 3]}``), as models are used to writing JSON.

    The engine would build a grammar from a ``response_format`` itself, but that one allows free whitespace
    between any two tokens, which a small model fills with tabs until ``max_tokens`` (docs/performance.md);
    compact JSON (no space at all) is not what models write, and pushed a 1.5B model to answer an empty list
    for every message. The binding's own converter (llguidance) takes its options from the schema's
    ``x-guidance`` key."""
    import xllamacpp

    options = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
    return str(xllamacpp.json_schema_to_grammar(json.dumps({**schema, "x-guidance": options})))


def remove_stale_runtime_dirs(parent: Path, min_age_s: float = STALE_AFTER_S) -> list[Path]:
    """Remove what engines of co processes that were killed left in ``parent``: this user's directories
    older than ``min_age_s`` whose socket is gone or refuses connections (nobody serves it). The ones removed."""
    removed: list[Path] = []
    now = time.time()
    for path in parent.glob(f"{RUNTIME_PREFIX}*"):
        try:
            info = path.lstat()
            if not path.is_dir() or info.st_uid != os.getuid() or now - info.st_mtime < min_age_s:
                continue
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.settimeout(1)
                probe.connect(str(path / SOCKET_NAME))
        except (FileNotFoundError, ConnectionRefusedError):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        except OSError:
            continue
    return removed


def _runtime_dir() -> Path:
    """A new private directory (0700) for the socket, short enough for a unix socket path."""
    with contextlib.suppress(OSError):
        remove_stale_runtime_dirs(Path(tempfile.gettempdir()))
    path = Path(tempfile.mkdtemp(prefix=RUNTIME_PREFIX))
    if len(str(path / SOCKET_NAME)) > _MAX_SOCKET_PATH:
        path.rmdir()
        path = Path(tempfile.mkdtemp(prefix=RUNTIME_PREFIX, dir="/tmp"))
    os.chmod(path, 0o700)
    return path


PROMPT_CACHE_MIB = 512
"""Host memory for the engine's prompt cache: the states of the prompts it read last (co's chat instructions, memory
extraction's, the summariser's) are kept and restored when a prompt starts the same way. The engine holds one
conversation at a time, so without it every switch between the chat and a background reading reads the whole
prefix again (measured on the 1.5B model, 2 cores: 53-67 s a reading, 11-14 s with the cache)."""


PROMPT_BATCH = 128
"""Tokens of the prompt the engine reads in one step; a request can be stopped only between steps. At the engine's
default (2048) a stop waited for the step to end, half a minute or more on 2 cores (Ctrl-C at exit while memory
extraction read its prompt). Measured on the 1.5B model, 2 cores, a 1000-token prompt: read in 22.7 s at 128 tokens
a step, 25.2 s at 256, 25.4 s at 512, 27.9 s at 64; the longest step 2.3 s at 128, 4.9 s at 256, 9.0 s at 512."""


def start_engine(
    model_path: Path, *, n_ctx: int, n_threads: int, n_threads_batch: int, slot_dir: Path | None
) -> Engine:
    """Load ``model_path`` and start the engine; returns once its listener serves (see the module doc).

    ``slot_dir``: where slot states are saved and restored (None: slots cannot be saved)."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(model_path)
    params.n_ctx = n_ctx
    params.n_batch = PROMPT_BATCH
    params.n_parallel = 1
    params.cpuparams.n_threads = n_threads
    params.cpuparams_batch.n_threads = n_threads_batch
    # The extra CPU buffer types (weight repacking, AMX) crash in decode on some virtual machines whose CPUs
    # advertise AMX; a small model gains little from them.
    params.no_extra_bufts = True
    params.verbosity = -1
    params.ui = False
    params.endpoint_metrics = False
    params.cors_origins = ""
    params.n_threads_http = 2
    params.cache_ram_mib = PROMPT_CACHE_MIB
    runtime_dir = _runtime_dir()
    key = secrets.token_urlsafe(32)
    params.hostnames = [str(runtime_dir / SOCKET_NAME)]
    params.api_keys = [key]
    if slot_dir is not None:
        slot_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        params.slot_save_path = str(slot_dir) + os.sep  # the engine joins names to it without a separator
    try:
        server = xllamacpp.Server(params)
    except Exception as exc:
        shutil.rmtree(runtime_dir, ignore_errors=True)
        raise EngineError(f"cannot load model file {model_path}: {_error_text(exc)}") from None
    engine = Engine(server=server, runtime_dir=runtime_dir, key=key, slot_dir=slot_dir)
    try:
        wait_until_serving(engine, READY_TIMEOUT_S)
    except EngineError:
        # Not serving: destroying it now could hang, so it is kept (stopped at exit with the process).
        _UNSTOPPABLE.append(server)
        engine.closed = True
        shutil.rmtree(runtime_dir, ignore_errors=True)
        raise
    return engine


_UNSTOPPABLE: list[Any] = []
"""Engines whose listener never served: kept referenced rather than destroyed (which would hang)."""


def wait_until_serving(engine: Engine, timeout: float) -> None:
    """Block until the engine's listener answers ``/health``; EngineError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(EngineError):
            status, _ = engine.raw_request("GET", "/health", None, key=engine.key)
            if status == 200:
                return
        if time.monotonic() > deadline:
            raise EngineError(f"the engine did not start serving within {timeout:.0f} s")
        time.sleep(0.005)
