"""The embedded model's state after co's instructions, saved between processes.

co's instructions and tool list are about a thousand tokens the model would read again at the start of
every process. The first time, the engine reads just that prefix and its slot (tokens and KV cache) is
saved to a file named after the model, the context size and the prefix's tokens; a later process restores
the file into its fresh engine, and the engine's own prompt cache then reads only what follows the prefix.
A restored state is only ever used as far as its tokens match the new prompt, so a stale file cannot
change an answer, only fail to speed it up.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

KEEP_FILES = 3
SUFFIX = ".slot"


def state_name(model_path: Path, n_ctx: int, tokens: list[int]) -> str:
    stat = model_path.stat()
    identity = f"{model_path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{n_ctx}|"
    digest = hashlib.sha256(identity.encode() + json.dumps(tokens).encode())
    return f"{digest.hexdigest()[:32]}{SUFFIX}"


def restore_or_compute(engine: Any, prefix_text: str, full_text: str, model_path: Path, n_ctx: int) -> bool:
    """Put the engine's slot in the state after ``prefix_text`` (restored from disk, or computed and saved).

    Only for a fresh engine (the caller checks) and when the prefix tokenizes as the start of the full
    prompt. Returns whether the prefix state is in place. Any problem leaves the engine as it was (the
    answer reads the whole prompt, as without a cache).
    """
    cache_dir = engine.slot_dir
    if cache_dir is None or not prefix_text or not full_text.startswith(prefix_text):
        return False
    try:
        prefix = engine.tokenize(prefix_text, special=True)
        full = engine.tokenize(full_text, special=True)
        if len(prefix) < 2 or full[: len(prefix)] != prefix or len(full) <= len(prefix):
            return False
        name = state_name(model_path, n_ctx, prefix)
        path = cache_dir / name
        if path.is_file() and engine.restore_slot(name) == len(prefix):
            os.utime(path)
            return True
        engine.evaluate_prompt(prefix_text)
        _save(engine, cache_dir, name)
        _prune(cache_dir)
        return True
    except Exception:  # a cache must never break an answer
        with contextlib.suppress(Exception):
            engine.erase_slot()
        return False


def _save(engine: Any, cache_dir: Path, name: str) -> None:
    """Save under a temporary name, then move into place: a reader never sees half a file."""
    tmp = f"{name}.{os.getpid()}.part"
    engine.save_slot(tmp)
    os.chmod(cache_dir / tmp, 0o600)
    os.replace(cache_dir / tmp, cache_dir / name)


def _prune(cache_dir: Path) -> None:
    files = sorted(cache_dir.glob(f"*{SUFFIX}"), key=lambda p: p.stat().st_mtime, reverse=True)
    legacy = list(cache_dir.glob("*.state"))  # the format of an earlier engine, unreadable by this one
    for old in files[KEEP_FILES:] + legacy:
        with contextlib.suppress(OSError):
            old.unlink()
