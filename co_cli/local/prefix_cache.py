"""Saved model state after the system prompt, so a new process does not read co's instructions again.

Every prompt starts with the same system message (instructions and tool list, about 1,000 tokens), which a
small model on a CPU takes several seconds to read. After reading it once, the KV state is saved to a private
file keyed by the model and the exact tokens; the next process restores it in milliseconds and reads only
what follows. The logits are not saved (the rest of the prompt is always evaluated after the prefix).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

KEEP_FILES = 3
MAGIC = b"co-prefix-state-1\n"


def state_path(cache_dir: Path, model_path: Path, n_ctx: int, tokens: list[int]) -> Path:
    digest = hashlib.sha256(f"{model_path.resolve()}|{n_ctx}|".encode() + json.dumps(tokens).encode())
    return cache_dir / f"{digest.hexdigest()[:32]}.state"


def restore_or_compute(llama: Any, prefix_text: str, full_text: str, model_path: Path, cache_dir: Path) -> bool:
    """Put ``llama`` in the state after ``prefix_text`` (restored from disk, or computed and saved).

    Only when the model has nothing evaluated yet and the prefix tokenizes as the start of the full prompt.
    Returns whether the prefix state is in place. Any problem leaves the model untouched (it reads the
    whole prompt, as without a cache).
    """
    if llama.n_tokens != 0 or not prefix_text or not full_text.startswith(prefix_text):
        return False
    prefix = llama.tokenize(prefix_text.encode("utf-8"), special=True)
    full = llama.tokenize(full_text.encode("utf-8"), special=True)
    if len(prefix) < 2 or full[: len(prefix)] != prefix or len(full) <= len(prefix):
        return False
    path = state_path(cache_dir, model_path, llama.n_ctx(), prefix)
    try:
        if path.is_file() and _restore(llama, path, prefix):
            os.utime(path)
            return True
        llama.reset()
        llama.eval(prefix)
        _save(llama, path)
        _prune(cache_dir)
        return True
    except Exception:  # a cache must never break an answer
        with contextlib.suppress(Exception):
            llama.reset()
        return False


def _save(llama: Any, path: Path) -> None:
    state = llama.save_state()
    header = {
        "n_tokens": int(state.n_tokens),
        "state_size": int(state.llama_state_size),
        "seed": int(state.seed),
        "scores_shape": list(state.scores.shape),
    }
    ids = state.input_ids[: state.n_tokens].astype("int32").tobytes()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(MAGIC)
        handle.write(json.dumps(header).encode() + b"\n")
        handle.write(ids)
        handle.write(state.llama_state)
    os.replace(tmp, path)


def _restore(llama: Any, path: Path, prefix: list[int]) -> bool:
    import numpy as np
    from llama_cpp.llama import LlamaState

    data = path.read_bytes()
    if not data.startswith(MAGIC):
        return False
    header_end = data.index(b"\n", len(MAGIC))
    header = json.loads(data[len(MAGIC) : header_end])
    n_tokens = header["n_tokens"]
    ids_end = header_end + 1 + 4 * n_tokens
    ids = np.frombuffer(data[header_end + 1 : ids_end], dtype=np.int32).astype(np.intc)
    if list(ids) != prefix:
        return False
    input_ids = np.zeros(llama.input_ids.shape, dtype=np.intc)
    input_ids[:n_tokens] = ids
    llama.load_state(
        LlamaState(
            input_ids=input_ids,
            scores=np.zeros(header["scores_shape"], dtype=np.single),
            n_tokens=n_tokens,
            llama_state=data[ids_end : ids_end + header["state_size"]],
            llama_state_size=header["state_size"],
            seed=header["seed"],
        )
    )
    return True


def _prune(cache_dir: Path) -> None:
    files = sorted(cache_dir.glob("*.state"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in files[KEEP_FILES:]:
        with contextlib.suppress(OSError):
            old.unlink()
