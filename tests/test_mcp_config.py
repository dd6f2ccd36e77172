"""The mcp_servers setting: its shape, where it comes from, and the per-project trust of a project file's servers."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from co_cli.config import McpServer, load_settings
from co_cli.errors import ConfigError
from co_cli.project_trust import TRUST_FILE, confirm_project_mcp_servers, load_trusted, revoke, trust
from tests.test_project_trust import Asker, project

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
