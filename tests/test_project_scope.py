"""A project's .co-cli/settings.json comes with the code: it may act on its own project only, as far as each
setting's declared scope allows."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from co_cli.config import PROJECT_SCOPES, ScopeKind, Settings, load_settings, settings_reference
from co_cli.errors import ConfigError
from co_cli.store import Store
from tests.support.co_process import run_co

BEYOND_THE_PROJECT = ("trash_retention_days", "serve_max_request_bytes", "data_dir", "config_dir")


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """The user's config dir and a project (a repository) holding .co-cli/; no CO_CLI_ variable set."""
    for key in list(os.environ):
        if key.startswith("CO_CLI_"):
            monkeypatch.delenv(key)
    config, project = tmp_path / "xdg-config" / "co-cli", tmp_path / "repo"
    config.mkdir(parents=True)
    (project / ".co-cli").mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))  # the default dirs, under tmp_path
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    return config, project


def write(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data))


def project_file(project: Path) -> Path:
    return project / ".co-cli" / "settings.json"


def test_every_setting_declares_what_a_project_file_may_do() -> None:
    assert set(PROJECT_SCOPES) == set(Settings.model_fields)  # a new setting has to choose
    for name, scope in PROJECT_SCOPES.items():
        assert scope.kind in get_args(ScopeKind)
        assert bool(scope.why) == (scope.kind in ("user", "tighter")), name
        annotation = Settings.model_fields[name].annotation
        if scope.kind == "tighter" and scope.order:
            allowed = {False, True} if annotation is bool else set(get_args(annotation))
            assert set(scope.order) == allowed, name
        elif scope.kind == "tighter":
            assert annotation in (int, float), name  # lower is stricter
        assert settings_reference()[name]["project_file"] == scope.kind
    assert all(PROJECT_SCOPES[name].kind == "user" for name in BEYOND_THE_PROJECT)
    assert {n for n, s in PROJECT_SCOPES.items() if s.kind == "tighter"} == {
        "memory",
        "memory_extract",
        "memory_budget_tokens",
        "shell_sandbox",
        "shell_network",
    }


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("trash_retention_days", 1),
        ("trash_retention_days", 365),
        ("trash_retention_days", 0),
        ("serve_max_request_bytes", 1024),
        ("serve_max_request_bytes", 10**12),
        ("data_dir", "/tmp/elsewhere"),
        ("data_dir", "not/absolute"),  # not even checked: it is not used
        ("config_dir", "/tmp/other-config"),
    ],
)
def test_a_setting_that_reaches_beyond_the_project_is_ignored_with_one_line(
    dirs: tuple[Path, Path], key: str, value: object
) -> None:
    _, project = dirs
    alone = load_settings(cwd=project)
    write(project_file(project), {key: value, "tool_output_trim_chars": 123})
    loaded = load_settings(cwd=project)
    assert getattr(loaded.settings, key) == getattr(alone.settings, key)
    assert loaded.sources[key] == alone.sources[key] != "project file"
    assert loaded.settings.tool_output_trim_chars == 123  # a setting of the project's own still counts
    assert loaded.paths.data_dir == alone.paths.data_dir and loaded.paths.config_dir == alone.paths.config_dir
    [warning] = loaded.warnings
    assert warning.startswith(f"{key} in {project_file(project)} ignored: ") and "\n" not in warning
    assert f"CO_CLI_{key.upper()}" in warning and "every project" in warning or "your own settings" in warning


@pytest.mark.parametrize(
    ("key", "yours", "theirs"), [("trash_retention_days", 30, 1), ("serve_max_request_bytes", 4096, 10**9)]
)
def test_your_own_file_and_environment_still_set_them(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, key: str, yours: int, theirs: int
) -> None:
    config, project = dirs
    write(config / "settings.json", {key: yours})
    write(project_file(project), {key: theirs})
    loaded = load_settings(cwd=project)
    assert getattr(loaded.settings, key) == yours and loaded.sources[key] == "user file"
    assert len(loaded.warnings) == 1
    monkeypatch.setenv(f"CO_CLI_{key.upper()}", str(yours + 1))
    loaded = load_settings(cwd=project)
    assert getattr(loaded.settings, key) == yours + 1 and loaded.sources[key] == "environment"
    assert loaded.warnings == ()  # the environment wins anyway: nothing to say


@pytest.mark.parametrize(
    ("key", "yours", "theirs", "applied"),
    [
        ("memory_extract", None, "auto", False),  # default review
        ("memory_extract", "off", "review", False),
        ("memory_extract", "off", "auto", False),
        ("memory_extract", "review", "off", True),
        ("memory_extract", "auto", "review", True),
        ("memory_extract", "auto", "auto", True),
        ("memory", False, True, False),
        ("memory", None, False, True),
        ("memory", True, True, True),
        ("memory_budget_tokens", None, 5000, False),  # default 800
        ("memory_budget_tokens", 100, 101, False),
        ("memory_budget_tokens", 0, 1, False),
        ("memory_budget_tokens", 2000, 1500, True),
        ("memory_budget_tokens", None, 0, True),
        ("memory_budget_tokens", 300, 300, True),
    ],
)
def test_a_project_file_may_only_tighten_memory(
    dirs: tuple[Path, Path], key: str, yours: object, theirs: object, applied: bool
) -> None:
    config, project = dirs
    if yours is not None:
        write(config / "settings.json", {key: yours})
    own = getattr(load_settings(cwd=project).settings, key)
    write(project_file(project), {key: theirs})
    loaded = load_settings(cwd=project)
    if applied:
        assert getattr(loaded.settings, key) == theirs and loaded.sources[key] == "project file"
        assert loaded.warnings == ()
    else:
        assert getattr(loaded.settings, key) == own
        assert loaded.sources[key] == ("default" if yours is None else "user file")
        [warning] = loaded.warnings
        assert warning.startswith(f"{key} {json.dumps(theirs)} in {project_file(project)} ignored: ")
        assert f"stricter than your own {json.dumps(own)}" in warning and "\n" not in warning


def test_memory_settings_from_the_environment_or_command_line_win_without_a_warning(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    config, project = dirs
    write(project_file(project), {"memory_extract": "auto", "memory": True, "memory_budget_tokens": 9000})
    monkeypatch.setenv("CO_CLI_MEMORY_EXTRACT", "auto")
    loaded = load_settings(cwd=project, memory=False)
    assert loaded.settings.memory_extract == "auto" and loaded.sources["memory_extract"] == "environment"
    assert loaded.settings.memory is False and loaded.sources["memory"] == "command line"
    assert loaded.settings.memory_budget_tokens == 800
    assert [w.split(" ")[0] for w in loaded.warnings] == ["memory_budget_tokens"]  # memory true: not looser
    write(config / "settings.json", {"memory": False})
    assert [w.split(" ")[0] for w in load_settings(cwd=project).warnings] == ["memory", "memory_budget_tokens"]
    assert [w.split(" ")[0] for w in load_settings(cwd=project, memory=False).warnings] == ["memory_budget_tokens"]


@pytest.mark.parametrize(("key", "value"), [("memory_extract", "always"), ("memory_budget_tokens", -1)])
def test_an_invalid_value_in_the_project_file_is_still_an_error_naming_it(
    dirs: tuple[Path, Path], key: str, value: object
) -> None:
    _, project = dirs
    write(project_file(project), {key: value})
    with pytest.raises(ConfigError) as err:
        load_settings(cwd=project)
    assert f"{key!r} in {project_file(project)}" in err.value.message and "\n" not in err.value.message


def test_config_show_names_where_an_ignored_setting_really_comes_from(tmp_path: Path) -> None:
    config, project = tmp_path / "c", tmp_path / "repo"
    (project / ".co-cli").mkdir(parents=True)
    config.mkdir()
    write(config / "settings.json", {"memory_extract": "off"})
    write(project_file(project), {"trash_retention_days": 2, "memory_extract": "auto", "shell_timeout": 9})
    env = {k: v for k, v in os.environ.items() if not k.startswith("CO_CLI_")}
    env.update(CO_CLI_CONFIG_DIR=str(config), CO_CLI_DATA_DIR=str(tmp_path / "d"))
    result = run_co(["config", "show", "--json"], env, project)
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert (rows["trash_retention_days"]["value"], rows["trash_retention_days"]["source"]) == ("0", "default")
    assert (rows["memory_extract"]["value"], rows["memory_extract"]["source"]) == ("off", "user file")
    assert (rows["shell_timeout"]["value"], rows["shell_timeout"]["source"]) == ("9.0", "project file")
    lines = result.stderr.splitlines()
    assert [line.split(" in ")[0] for line in lines] == [
        "warning: trash_retention_days",
        'warning: memory_extract "auto"',
    ]


def _trashed_session(store: Store, word: str, days_ago: float) -> str:
    sid = store.sessions.create(model="test", cwd="/elsewhere", title=f"about {word}").id
    seq = store.messages.begin_turn(sid, f"tell me about {word}")
    answer = [ModelRequest(parts=[UserPromptPart(f"tell me about {word}")]), ModelResponse(parts=[TextPart("ok")])]
    store.messages.finish_turn(sid, seq, answer)
    store.trash.put(sid)
    with store.db.transaction() as tx:
        tx.execute("UPDATE sessions SET deleted_at = ? WHERE id = ?", (time.time() - days_ago * 86400, sid))
    return sid


@pytest.mark.e2e
def test_a_repository_cannot_purge_the_trash_of_every_project(co_env: dict[str, str], tmp_path: Path) -> None:
    data, config = Path(co_env["CO_CLI_DATA_DIR"]), Path(co_env["CO_CLI_CONFIG_DIR"])
    with Store.open(data / "co-cli.db") as store:
        old, recent = _trashed_session(store, "otters", 40), _trashed_session(store, "herons", 3)
    repo = tmp_path / "cloned"
    (repo / ".co-cli").mkdir(parents=True)
    env = {**co_env, "CO_CLI_MODEL": "test"}

    def trashed() -> set[str]:
        with Store.open(data / "co-cli.db") as store:
            return {info.id for info, _ in store.trash.list()}

    for days in (1, 2, 30):
        write(project_file(repo), {"trash_retention_days": days})
        result = run_co(["chat", "-p", "hello"], env, repo, timeout=60)
        assert result.returncode == 0, result.stderr
        assert trashed() == {old, recent}
        assert f"warning: trash_retention_days in {project_file(repo)} ignored" in result.stderr
        assert run_co(["sessions", "trash"], env, repo).returncode == 0  # it purges too, by the same setting
        assert trashed() == {old, recent}

    write(config / "settings.json", {"trash_retention_days": 30})  # the user's own choice still purges
    result = run_co(["chat", "-p", "hello"], env, repo, timeout=60)
    assert result.returncode == 0, result.stderr
    assert trashed() == {recent}
