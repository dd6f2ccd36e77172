"""A project with its own settings in a temporary directory, and an asker answering the trust question as scripted."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in list(__import__("os").environ):
        if key.startswith("CO_CLI_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("CO_CLI_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("CO_CLI_DATA_DIR", str(tmp_path / "data"))
    path = tmp_path / "repo"
    (path / ".co-cli").mkdir(parents=True)
    return path


class Asker:
    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.questions: list[str] = []

    def __call__(self, question: str) -> str:
        self.questions.append(question)
        return self.answer
