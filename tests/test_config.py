"""Settings: precedence, provenance, errors, and the reference file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from co_cli.config import Settings, load_settings, settings_reference
from co_cli.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    for key in list(__import__("os").environ):
        if key.startswith("CO_CLI_"):
            monkeypatch.delenv(key)
    config, project = tmp_path / "config", tmp_path / "project"
    config.mkdir()
    (project / ".co-cli").mkdir(parents=True)
    monkeypatch.setenv("CO_CLI_CONFIG_DIR", str(config))
    monkeypatch.setenv("CO_CLI_DATA_DIR", str(tmp_path / "data"))
    return config, project


def test_defaults(dirs: tuple[Path, Path]) -> None:
    _, project = dirs
    loaded = load_settings(cwd=project)
    assert loaded.settings.model == "auto"
    assert loaded.settings.tool_output_trim_chars == 2000
    assert loaded.settings.max_history_messages == 40
    assert loaded.sources["model"] == "default"
    assert loaded.sources["data_dir"] == "environment"


def test_precedence_env_over_project_over_user(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    config, project = dirs
    (config / "settings.json").write_text(json.dumps({"model": "user-model", "max_history_messages": 10}))
    (project / ".co-cli" / "settings.json").write_text(json.dumps({"model": "project-model"}))
    loaded = load_settings(cwd=project)
    assert loaded.settings.model == "project-model"
    assert loaded.sources["model"] == "project file"
    assert loaded.settings.max_history_messages == 10
    assert loaded.sources["max_history_messages"] == "user file"
    monkeypatch.setenv("CO_CLI_MODEL", "env-model")
    loaded = load_settings(cwd=project)
    assert loaded.settings.model == "env-model"
    assert loaded.sources["model"] == "environment"
    loaded = load_settings(cwd=project, model="cli-model")
    assert loaded.settings.model == "cli-model"
    assert loaded.sources["model"] == "command line"


def test_invalid_env_value_names_the_variable(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CO_CLI_MAX_HISTORY_MESSAGES", "abc")
    with pytest.raises(ConfigError) as err:
        load_settings(cwd=dirs[1])
    assert "CO_CLI_MAX_HISTORY_MESSAGES" in err.value.message
    assert err.value.exit_code == 2
    assert "\n" not in err.value.message


def test_malformed_file_names_the_file(dirs: tuple[Path, Path]) -> None:
    config, project = dirs
    (config / "settings.json").write_text("{not json")
    with pytest.raises(ConfigError) as err:
        load_settings(cwd=project)
    assert str(config / "settings.json") in err.value.message


def test_invalid_value_in_project_file(dirs: tuple[Path, Path]) -> None:
    _, project = dirs
    (project / ".co-cli" / "settings.json").write_text(json.dumps({"compact_threshold": 3}))
    with pytest.raises(ConfigError) as err:
        load_settings(cwd=project)
    assert "compact_threshold" in err.value.message and "settings.json" in err.value.message


def test_unknown_key_is_an_error(dirs: tuple[Path, Path]) -> None:
    config, project = dirs
    (config / "settings.json").write_text(json.dumps({"modle": "x"}))
    with pytest.raises(ConfigError, match="modle"):
        load_settings(cwd=project)


def test_reference_file_matches_settings_model() -> None:
    data = json.loads((ROOT / "settings.reference.json").read_text())
    assert data["settings"] == json.loads(json.dumps(settings_reference(), default=str))
    assert set(data["settings"]) == set(Settings.model_fields)
    for name, entry in data["settings"].items():
        assert entry["env"] == f"CO_CLI_{name.upper()}"
        assert entry["description"]
        assert entry["project_file"] in data["$project_file"]  # what a project file may do with it, explained


def _run_co(args: list[str], env_extra: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("CO_CLI_")}
    env.update(CO_CLI_CONFIG_DIR=str(tmp_path / "c"), CO_CLI_DATA_DIR=str(tmp_path / "d"), **env_extra)
    env["PYTHONPATH"] = str(ROOT)  # this checkout's co_cli, whatever is installed
    return subprocess.run(
        [sys.executable, "-m", "co_cli", *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_cli_bad_setting_is_one_line_exit_2(tmp_path: Path) -> None:
    result = _run_co(["config", "show"], {"CO_CLI_MAX_HISTORY_MESSAGES": "abc"}, tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "CO_CLI_MAX_HISTORY_MESSAGES" in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_config_show_masks_secrets(tmp_path: Path) -> None:
    result = _run_co(["config", "show", "--json"], {"CO_CLI_API_KEY": "sk-very-secret"}, tmp_path)
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows["api_key"]["value"] == "********"
    assert rows["api_key"]["source"] == "environment"
    assert "sk-very-secret" not in result.stdout


def test_cli_config_path(tmp_path: Path) -> None:
    result = _run_co(["config", "path"], {}, tmp_path)
    assert result.returncode == 0
    assert str(tmp_path / "d" / "co-cli.db") in result.stdout
    assert str(tmp_path / "c" / "settings.json") in result.stdout


def test_help_does_not_import_pydantic_ai(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom co_cli.terminal.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in sys.modules if m.startswith(('pydantic_ai', 'openai', 'anthropic', 'google.genai', "
        "'groq', 'mistralai', 'llama_cpp'))]\nprint('HEAVY', heavy)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's co_cli, whatever is installed
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env
    )
    assert "HEAVY []" in result.stdout, result.stdout + result.stderr
    assert "chat" in result.stdout and "sessions" in result.stdout


def test_version(tmp_path: Path) -> None:
    result = _run_co(["--version"], {}, tmp_path)
    assert result.returncode == 0 and result.stdout.startswith("co ")


@pytest.mark.parametrize(
    "args",
    [["chat", "--bogus"], ["nosuchcmd"], ["sessions", "show"], ["sessions", "list", "-n", "99999999999999999999"]],
)
def test_usage_errors_are_short_and_exit_2(tmp_path: Path, args: list[str]) -> None:
    result = _run_co(args, {}, tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: "), result.stderr  # worded as every co error
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr


def test_project_file_cannot_move_the_data_dir(
    dirs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, project = dirs
    for value in ("/tmp/elsewhere", "relative/dir"):
        (project / ".co-cli" / "settings.json").write_text(json.dumps({"data_dir": value, "config_dir": value}))
        loaded = load_settings(cwd=project)  # the environment's directories, without a word: they win anyway
        assert loaded.paths.data_dir == tmp_path / "data" and loaded.warnings == ()
    monkeypatch.delenv("CO_CLI_DATA_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    loaded = load_settings(cwd=project)
    assert loaded.paths.data_dir == tmp_path / "xdg" / "co-cli" and loaded.sources["data_dir"] == "default"
    assert [w.split(" ignored: ")[0] for w in loaded.warnings] == [  # CO_CLI_CONFIG_DIR still wins in silence
        f"data_dir in {project / '.co-cli' / 'settings.json'}"
    ]


def test_user_key_is_not_sent_to_a_server_a_project_file_chose(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    config, project = dirs
    (config / "settings.json").write_text(json.dumps({"api_key": "sk-user-secret"}))
    (project / ".co-cli" / "settings.json").write_text(json.dumps({"base_url": "http://127.0.0.1:9/v1"}))
    loaded = load_settings(cwd=project)
    assert loaded.settings.api_key.get_secret_value() == ""
    assert loaded.warnings and "not sent" in loaded.warnings[0]
    monkeypatch.setenv("CO_CLI_BASE_URL", "http://127.0.0.1:9/v1")  # the user's own choice: the key goes
    assert load_settings(cwd=project).settings.api_key.get_secret_value() == "sk-user-secret"


@pytest.mark.parametrize("value", ["", "relative/dir"])
def test_data_dir_must_be_absolute(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CO_CLI_DATA_DIR", value)
    with pytest.raises(ConfigError, match="CO_CLI_DATA_DIR"):
        load_settings(cwd=dirs[1])


def test_settings_file_that_is_a_directory_is_an_error(dirs: tuple[Path, Path]) -> None:
    config, project = dirs
    (config / "settings.json").mkdir()
    with pytest.raises(ConfigError, match="not a regular file") as err:
        load_settings(cwd=project)
    assert str(config / "settings.json") in err.value.message and err.value.exit_code == 2
    (config / "settings.json").rmdir()
    (project / ".co-cli" / "settings.json").mkdir()
    with pytest.raises(ConfigError, match="not a regular file"):
        load_settings(cwd=project)


def test_cli_settings_directory_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "c" / "settings.json").mkdir(parents=True)
    result = _run_co(["config", "show"], {}, tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "not a regular file" in result.stderr


def _numeric_fields() -> list[str]:
    return [name for name, info in Settings.model_fields.items() if info.annotation in (int, float)]


def test_every_numeric_setting_rejects_true(dirs: tuple[Path, Path]) -> None:
    config, project = dirs
    assert "max_history_messages" in _numeric_fields() and "request_timeout" in _numeric_fields()
    for name in _numeric_fields():
        (config / "settings.json").write_text(json.dumps({name: True}))
        with pytest.raises(ConfigError, match=name) as err:
            load_settings(cwd=project)
        assert "true/false" in err.value.message


def test_numbers_and_numeric_env_strings_still_work(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    config, project = dirs
    (config / "settings.json").write_text(json.dumps({"max_history_messages": 12, "request_timeout": 5}))
    loaded = load_settings(cwd=project)
    assert loaded.settings.max_history_messages == 12 and loaded.settings.request_timeout == 5.0
    monkeypatch.setenv("CO_CLI_MAX_HISTORY_MESSAGES", "40")
    monkeypatch.setenv("CO_CLI_REQUEST_TIMEOUT", "2.5")
    loaded = load_settings(cwd=project)
    assert loaded.settings.max_history_messages == 40 and loaded.settings.request_timeout == 2.5


@pytest.mark.parametrize("value", [["sk-list-secret"], 12345678, {"k": "sk-dict-secret"}])
def test_api_key_type_error_never_shows_the_value(dirs: tuple[Path, Path], value: object) -> None:
    config, project = dirs
    (config / "settings.json").write_text(json.dumps({"api_key": value}))
    with pytest.raises(ConfigError, match="api_key") as err:
        load_settings(cwd=project)
    assert "secret" not in err.value.message and "12345678" not in err.value.message
    assert "not shown" in err.value.message


def test_base_url_error_masks_credentials(dirs: tuple[Path, Path]) -> None:
    config, project = dirs
    (config / "settings.json").write_text(json.dumps({"base_url": ["http://bob:hunter2@h/v1?key=zz"]}))
    with pytest.raises(ConfigError, match="base_url") as err:
        load_settings(cwd=project)
    assert "hunter2" not in err.value.message and "zz" not in err.value.message


def test_cli_config_show_masks_url_credentials(tmp_path: Path) -> None:
    url = "http://bob:hunter2@127.0.0.1:9/v1?api-key=sk-in-query&api-version=7"
    for args in (["config", "show", "--json"], ["config", "show"]):
        result = _run_co(args, {"CO_CLI_BASE_URL": url, "COLUMNS": "300"}, tmp_path)
        assert result.returncode == 0, result.stderr
        assert "hunter2" not in result.stdout and "sk-in-query" not in result.stdout
        assert "127.0.0.1:9" in result.stdout
    shown = _run_co(["config", "show", "--json"], {"CO_CLI_BASE_URL": url}, tmp_path).stdout
    rows = {row["name"]: row for row in json.loads(shown)}
    assert rows["base_url"]["value"] == "http://***@127.0.0.1:9/v1?api-key=***&api-version=7"


def test_project_base_url_and_model_are_warned_about(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    _, project = dirs
    (project / ".co-cli" / "settings.json").write_text(
        json.dumps({"base_url": "http://u:pw@10.9.8.7/v1", "model": "theirs"})
    )
    warnings = load_settings(cwd=project).warnings
    assert any("base_url http://***@10.9.8.7/v1" in w and "go to that server" in w for w in warnings)
    assert any("model 'theirs'" in w for w in warnings)
    assert not any("pw@" in w for w in warnings)
    monkeypatch.setenv("CO_CLI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("CO_CLI_MODEL", "mine")
    assert load_settings(cwd=project).warnings == ()


@pytest.mark.parametrize("url", ["http://bob:hunter2@[::1/v1", "ftp://h/v1", "localhost:8080/v1", "http://h:99999/v1"])
def test_malformed_base_url_is_a_setting_error(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.setenv("CO_CLI_BASE_URL", url)
    with pytest.raises(ConfigError, match="CO_CLI_BASE_URL.*http") as err:
        load_settings(cwd=dirs[1])
    assert "hunter2" not in err.value.message


def test_a_mistyped_flag_or_command_is_one_error_line_with_a_suggestion(tmp_path: Path) -> None:
    flag = _run_co(["chat", "--forkk"], {}, tmp_path)
    assert flag.returncode == 2
    assert flag.stderr.splitlines() == [
        "error: no such option: --forkk; did you mean --fork?",
        "Try 'co chat --help' for help.",
    ]
    command = _run_co(["sesions", "list"], {}, tmp_path)
    assert command.stderr.splitlines()[0] == "error: no such command 'sesions'. Did you mean 'sessions'?"


def _bad_value(name: str) -> str | None:
    """A value the setting ``name`` refuses, as an environment variable would give it (None: any text will do)."""
    annotation = str(Settings.model_fields[name].annotation)
    for kind, bad in (("int", "many"), ("float", "lots"), ("bool", "maybe"), ("Literal", "sometimes")):
        if kind in annotation:
            return bad
    return {"mcp_servers": "{bad", "data_dir": "relative/dir", "config_dir": "relative/dir", "base_url": "ftp://h"}.get(
        name
    )


@pytest.mark.parametrize("name", [n for n in Settings.model_fields if _bad_value(n) is not None])
def test_every_setting_refuses_a_bad_value_in_one_line_naming_where_what_and_why(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    from co_cli.config import SECRET_FIELDS, env_var

    bad = _bad_value(name)
    assert bad is not None
    monkeypatch.setenv(env_var(name), bad)
    with pytest.raises(ConfigError) as err:
        load_settings(cwd=dirs[1])
    message = err.value.message
    assert message.startswith(f"invalid setting {env_var(name)}: ") and "\n" not in message
    assert ("value not shown" if name in SECRET_FIELDS else repr(bad)) in message
    monkeypatch.delenv(env_var(name))
    if name in ("config_dir",):
        return  # the user file lives in it: only the environment can set it
    config, project = dirs
    (config / "settings.json").write_text(json.dumps({name: bad}))
    with pytest.raises(ConfigError) as err:
        load_settings(cwd=project)
    assert err.value.message.startswith(f"invalid setting {name!r} in {config / 'settings.json'}: ")


def test_json_settings_that_are_not_json_say_what_they_expect(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CO_CLI_MCP_SERVERS", "{bad")
    with pytest.raises(ConfigError) as err:
        load_settings(cwd=dirs[1])
    assert err.value.message == (
        "invalid setting CO_CLI_MCP_SERVERS: not valid JSON (Expecting property name enclosed in double quotes at "
        'column 2) (got a str, value not shown); expected a JSON object of servers by name, e.g. {"docs": '
        '{"command": "docs-mcp"}}'
    )


def test_a_bad_json_setting_is_one_line_from_co(tmp_path: Path) -> None:
    result = _run_co(["chat", "-p", "hi"], {"CO_CLI_MCP_SERVERS": "{bad"}, tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines()[0].startswith("error: invalid setting CO_CLI_MCP_SERVERS: not valid JSON")
    assert len(result.stderr.splitlines()) == 1 and "internal error" not in result.stderr
