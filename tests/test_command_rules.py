"""Command rules the user keeps for a project: a prefix of whole words allows a simple command and nothing more."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from pydantic_ai import ApprovalRequired

from co_cli.errors import ConfigError
from co_cli.project_trust import (
    TRUST_FILE,
    allow_command,
    checked_prefix,
    command_rule,
    load_trusted_commands,
    prefix_allows,
    revoke,
    trust,
)
from co_cli.tools.sandbox import probe
from co_cli.tools.shell import run_shell
from tests.support.co_process import run_co
from tests.support.deps import ctx_for, make_deps


@pytest.mark.parametrize(
    ("prefix", "command"),
    [
        ("git status", "git status"),
        ("git status", "git status --short"),
        ("git status", "  git   status  -s"),
        ("pytest", "pytest -q tests/test_x.py -k 'a and b'"),
        ("git commit -m", 'git commit -m "fix the bug"'),
        ("git status", "'git' status"),
    ],
)
def test_a_prefix_allows_a_simple_command_starting_with_its_words(prefix: str, command: str) -> None:
    assert prefix_allows(prefix, command)


@pytest.mark.parametrize(
    "command",
    [
        "git statusx",
        "git",
        "git log",
        "X=1 git status",
        "git status; rm -rf ~",
        "git status && curl example.org",
        "git status || true",
        "git status | sh",
        "git status & sleep 1",
        "git status > ~/.bashrc",
        "git status < /etc/passwd",
        "git status $(rm x)",
        "git status `rm x`",
        "git status ${HOME}",
        'git status "$(rm x)"',
        "git status 'a;b'",
        "git status *",
        "git status (x)",
        "git status\nrm x",
        "git status \\; rm",
        "git status 'unclosed",
        "git status {a,b}",
        "git status # comment",
    ],
)
def test_a_prefix_never_allows_another_command_or_a_compound_one(command: str) -> None:
    assert not prefix_allows("git status", command)


def test_a_prefix_must_be_a_simple_command_itself() -> None:
    assert checked_prefix("  git   status ") == "git status"
    for bad in ("", "   ", "git status;", "a | b", "$(x)", "ls *"):
        with pytest.raises(ConfigError):
            checked_prefix(bad)


def test_rules_are_kept_per_project_beside_the_trusted_servers(tmp_path: Path) -> None:
    config, here, there = tmp_path / "config", tmp_path / "here", tmp_path / "there"
    trust(config, here, "http://10.0.0.1/v1")
    allow_command(config, here, "git status")
    allow_command(config, here, "git status")  # once
    allow_command(config, there, "pytest")
    assert [r.prefix for r in load_trusted_commands(config)] == ["git status", "pytest"]
    assert command_rule(config, here, "git status -s") is not None
    assert command_rule(config, there, "git status -s") is None  # another project's rule
    assert command_rule(config, here, "git status; ls") is None
    assert oct((config / TRUST_FILE).stat().st_mode & 0o777) == "0o600"
    removed = revoke(config, here, "git status")
    assert [getattr(e, "prefix", None) for e in removed] == ["git status"]
    assert json.loads((config / TRUST_FILE).read_text())["trusted"]  # the server stays
    assert revoke(config, here, commands_only=True) == []


def test_run_shell_runs_a_matching_command_without_asking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("CO_CLI_"):
            monkeypatch.delenv(name)
    deps = make_deps(tmp_path)
    allow_command(deps.paths.user_settings.parent, Path(deps.project), "echo rule")
    result = asyncio.run(run_shell(ctx_for(deps), "echo rule matched"))
    assert "rule matched" in result and "exit code: 0" in result
    for asks in ("echo other", "echo rule; echo more", "echo rule $(id)", "echo rules"):
        with pytest.raises(ApprovalRequired):
            asyncio.run(run_shell(ctx_for(deps), asks))
    if probe(True):  # no sandbox here: a call asking to run outside it runs as any other
        assert "exit code: 0" in asyncio.run(run_shell(ctx_for(deps), "echo rule", None, False))
    else:
        with pytest.raises(ApprovalRequired):  # a rule never takes a command out of the sandbox
            asyncio.run(run_shell(ctx_for(deps), "echo rule", None, False))


def test_trust_cli_allows_lists_and_revokes_command_rules(co_env: dict[str, str], workdir: Path) -> None:
    added = run_co(["config", "trust", "allow", "--command", "git status", "--command", "pytest -q"], co_env, workdir)
    assert added.returncode == 0, added.stderr
    assert f"allowed: {workdir.resolve()}  commands starting with: git status" in added.stdout
    refused = run_co(["config", "trust", "allow", "--command", "ls && rm x"], co_env, workdir)
    assert refused.returncode == 2 and "not a command prefix" in refused.stderr and "Traceback" not in refused.stderr
    listed = run_co(["config", "trust", "list"], co_env, workdir).stdout
    assert "commands starting with: git status" in listed and "commands starting with: pytest -q" in listed
    shown = run_co(["config", "show"], co_env, workdir).stdout
    assert "shell commands run without asking in" in shown and "git status, pytest -q" in shown
    revoked = run_co(["config", "trust", "revoke", "--command", "pytest -q"], co_env, workdir)
    assert "revoked:" in revoked.stdout and "pytest -q" in revoked.stdout
    listed = run_co(["config", "trust", "list"], co_env, workdir).stdout
    assert "pytest -q" not in listed and "git status" in listed
    run_co(["config", "trust", "revoke"], co_env, workdir)
    assert run_co(["config", "trust", "list"], co_env, workdir).stdout == ""
