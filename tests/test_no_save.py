"""``--no-save`` leaves nothing in the data dir, the embedded model's saved state included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.models.test import TestModel

from co_cli.config import load_settings
from co_cli.terminal.chat import ChatOptions, run_chat


@pytest.mark.allow_model_requests
def test_no_save_keeps_the_local_model_state_out_of_the_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import co_cli.local.model as local_model

    data_dir = tmp_path / "data"
    monkeypatch.setenv("CO_CLI_DATA_DIR", str(data_dir))
    monkeypatch.setenv("CO_CLI_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    cache_dirs: list[Path | None] = []

    def fake_load(spec: str, *, n_ctx: int, max_tokens: int, cache_dir: Path | None = None) -> Any:
        cache_dirs.append(cache_dir)
        return TestModel(call_tools=[], custom_output_text="hello from the local model")

    monkeypatch.setattr(local_model, "load_local_model", fake_load)
    assert run_chat(ChatOptions(model="local", prompt="hi", save=False)) == 0
    assert "hello from the local model" in capsys.readouterr().out
    assert len(cache_dirs) == 1 and cache_dirs[0] is not None
    assert not cache_dirs[0].is_relative_to(data_dir)
    assert not data_dir.exists() or not any(data_dir.iterdir())

    assert run_chat(ChatOptions(model="local", prompt="hi")) == 0
    assert cache_dirs[-1] == load_settings().paths.local_model_cache == data_dir / "local-model-cache"
