"""Servers a project settings file may send the conversation to or start, as the user confirmed them.

A project's ``.co-cli/settings.json`` comes with the code (e.g. a cloned repository). When it sets
``base_url``, co asks once before sending prompts, files and command output there, and remembers the
answer per project directory and exact server URL in ``trusted-servers.json`` (0600) in the config dir.
An MCP server the project file defines is started only once the user allowed it for that project, by name
and exact definition (a changed command, argument, URL, env, cwd or header asks again, showing the new
one; only a digest of the definition is kept, never its values). The same file keeps the command prefixes the
user allows ``run_shell`` to run without asking in a project (``co config trust allow --command PREFIX``; see
``prefix_allows`` for what a prefix matches): never from a project's own files. ``co config trust list`` shows the
entries, ``co config trust revoke`` removes them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from co_cli.config import LoadedSettings, McpServer
from co_cli.errors import ConfigError
from co_cli.secrets import mask_url_credentials, secret_name
from co_cli.terminal_text import one_line

TRUST_FILE = "trusted-servers.json"
ALLOW_COMMAND = "co config trust allow"
ALLOW_MCP_COMMAND = "co config trust allow --mcp {name}"


@dataclass(frozen=True)
class TrustedServer:
    project: str  # absolute path of the project directory (the one holding .co-cli/)
    base_url: str  # exactly as the project file has it


@dataclass(frozen=True)
class TrustedCommand:
    project: str  # absolute path of the project (its repository root, see memory.instructions_files.project_root)
    prefix: str  # the words a command must start with, as the user typed them


@dataclass(frozen=True)
class TrustedMcpServer:
    project: str  # absolute path of the project directory
    server: str  # the server's name in the project file
    digest: str  # sha256 of its exact definition (see mcp_digest)


def trust_file(config_dir: Path) -> Path:
    return config_dir / TRUST_FILE


def project_dir(loaded: LoadedSettings) -> Path:
    return loaded.paths.project_settings.parent.parent.resolve()


def project_server(loaded: LoadedSettings) -> str:
    """The server a project file chose (empty when base_url comes from anywhere else)."""
    return loaded.settings.base_url if loaded.sources.get("base_url") == "project file" else ""


def _read(config_dir: Path) -> dict[str, Any]:
    path = trust_file(config_dir)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise TypeError("not an object")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, ValueError, TypeError) as exc:
        raise _damaged(config_dir, exc) from None
    return data


def _damaged(config_dir: Path, exc: Exception) -> ConfigError:
    return ConfigError(f"cannot read {trust_file(config_dir)} ({type(exc).__name__}); remove it to start over")


def load_trusted(config_dir: Path) -> list[TrustedServer]:
    data = _read(config_dir)
    try:
        return [TrustedServer(project=str(e["project"]), base_url=str(e["base_url"])) for e in data.get("trusted", [])]
    except (KeyError, TypeError) as exc:
        raise _damaged(config_dir, exc) from None


def load_trusted_mcp(config_dir: Path) -> list[TrustedMcpServer]:
    data = _read(config_dir)
    try:
        return [
            TrustedMcpServer(project=str(e["project"]), server=str(e["server"]), digest=str(e["digest"]))
            for e in data.get("mcp", [])
        ]
    except (KeyError, TypeError) as exc:
        raise _damaged(config_dir, exc) from None


def load_trusted_commands(config_dir: Path) -> list[TrustedCommand]:
    data = _read(config_dir)
    try:
        return [TrustedCommand(project=str(e["project"]), prefix=str(e["prefix"])) for e in data.get("commands", [])]
    except (KeyError, TypeError) as exc:
        raise _damaged(config_dir, exc) from None


def save_trusted(
    config_dir: Path,
    entries: list[TrustedServer],
    mcp: list[TrustedMcpServer] | None = None,
    commands: list[TrustedCommand] | None = None,
) -> None:
    """Write the lists atomically, readable by the user only (``mcp`` or ``commands`` None keeps those entries as
    they are)."""
    path = trust_file(config_dir)
    if mcp is None:
        mcp = load_trusted_mcp(config_dir)
    if commands is None:
        commands = load_trusted_commands(config_dir)
    lists: dict[str, list[Any]] = {"trusted": entries, "mcp": mcp, "commands": commands}
    try:
        if not config_dir.is_dir():
            config_dir.mkdir(parents=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".trusted-", dir=config_dir)  # created 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({key: [asdict(e) for e in value] for key, value in lists.items()}, f, indent=2)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None


def is_trusted(config_dir: Path, project: Path, base_url: str) -> bool:
    return TrustedServer(str(project), base_url) in load_trusted(config_dir)


def trust(config_dir: Path, project: Path, base_url: str) -> None:
    entries = load_trusted(config_dir)
    entry = TrustedServer(str(project), base_url)
    if entry not in entries:
        save_trusted(config_dir, [*entries, entry])


Trusted = TrustedServer | TrustedMcpServer | TrustedCommand


def load_all(config_dir: Path) -> list[Trusted]:
    return [*load_trusted(config_dir), *load_trusted_mcp(config_dir), *load_trusted_commands(config_dir)]


def revoke(
    config_dir: Path, project: Path | None, prefix: str | None = None, commands_only: bool = False
) -> list[Trusted]:
    """Forget what was allowed for ``project`` (every project if None): everything, its command rules
    (``commands_only``), or its command rule ``prefix``; return what was removed."""
    entries, mcp, commands = load_trusted(config_dir), load_trusted_mcp(config_dir), load_trusted_commands(config_dir)
    everything: list[Trusted] = [*entries, *mcp, *commands]
    removed = [
        e
        for e in everything
        if (project is None or e.project == str(project))
        and (not (commands_only or prefix) or isinstance(e, TrustedCommand))
        and (prefix is None or (isinstance(e, TrustedCommand) and e.prefix == prefix))
    ]
    if removed:
        save_trusted(
            config_dir,
            [e for e in entries if e not in removed],
            [e for e in mcp if e not in removed],
            [e for e in commands if e not in removed],
        )
    return removed


def describe(entry: Trusted) -> str:
    if isinstance(entry, TrustedMcpServer):
        return one_line(f"{entry.project}  MCP server {entry.server}")
    if isinstance(entry, TrustedCommand):
        return one_line(f"{entry.project}  commands starting with: {entry.prefix}")
    return one_line(f"{entry.project}  {mask_url_credentials(entry.base_url)}")


def project_summarizer(loaded: LoadedSettings) -> str:
    """The provider a project file chose for summaries (``summarization_model`` naming a provider, e.g.
    ``openai:gpt-5``), as it is remembered in the trust file; empty when there is none: a bare model name goes
    to the chat model's server, ``local`` stays on the machine."""
    spec = loaded.settings.summarization_model.strip()
    if loaded.sources.get("summarization_model") != "project file" or ":" not in spec:
        return ""
    return f"{SUMMARIZER_PREFIX}{spec}"


SUMMARIZER_PREFIX = "summarization_model "


def mcp_digest(spec: McpServer) -> str:
    """A digest of a server's exact definition: what the user allowed, without keeping its secrets."""
    canonical = json.dumps(spec.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def is_mcp_trusted(loaded: LoadedSettings, name: str) -> bool:
    """The user's own servers always run; a project file's only once allowed for this project."""
    if name not in loaded.project_mcp_servers:
        return True
    entry = TrustedMcpServer(str(project_dir(loaded)), name, mcp_digest(loaded.settings.mcp_servers[name]))
    return entry in load_trusted_mcp(loaded.paths.user_settings.parent)


def trust_mcp(loaded: LoadedSettings, name: str) -> TrustedMcpServer:
    config_dir = loaded.paths.user_settings.parent
    entry = TrustedMcpServer(str(project_dir(loaded)), name, mcp_digest(loaded.settings.mcp_servers[name]))
    entries, mcp = load_trusted(config_dir), load_trusted_mcp(config_dir)
    mcp = [e for e in mcp if (e.project, e.server) != (entry.project, entry.server)]  # an older definition
    save_trusted(config_dir, entries, [*mcp, entry])
    return entry


MASKED = "********"


def describe_mcp_server(spec: McpServer) -> list[str]:
    """What starting a server does, one line each, as the user is asked about it: the command and its arguments
    (or the URL and its header names), then its ``env`` (the values of names that say they hold a credential
    masked, every other value shown: ``PYTHONPATH=./hack`` changes what runs) and ``cwd``. Every string is shown
    by ``one_line``: a newline or a bidi control (U+202E) in a definition is an escape, never a line or a
    reordering of its own."""
    if spec.url:
        lines = [f"connect to {one_line(mask_url_credentials(spec.url))}"]
        if spec.headers:
            lines.append("headers " + one_line(" ".join(f"{name}={MASKED}" for name in spec.headers)))
        return lines
    lines = [f"run {one_line(shlex.join([spec.command, *spec.args]))}"]
    if spec.env:
        shown = (f"{name}={MASKED if secret_name(name) else shlex.quote(value)}" for name, value in spec.env.items())
        lines.append("env " + one_line(" ".join(shown)))
    if spec.cwd:
        lines.append(f"cwd {one_line(spec.cwd)}")
    return lines


def confirm_project_mcp_servers(loaded: LoadedSettings, ask: Callable[[str], str] | None) -> dict[str, str]:
    """Which of the project file's MCP servers may not start, each with the one line that says why.

    The user's own servers always start. A project's server starts once allowed for this project; ``ask``
    (None: nobody to ask, as in ``-p`` and pipes) asks about the others, one by one, showing what starting it
    runs (see describe_mcp_server)."""
    refused: dict[str, str] = {}
    source, project = one_line(str(loaded.paths.project_settings)), one_line(str(project_dir(loaded)))
    for name in loaded.project_mcp_servers:
        spec = loaded.settings.mcp_servers[name]
        if not spec.enabled or is_mcp_trusted(loaded, name):
            continue
        shown = one_line(name)
        if ask is None:
            refused[name] = (
                f"MCP server {shown} from {source} not started: not allowed for this project; run "
                f"`{ALLOW_MCP_COMMAND.format(name=shown)}` in {project} to allow it"
            )
            continue
        details = "".join(f"  {line}\n" for line in describe_mcp_server(spec))
        answer = ask(
            f"{source} asks co to start MCP server '{shown}' (its tools could then be offered to the model):\n"
            f"{details}"
            f"Allow this MCP server for {project}? (remembered; undo with `co config trust revoke`) [y/N] "
        )
        if answer.strip().lower() in ("y", "yes"):
            trust_mcp(loaded, name)
        else:
            refused[name] = f"MCP server {shown} not started: not allowed for this project"
    return refused


def confirm_project_server(loaded: LoadedSettings, ask: Callable[[str], str] | None) -> None:
    """Go on only if the servers a project file chose (``base_url``, and a provider in ``summarization_model``,
    which is sent the conversation to summarise it) were allowed for this project, or the user allows them now.

    ``ask`` shows a question and returns the answer; None means there is no one to ask (``-p``, pipes), and
    an unconfirmed server is refused with a one-line error.
    """
    for chosen in (project_server(loaded), project_summarizer(loaded)):
        if chosen:
            _confirm(loaded, chosen, ask)


def _confirm(loaded: LoadedSettings, base_url: str, ask: Callable[[str], str] | None) -> None:
    config_dir, project = loaded.paths.user_settings.parent, project_dir(loaded)
    if is_trusted(config_dir, project, base_url):
        return
    summarizer = base_url.startswith(SUMMARIZER_PREFIX)
    shown = one_line(base_url.removeprefix(SUMMARIZER_PREFIX) if summarizer else mask_url_credentials(base_url))
    source = one_line(str(loaded.paths.project_settings))
    yourself = "CO_CLI_SUMMARIZATION_MODEL" if summarizer else "CO_CLI_BASE_URL"
    if ask is None:
        raise ConfigError(
            f"{source} points co{' (for summaries)' if summarizer else ''} at {shown}, which you have not allowed "
            f"for this project: run `{ALLOW_COMMAND}` in {one_line(str(project))} (or `co chat` there once, "
            f"interactively), or set {yourself} yourself"
        )
    what = "conversation, to be summarised," if summarizer else "prompts, files and command output"
    answer = ask(
        f"{source} asks co to send your {what} to {shown}.\n"
        f"Allow this server for {one_line(str(project))}? (remembered; undo with `co config trust revoke`) [y/N] "
    )
    if answer.strip().lower() not in ("y", "yes"):
        raise ConfigError(f"not using {shown}: not allowed for this project")
    trust(config_dir, project, base_url)


# ----- command rules ------------------------------------------------------------------------------------------

NOT_SIMPLE = frozenset(";&|<>()$`\\\n\r*?[]{}!#")
"""Characters that make a command line more than a simple command (a list, a pipeline, a substitution, a
redirection, an expansion, a glob, a comment): a command holding any of them, even inside quotes, is never allowed
by a prefix rule."""


def simple_words(command: str) -> list[str] | None:
    """The words of ``command`` when it is one simple command: none of ``NOT_SIMPLE``'s characters anywhere in it,
    quotes balanced, only printable characters; else None."""
    if not command.isprintable() or any(char in NOT_SIMPLE for char in command):
        return None
    try:
        return shlex.split(command)
    except ValueError:
        return None


def prefix_allows(prefix: str, command: str) -> bool:
    """Whether a rule allows ``command``: the command is a simple command (``simple_words``) whose first words are
    the prefix's words, whole (``git status`` allows ``git status --short``, never ``git status-foo`` or
    ``git status; rm x``). An assignment before the command (``X=1 git status``) is a word of its own: no match."""
    words, wanted = simple_words(command), simple_words(prefix)
    return words is not None and bool(wanted) and words[: len(wanted or ())] == wanted


def checked_prefix(prefix: str) -> str:
    """The prefix as it is kept (its words joined by single spaces), or ConfigError when it is not a simple command."""
    words = simple_words(prefix)
    if not words:
        raise ConfigError(
            f"not a command prefix: {one_line(prefix)!r} (give the first words of a simple command, without ; & | "
            "< > $ ` ( ) quotes left open or globs)"
        )
    return shlex.join(words)


def allow_command(config_dir: Path, project: Path, prefix: str) -> TrustedCommand:
    """Keep the rule that commands starting with ``prefix`` run without asking in ``project``."""
    entry = TrustedCommand(str(project), checked_prefix(prefix))
    commands = load_trusted_commands(config_dir)
    if entry not in commands:
        save_trusted(config_dir, load_trusted(config_dir), None, [*commands, entry])
    return entry


def command_rule(config_dir: Path, project: Path, command: str) -> TrustedCommand | None:
    """The user's rule for ``project`` that allows ``command``, if any."""
    for entry in load_trusted_commands(config_dir):
        if entry.project == str(project) and prefix_allows(entry.prefix, command):
            return entry
    return None
