"""Instructions files cannot carry anything else into a request: a symlink or hard link named AGENTS.md or
CO.md that leads to the environment, a key, co's own settings or a device is skipped with one line, and the
instructions a request carried are never saved with the messages or exported."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pexpect
import pytest

from co_cli.config import OwnFiles, load_settings
from co_cli.memory.instructions_files import instructions_files_for, load_instructions_files
from tests.support.co_process import expect_prompt, run_co, send_line, spawn_co
from tests.support.scripted_server import ScriptedServer, Text

SECRET = "sk-proj-SECRETVALUE0123456789abcdef"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A repository with co's config and data dirs outside it."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    return root


def own_files(tmp_path: Path) -> tuple[OwnFiles, Path]:
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    (config / "settings.json").write_text(json.dumps({"api_key": SECRET}))
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / "input_history").write_text(f"+{SECRET}\n")
    return OwnFiles((config, data)), config


def load(cwd: Path, tmp_path: Path) -> tuple[str, list[tuple[str, str]]]:
    own, config = own_files(tmp_path)
    found = load_instructions_files(cwd, config, 8000, own)
    return found.section, [(skipped.path.name, skipped.reason) for skipped in found.skipped]


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("/proc/self/environ", "it leads to a system file"),
        ("/proc/self/cmdline", "it leads to a system file"),
        ("/dev/zero", "it leads to a system file"),
        ("/sys/kernel", "it leads to a system file"),
        ("/dev/../proc/self/environ", "it leads to a system file"),
        ("{outside}/id_ed25519", "it leads outside the project"),
        ("{outside}/rules.md", "it leads outside the project"),
        ("{config}/settings.json", "it leads outside the project"),
        ("{data}/input_history", "it leads outside the project"),
        ("{repo}/.env", "it leads to a file that is not Markdown or text"),
        ("{repo}/.git/config", "it leads into the repository's .git directory"),
        ("{repo}/missing.md", "it cannot be read"),
    ],
)
@pytest.mark.parametrize("name", ["AGENTS.md", "CO.md"])
def test_a_symlink_leading_elsewhere_is_skipped(
    project: Path, tmp_path: Path, target: str, reason: str, name: str
) -> None:
    outside = tmp_path / "home" / ".ssh"
    outside.mkdir(parents=True)
    (outside / "id_ed25519").write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SECRET}\n")
    (outside / "rules.md").write_text(f"export OPENAI_API_KEY={SECRET}\n")
    (project / ".env").write_text(f"OPENAI_API_KEY={SECRET}\n")
    (project / ".git" / "config").write_text(f'[remote "origin"]\nurl = https://{SECRET}@example.com/r.git\n')
    own_files(tmp_path)
    resolved = target.format(outside=outside, config=tmp_path / "config", data=tmp_path / "data", repo=project)
    (project / name).symlink_to(resolved)
    section, skipped = load(project, tmp_path)
    assert section == ""
    assert len(skipped) == 1 and skipped[0][0] == name and skipped[0][1].startswith(reason)
    assert SECRET not in skipped[0][1]


def test_the_user_level_file_stays_in_the_config_dir_and_is_never_the_settings(tmp_path: Path) -> None:
    own, config = own_files(tmp_path)
    cwd = tmp_path / "work"
    cwd.mkdir()
    (config / "AGENTS.md").symlink_to(config / "settings.json")
    (config / "CO.md").symlink_to(tmp_path / "data" / "input_history")
    found = load_instructions_files(cwd, config, 8000, own)
    assert found.section == "" and SECRET not in found.section
    assert [(s.path.name, s.reason.split(" (")[0]) for s in found.skipped] == [
        ("AGENTS.md", "it leads to a file that is not Markdown or text"),
        ("CO.md", "it leads outside co's config dir"),
    ]


@pytest.mark.parametrize("where", ["project", "user"])
def test_a_hard_link_to_co_settings_is_skipped(project: Path, tmp_path: Path, where: str) -> None:
    own, config = own_files(tmp_path)
    link = (project if where == "project" else config) / "AGENTS.md"
    os.link(config / "settings.json", link)
    found = load_instructions_files(project, config, 8000, own)
    assert SECRET not in found.section
    assert [(s.path, s.reason) for s in found.skipped] == [
        (link, f"it is a hard link to co's own file {config / 'settings.json'}")
    ]


def test_a_project_file_inside_co_data_dir_is_skipped(tmp_path: Path) -> None:
    """co run in its own data dir (or a project holding it): the files there are co's, not instructions."""
    own, config = own_files(tmp_path)
    data = tmp_path / "data"
    (data / "AGENTS.md").write_text("from co's data dir")
    found = load_instructions_files(data, config, 8000, own)
    assert found.section == "" and [s.reason for s in found.skipped] == ["it lies in co's own settings or data"]


def test_a_fifo_or_directory_is_skipped_without_blocking(project: Path, tmp_path: Path) -> None:
    os.mkfifo(project / "AGENTS.md")
    (project / "CO.md").mkdir()
    section, skipped = load(project, tmp_path)
    assert section == ""
    assert skipped == [("AGENTS.md", "it is not a regular file"), ("CO.md", "it is not a regular file")]


def test_links_that_stay_in_the_project_are_read(project: Path, tmp_path: Path) -> None:
    (project / "docs").mkdir()
    (project / "docs" / "AGENTS.md").write_text("Run make check before committing.")
    (project / "AGENTS.md").symlink_to("docs/AGENTS.md")
    (project / "CO.md").symlink_to(project / "AGENTS.md")  # the same file twice is read once
    own, config = own_files(tmp_path)
    (config / "AGENTS.md").write_text("Answer in English.")
    found = load_instructions_files(project, config, 8000, own)
    assert found.skipped == ()
    assert [f.path.name for f in found.files] == ["AGENTS.md", "AGENTS.md"]
    assert "Run make check" in found.section and "Answer in English." in found.section


def test_the_settings_decide_co_own_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same rules through the settings co runs with (CO_CLI_CONFIG_DIR / CO_CLI_DATA_DIR)."""
    config, data = tmp_path / "c", tmp_path / "d"
    config.mkdir()
    data.mkdir()
    (config / "settings.json").write_text(json.dumps({"api_key": SECRET}))
    monkeypatch.setenv("CO_CLI_CONFIG_DIR", str(config))
    monkeypatch.setenv("CO_CLI_DATA_DIR", str(data))
    cwd = tmp_path / "w"
    cwd.mkdir()
    os.link(config / "settings.json", cwd / "CO.md")
    loaded = load_settings(cwd=cwd)
    found = instructions_files_for(cwd, loaded.settings, loaded.paths)
    assert SECRET not in found.section and [s.path.name for s in found.skipped] == ["CO.md"]


@pytest.mark.e2e
def test_chat_skips_a_planted_link_says_so_and_saves_no_instructions(
    co_server_env: dict[str, str], scripted_server: ScriptedServer, workdir: Path
) -> None:
    (workdir / ".git").mkdir()
    (workdir / "AGENTS.md").symlink_to("/proc/self/environ")
    (workdir / "CO.md").write_text("Always run `make lint-kestrel` before committing.\n")
    env = {**co_server_env, "PLANTED_SECRET": SECRET}
    scripted_server.script(Text("ok"))
    result = run_co(["chat", "-p", "hello"], env, workdir)
    assert result.returncode == 0, result.stderr
    skipped = [line for line in result.stderr.splitlines() if "skipped" in line]
    assert skipped == [
        "warning: instructions file AGENTS.md skipped: it leads to a system file "
        f"(to {Path('/proc').resolve()}/{skipped[0].split('/proc/')[1].split('/')[0]}/environ)"
    ]
    request = json.dumps(scripted_server.chat_requests[-1].body)
    assert SECRET not in request and "PLANTED_SECRET" not in request
    assert "make lint-kestrel" in request  # the regular file next to it is read
    exported = run_co(["sessions", "export", "--all"], env, workdir)
    assert exported.returncode == 0, exported.stderr
    assert "make lint-kestrel" not in exported.stdout and '"instructions":null' in exported.stdout.replace(" ", "")
    db = (Path(co_server_env["CO_CLI_DATA_DIR"]) / "co-cli.db").read_bytes()
    assert b"make lint-kestrel" not in db
    paths = run_co(["config", "path"], env, workdir).stdout
    assert "instructions skipped:   " in paths and "it leads to a system file" in paths


@pytest.mark.e2e
def test_the_repl_names_the_instructions_files_read_and_skipped(
    co_server_env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    (workdir / ".git").mkdir()
    (workdir / "AGENTS.md").write_text("Run make check.\n")
    (workdir / "CO.md").symlink_to(tmp_path / "elsewhere.md")
    (tmp_path / "elsewhere.md").write_text("outside\n")
    config = Path(co_server_env["CO_CLI_CONFIG_DIR"])
    (config / "AGENTS.md").write_text("Answer in English.\n")
    child = spawn_co(["chat"], env=co_server_env, cwd=workdir)
    try:
        shown = " ".join(expect_prompt(child).split())
        assert f"Instructions from {config / 'AGENTS.md'}, AGENTS.md" in shown
        assert "warning: instructions file CO.md skipped: it leads outside the project" in shown
        send_line(child, "/quit")
        child.expect(pexpect.EOF, timeout=10)
    finally:
        child.close(force=True)
