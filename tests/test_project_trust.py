"""A project settings file that points co at a server needs the user's confirmation, once per project and URL."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pexpect
import pytest

from co_cli.config import load_settings
from co_cli.errors import ConfigError
from co_cli.project_trust import TRUST_FILE, confirm_project_server, load_trusted, revoke
from tests.support.co_process import expect_prompt, run_co, send_line, spawn_co
from tests.support.scripted_server import ScriptedServer, Text
from tests.support.trust import Asker, project

__all__ = ["project"]


def _point_at(project: Path, base_url: str) -> None:
    (project / ".co-cli" / "settings.json").write_text(json.dumps({"base_url": base_url}))


def test_no_one_to_ask_is_a_one_line_refusal(project: Path) -> None:
    _point_at(project, "http://user:pw@10.1.2.3/v1")
    with pytest.raises(ConfigError) as err:
        confirm_project_server(load_settings(cwd=project), None)
    message = err.value.message
    assert "\n" not in message and err.value.exit_code == 2
    assert "co config trust allow" in message and "http://***@10.1.2.3/v1" in message and "pw" not in message


def test_yes_is_remembered_per_project_and_url(project: Path, tmp_path: Path) -> None:
    _point_at(project, "http://10.1.2.3/v1")
    ask = Asker("y")
    confirm_project_server(load_settings(cwd=project), ask)
    confirm_project_server(load_settings(cwd=project), ask)
    confirm_project_server(load_settings(cwd=project), None)
    assert len(ask.questions) == 1 and "http://10.1.2.3/v1" in ask.questions[0]
    trust_file = tmp_path / "config" / TRUST_FILE
    assert stat.S_IMODE(trust_file.stat().st_mode) == 0o600
    _point_at(project, "http://10.9.9.9/v1")  # the repository changed its server: ask again
    with pytest.raises(ConfigError):
        confirm_project_server(load_settings(cwd=project), None)
    other = tmp_path / "other"
    (other / ".co-cli").mkdir(parents=True)
    _point_at(other, "http://10.1.2.3/v1")  # the same server from another project: ask again
    with pytest.raises(ConfigError):
        confirm_project_server(load_settings(cwd=other), None)


def test_no_is_not_remembered(project: Path, tmp_path: Path) -> None:
    _point_at(project, "http://10.1.2.3/v1")
    for answer in ("n", "", "maybe"):
        with pytest.raises(ConfigError, match="not allowed"):
            confirm_project_server(load_settings(cwd=project), Asker(answer))
    assert load_trusted(tmp_path / "config") == []


def test_revoke_asks_again(project: Path, tmp_path: Path) -> None:
    _point_at(project, "http://10.1.2.3/v1")
    confirm_project_server(load_settings(cwd=project), Asker("yes"))
    assert [e.project for e in revoke(tmp_path / "config", project.resolve())] == [str(project.resolve())]
    ask = Asker("n")
    with pytest.raises(ConfigError):
        confirm_project_server(load_settings(cwd=project), ask)
    assert ask.questions


def test_a_server_the_user_chose_needs_no_confirmation(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _point_at(project, "http://10.1.2.3/v1")
    monkeypatch.setenv("CO_CLI_BASE_URL", "http://10.1.2.3/v1")
    confirm_project_server(load_settings(cwd=project), None)
    (project / ".co-cli" / "settings.json").write_text(json.dumps({"model": "qwen"}))
    monkeypatch.delenv("CO_CLI_BASE_URL")
    confirm_project_server(load_settings(cwd=project), None)


def test_damaged_trust_file_is_a_clear_error(project: Path, tmp_path: Path) -> None:
    _point_at(project, "http://10.1.2.3/v1")
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / TRUST_FILE).write_text("{not json")
    with pytest.raises(ConfigError, match=TRUST_FILE):
        confirm_project_server(load_settings(cwd=project), Asker("y"))


# ----- the real co -------------------------------------------------------------------------------------


@pytest.fixture
def repo_env(co_env: dict[str, str], scripted_server: ScriptedServer, workdir: Path) -> dict[str, str]:
    """A repository whose settings file points co at the scripted server; the user has an Anthropic key."""
    _point_at_server(workdir, scripted_server)
    return {**co_env, "ANTHROPIC_API_KEY": "sk-ant-user-secret"}


def _point_at_server(workdir: Path, server: ScriptedServer) -> None:
    (workdir / ".co-cli").mkdir(exist_ok=True)
    (workdir / ".co-cli" / "settings.json").write_text(json.dumps({"base_url": server.base_url}))


@pytest.mark.e2e
@pytest.mark.parametrize("how", ["print", "piped"])
def test_unconfirmed_project_server_gets_nothing(
    repo_env: dict[str, str], scripted_server: ScriptedServer, workdir: Path, how: str
) -> None:
    args, stdin = (["chat", "-p", "my secret plans"], None) if how == "print" else (["chat"], "my secret plans\n")
    result = run_co(args, repo_env, workdir, input=stdin)
    assert result.returncode == 2, result.stderr
    assert scripted_server.requests == []
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "co config trust allow" in errors[0]
    assert f"warning: base_url {scripted_server.base_url} comes from" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.e2e
def test_trust_commands_allow_list_and_revoke(
    repo_env: dict[str, str], scripted_server: ScriptedServer, workdir: Path
) -> None:
    allowed = run_co(["config", "trust", "allow"], repo_env, workdir)
    assert allowed.returncode == 0, allowed.stderr
    listed = run_co(["config", "trust", "list"], repo_env, workdir)
    assert scripted_server.base_url in listed.stdout and str(workdir.resolve()) in listed.stdout
    scripted_server.script(Text("hello from the project's server"))
    result = run_co(["chat", "-p", "hi"], repo_env, workdir)
    assert result.returncode == 0, result.stderr
    assert "hello from the project's server" in result.stdout
    assert "warning: base_url" in result.stderr  # still said on every run
    assert "sk-ant-user-secret" not in str(scripted_server.requests[-1].headers)
    revoked = run_co(["config", "trust", "revoke"], repo_env, workdir)
    assert revoked.returncode == 0 and scripted_server.base_url in revoked.stdout
    assert run_co(["config", "trust", "list"], repo_env, workdir).stdout == ""
    assert run_co(["chat", "-p", "hi"], repo_env, workdir).returncode == 2


@pytest.mark.e2e
def test_interactive_chat_asks_once_and_remembers(
    repo_env: dict[str, str], scripted_server: ScriptedServer, workdir: Path
) -> None:
    child = spawn_co(["chat"], env=repo_env, cwd=workdir)
    child.expect("comes from", timeout=20)
    child.expect(r"\[y/N\]", timeout=10)
    send_line(child, "y")
    expect_prompt(child)
    child.sendcontrol("d")
    child.expect(pexpect.EOF, timeout=15)
    scripted_server.script(Text("remembered"))
    result = run_co(["chat", "-p", "hi"], repo_env, workdir)
    assert result.returncode == 0 and "remembered" in result.stdout, result.stderr


@pytest.mark.e2e
def test_interactive_no_leaves_without_sending(
    repo_env: dict[str, str], scripted_server: ScriptedServer, workdir: Path
) -> None:
    child = spawn_co(["chat"], env=repo_env, cwd=workdir)
    child.expect(r"\[y/N\]", timeout=20)
    send_line(child, "n")
    child.expect(pexpect.EOF, timeout=15)
    child.close()
    assert child.exitstatus == 2 and scripted_server.requests == []


@pytest.mark.parametrize("spec", ["openai:gpt-4o", "anthropic:claude-sonnet-4-5", "ollama:qwen2.5", "groq:llama-3"])
def test_a_project_summarization_model_naming_a_provider_needs_the_same_trust(project: Path, spec: str) -> None:
    """The summariser is sent the whole conversation: a provider a project file picks for it is asked about
    like a server, with a warning, and remembered per project and model."""
    (project / ".co-cli" / "settings.json").write_text(json.dumps({"summarization_model": spec}))
    loaded = load_settings(cwd=project)
    assert any(f"summarization_model {spec!r} comes from" in warning for warning in loaded.warnings)
    with pytest.raises(ConfigError) as err:
        confirm_project_server(loaded, None)
    assert "\n" not in err.value.message and f"(for summaries) at {spec}" in err.value.message
    with pytest.raises(ConfigError, match="not allowed"):
        confirm_project_server(loaded, Asker("n"))
    ask = Asker("y")
    confirm_project_server(loaded, ask)
    assert len(ask.questions) == 1 and f"conversation, to be summarised, to {spec}" in ask.questions[0]
    confirm_project_server(load_settings(cwd=project), None)  # remembered
    (project / ".co-cli" / "settings.json").write_text(json.dumps({"summarization_model": "openai:gpt-5"}))
    with pytest.raises(ConfigError):
        confirm_project_server(load_settings(cwd=project), None)  # another model is asked about again


@pytest.mark.parametrize("spec", ["local", "test", "qwen2.5"])
def test_a_project_summarization_model_on_no_new_server_asks_nothing(project: Path, spec: str) -> None:
    (project / ".co-cli" / "settings.json").write_text(json.dumps({"summarization_model": spec}))
    confirm_project_server(load_settings(cwd=project), None)


def test_the_user_summarization_model_is_never_asked_about(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CO_CLI_SUMMARIZATION_MODEL", "openai:gpt-4o")
    (project / ".co-cli" / "settings.json").write_text(json.dumps({"summarization_model": "anthropic:claude"}))
    loaded = load_settings(cwd=project)
    confirm_project_server(loaded, None)
    assert not any("summarization_model" in warning for warning in loaded.warnings)
