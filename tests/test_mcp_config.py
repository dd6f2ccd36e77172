"""The mcp_servers setting: its shape, where it comes from, and the per-project trust of a project file's servers."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from co_cli.config import McpServer, load_settings
from co_cli.errors import ConfigError
from co_cli.project_trust import TRUST_FILE, confirm_project_mcp_servers, load_trusted, revoke, trust
from tests.support.trust import Asker, project

__all__ = ["project"]


def write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def user_file(tmp_path: Path) -> Path:
    return tmp_path / "config" / "settings.json"


def project_file(project: Path) -> Path:
    return project / ".co-cli" / "settings.json"


def test_stdio_and_http_servers_in_the_shape_users_know(project: Path, tmp_path: Path) -> None:
    write(
        user_file(tmp_path),
        {
            "mcp_servers": {
                "files": {"command": "npx", "args": ["-y", "server-files"], "env": {"ROOT": "/srv"}},
                "web": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer x"}},
            }
        },
    )
    loaded = load_settings(cwd=project)
    servers = loaded.settings.mcp_servers
    assert servers["files"].transport == "stdio" and servers["files"].args == ["-y", "server-files"]
    assert servers["web"].transport == "http" and loaded.sources["mcp_servers"] == "user file"
    assert loaded.project_mcp_servers == ()
    assert "Bearer x" not in repr(servers) and "/srv" not in repr(servers)  # secrets stay out of reprs


def test_the_environment_sets_them_as_json(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CO_CLI_MCP_SERVERS", json.dumps({"a": {"command": "srv"}}))
    loaded = load_settings(cwd=project)
    assert list(loaded.settings.mcp_servers) == ["a"] and loaded.sources["mcp_servers"] == "environment"


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({"a": {"command": "x", "url": "http://h/mcp"}}, "either 'command' (stdio) or 'url' (HTTP)"),
        ({"a": {}}, "either 'command' (stdio) or 'url' (HTTP)"),
        ({"a": {"url": "ftp://h"}}, "http:// or https://"),
        ({"a": {"url": "http://h", "env": {"K": "v"}}}, "are for stdio servers"),
        ({"a b": {"command": "x"}}, "MCP server name 'a b'"),
        ({"a": {"command": "x", "timeout": 0}}, "a.timeout"),
        ({"a": {"command": "x", "comand": "y"}}, "a.comand"),
    ],
)
def test_a_bad_server_is_a_one_line_error_that_never_shows_a_secret(
    project: Path, tmp_path: Path, spec: dict[str, object], needle: str
) -> None:
    for server in spec.values():
        assert isinstance(server, dict)
        server.setdefault("headers" if "url" in server else "env", {"SECRET": "hunter2"})
    write(user_file(tmp_path), {"mcp_servers": spec})
    with pytest.raises(ConfigError) as err:
        load_settings(cwd=project)
    assert needle in err.value.message and "\n" not in err.value.message and "hunter2" not in err.value.message


def test_a_project_adds_servers_but_cannot_replace_the_users_or_trust_its_own(project: Path, tmp_path: Path) -> None:
    write(user_file(tmp_path), {"mcp_servers": {"git": {"command": "user-git"}}})
    write(
        project_file(project),
        {"mcp_servers": {"git": {"command": "evil-git"}, "db": {"command": "db-srv", "trust": True}}},
    )
    loaded = load_settings(cwd=project)
    assert loaded.settings.mcp_servers["git"].command == "user-git"
    assert loaded.project_mcp_servers == ("db",) and loaded.settings.mcp_servers["db"].trust is False
    assert any("'git'" in w and "ignored" in w for w in loaded.warnings)
    assert any("'trust' and 'trusted_tools' count only in your own settings" in w for w in loaded.warnings)


def test_a_project_server_is_asked_about_once_and_refused_without_anyone_to_ask(project: Path, tmp_path: Path) -> None:
    write(project_file(project), {"mcp_servers": {"db": {"command": "db-srv", "args": ["--port", "1"]}}})
    refused = confirm_project_mcp_servers(load_settings(cwd=project), None)
    assert list(refused) == ["db"] and "co config trust allow --mcp db" in refused["db"]
    assert "\n" not in refused["db"]

    no = Asker("n")
    assert list(confirm_project_mcp_servers(load_settings(cwd=project), no)) == ["db"]
    yes = Asker("y")
    assert confirm_project_mcp_servers(load_settings(cwd=project), yes) == {}
    assert "run db-srv --port 1" in yes.questions[0] and "MCP server 'db'" in yes.questions[0]
    again = Asker("n")
    assert confirm_project_mcp_servers(load_settings(cwd=project), again) == {} and again.questions == []
    assert confirm_project_mcp_servers(load_settings(cwd=project), None) == {}

    trust_path = tmp_path / "config" / TRUST_FILE
    assert stat.S_IMODE(trust_path.stat().st_mode) == 0o600
    assert "db-srv" not in trust_path.read_text()  # a digest of the definition, never its values

    # Another definition under the same name is asked about again.
    write(project_file(project), {"mcp_servers": {"db": {"command": "db-srv", "env": {"LD_PRELOAD": "/x.so"}}}})
    assert list(confirm_project_mcp_servers(load_settings(cwd=project), None)) == ["db"]


def test_allowing_a_server_keeps_the_allowed_base_urls_and_revoke_forgets_both(project: Path, tmp_path: Path) -> None:
    config = tmp_path / "config"
    trust(config, project.resolve(), "http://10.0.0.1/v1")
    write(project_file(project), {"mcp_servers": {"db": {"command": "db-srv"}}})
    assert confirm_project_mcp_servers(load_settings(cwd=project), Asker("y")) == {}
    assert [e.base_url for e in load_trusted(config)] == ["http://10.0.0.1/v1"]
    removed = revoke(config, project.resolve())
    assert len(removed) == 2
    assert list(confirm_project_mcp_servers(load_settings(cwd=project), None)) == ["db"]


def test_a_disabled_server_is_neither_asked_about_nor_started(project: Path) -> None:
    write(project_file(project), {"mcp_servers": {"db": {"command": "db-srv", "enabled": False}}})
    asker = Asker("y")
    assert confirm_project_mcp_servers(load_settings(cwd=project), asker) == {} and asker.questions == []
    assert McpServer(command="x", enabled=False).enabled is False


def test_the_question_shows_env_and_cwd_with_credential_values_masked(project: Path) -> None:
    env = {
        "PYTHONPATH": "./hack",
        "NODE_OPTIONS": "--require ./preload.js",
        "LD_PRELOAD": "/tmp/x.so",
        "GITHUB_TOKEN": "ghp_planted_value",
        "PGPASSWORD": "hunter2",
    }
    write(
        project_file(project),
        {"mcp_servers": {"db": {"command": "npx", "args": ["-y", "srv x"], "env": env, "cwd": "./tools"}}},
    )
    asker = Asker("n")
    assert list(confirm_project_mcp_servers(load_settings(cwd=project), asker)) == ["db"]
    [question] = asker.questions
    lines = question.splitlines()
    assert lines[1:4] == [
        "  run npx -y 'srv x'",
        "  env PYTHONPATH=./hack NODE_OPTIONS='--require ./preload.js' LD_PRELOAD=/tmp/x.so GITHUB_TOKEN=******** "
        "PGPASSWORD=********",
        "  cwd ./tools",
    ]
    assert "ghp_planted_value" not in question and "hunter2" not in question
    assert lines[-1].startswith("Allow this MCP server for ")


def test_a_changed_env_or_cwd_asks_again_showing_the_new_one(project: Path) -> None:
    server: dict[str, object] = {"command": "srv", "env": {"LOG_LEVEL": "info"}}
    write(project_file(project), {"mcp_servers": {"db": server}})
    assert confirm_project_mcp_servers(load_settings(cwd=project), Asker("y")) == {}
    for change in (
        {"env": {"LOG_LEVEL": "info", "PYTHONPATH": "./hack"}},
        {"env": {"LOG_LEVEL": "debug"}},
        {"cwd": "sub"},
    ):
        write(project_file(project), {"mcp_servers": {"db": {**server, **change}}})
        asker = Asker("y")
        assert confirm_project_mcp_servers(load_settings(cwd=project), asker) == {}
        [question] = asker.questions
        if "env" in change:
            shown = " ".join(f"{k}={v}" for k, v in change["env"].items())  # type: ignore[attr-defined]
            assert f"  env {shown}\n" in question
        else:
            assert "  cwd sub\n" in question and "  env LOG_LEVEL=info\n" in question
        write(project_file(project), {"mcp_servers": {"db": server}})  # the allowed one is now an older definition
        assert list(confirm_project_mcp_servers(load_settings(cwd=project), None)) == ["db"]
        assert confirm_project_mcp_servers(load_settings(cwd=project), Asker("y")) == {}


PLANTED = ["\n", "\r", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e", "\u200f", "\u061c", "\u2028",
           "\u2029", "\x1b", "\x85", "\x00", "\t", "\ufeff", "\u200b", "\U000e0041"]  # fmt: skip


@pytest.mark.parametrize("char", PLANTED)
def test_no_character_in_a_definition_can_forge_a_line_or_reorder_the_question(project: Path, char: str) -> None:
    forged = f"x{char}Allow? y{char}this is fine"
    server = {"command": f"srv{char}", "args": [forged], "env": {f"A{char}B": forged}, "cwd": f"./d{char}"}
    write(project_file(project), {"mcp_servers": {"db": server}})
    asker = Asker("n")
    refused = confirm_project_mcp_servers(load_settings(cwd=project), asker)
    [question] = asker.questions
    assert len(question.splitlines()) == 5  # what it asks, run, env, cwd, "Allow ...?"
    assert all(ch.isprintable() or ch == "\n" for ch in question)
    escaped = char.encode("unicode_escape").decode()
    assert escaped in question.splitlines()[1] and escaped in question.splitlines()[2]
    assert escaped in question.splitlines()[3]
    assert all(line.isprintable() for line in refused.values())
    assert all(line.isprintable() for line in confirm_project_mcp_servers(load_settings(cwd=project), None).values())


@pytest.mark.parametrize("name", ["db\n", "db\u202e", "\u2066db", "d\u200bb", "db\r"])
def test_a_server_name_with_a_control_or_format_character_is_refused(project: Path, name: str) -> None:
    write(project_file(project), {"mcp_servers": {name: {"command": "srv"}}})
    with pytest.raises(ConfigError, match="MCP server name") as err:
        load_settings(cwd=project)
    assert "\n" not in err.value.message
