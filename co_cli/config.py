"""Settings and paths.

Precedence, highest first: environment ``CO_CLI_<NAME>`` > project ``.co-cli/settings.json``
(in the working directory) > user ``settings.json`` (in the user config dir) > defaults. A project file comes
with the code, so it may set a setting only as far as ``PROJECT_SCOPES`` allows.
``CO_CLI_CONFIG_DIR`` and ``CO_CLI_DATA_DIR`` move the two directories.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from platformdirs import user_config_dir, user_data_dir
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, SettingsError

from co_cli.errors import ConfigError
from co_cli.secrets import mask_url_credentials

APP_NAME = "co-cli"
ENV_PREFIX = "CO_CLI_"
PROJECT_SETTINGS = Path(".co-cli") / "settings.json"

Source = Literal["default", "user file", "project file", "environment", "command line"]


def default_config_dir() -> Path:
    return Path(os.environ.get(f"{ENV_PREFIX}CONFIG_DIR") or user_config_dir(APP_NAME))


def default_data_dir() -> Path:
    return Path(user_data_dir(APP_NAME))


def _not_a_boolean(value: Any) -> Any:
    """JSON ``true``/``false`` would otherwise count as 1/0; numbers and numeric strings (the environment) pass."""
    if isinstance(value, bool):
        raise ValueError("must be a number, not true/false")
    return value


# Every numeric setting uses one of these (a test checks).
Int = Annotated[int, BeforeValidator(_not_a_boolean)]
Number = Annotated[float, BeforeValidator(_not_a_boolean)]

# Settings whose value an error message never shows (mcp_servers: its headers and env values are secrets).
SECRET_FIELDS = ("api_key", "mcp_servers")

MCP_SERVER_NAME = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$"


class McpServer(BaseModel):
    """One MCP server: ``command`` (+ ``args``, ``env``, ``cwd``) for stdio, or ``url`` (+ ``headers``) for HTTP.

    ``trust`` (the whole server) and ``trusted_tools`` (some of its tools) skip the approval question; they
    count only in the user's own settings (file or environment), never in a project file.
    """

    model_config = ConfigDict(extra="forbid")

    command: str = ""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    cwd: str = ""
    url: str = ""
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    trust: bool = False
    trusted_tools: list[str] = Field(default_factory=list)
    timeout: Annotated[float, BeforeValidator(_not_a_boolean)] = Field(60.0, gt=0)
    enabled: bool = True

    @field_validator("url", mode="after")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return _checked_http_url(value)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if bool(self.command.strip()) == bool(self.url):
            which = "not both" if self.url else "and has neither"
            raise ValueError(f"an MCP server needs either 'command' (stdio) or 'url' (HTTP), {which}")
        if self.url and (self.args or self.env or self.cwd):
            raise ValueError("'args', 'env' and 'cwd' are for stdio servers ('command'), not 'url'")
        if self.command and self.headers:
            raise ValueError("'headers' are for HTTP servers ('url'), not 'command'")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "http" if self.url else "stdio"

    def masked(self) -> dict[str, Any]:
        """The definition as ``co config show`` prints it: header and env values masked, URL credentials too."""
        data = self.model_dump(exclude_defaults=True)
        for key in ("env", "headers"):
            if key in data:
                data[key] = dict.fromkeys(data[key], "********")
        if "url" in data:
            data["url"] = mask_url_credentials(data["url"])
        return data


def _checked_http_url(value: str) -> str:
    value = value.strip()
    if not value:
        return value
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError:
        raise ValueError("must be an http:// or https:// URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL")
    return value


class Settings(BaseSettings):
    """Every setting co reads. ``settings.reference.json`` documents each field (a test keeps it in sync)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", validate_default=True)

    model: str = Field(
        "auto",
        description="Model to chat with: 'auto', 'local', 'local:/path/model.gguf', 'test', or a pydantic-ai "
        "model string such as 'anthropic:claude-sonnet-4-5', 'openai:gpt-5', 'ollama:qwen2.5'. With base_url "
        "set, the model name sent to that OpenAI-compatible server.",
    )
    base_url: str = Field(
        "",
        description="Base URL of an OpenAI-compatible server (llama.cpp, vLLM, LM Studio, a proxy). "
        "When set, 'auto' uses it and the environment's OPENAI_API_KEY is never sent there.",
    )
    api_key: SecretStr = Field(
        SecretStr(""), description="API key sent to base_url's server (never to any other). Masked in output."
    )
    summarization_model: str = Field("", description="Model that summarises old history; empty uses the chat model.")
    tool_output_trim_chars: Int = Field(
        2000, ge=0, description="Tool outputs in older turns are cut to this many characters; 0 disables."
    )
    tool_output_offload_chars: Int = Field(
        40000,
        ge=0,
        description="Tool outputs longer than this (and never more than a quarter of the context window) are "
        "saved to a private file and replaced in the context by a head/tail preview that the read_tool_output "
        "tool can page through; 0 disables.",
    )
    max_history_messages: Int = Field(
        40,
        ge=0,
        description="Summarise the middle of the history past this many messages (the newest half is kept "
        "verbatim, so values under about 16 summarise almost every turn); 0 disables.",
    )
    context_window: Int = Field(
        0,
        ge=0,
        description="Context window in tokens; 0 looks it up for the model (assumes 128k if unknown).",
    )
    compact_threshold: Number = Field(
        0.8, gt=0, le=1, description="Summarise the middle of the history past this fraction of the window."
    )
    auto_compact: Literal["on", "off"] = Field(
        "on",
        description="'off': compact only on /compact, or when a request would otherwise not fit the window "
        "(co says so).",
    )
    compact_min_span_tokens: Int = Field(
        800,
        ge=0,
        description="A stretch of history smaller than this many tokens is not summarised yet (a summary of it "
        "would not be much smaller); it grows until it is worth it.",
    )
    compact_user_words_tokens: Int = Field(
        20000,
        ge=0,
        description="Tokens of your own messages kept verbatim beside a summary (newest first; never more than a "
        "quarter of the window); older ones keep the sentences that hold an identifier or a rule.",
    )
    local_n_ctx: Int = Field(4096, ge=512, description="Context size (n_ctx) of the embedded local model.")
    local_max_tokens: Int = Field(512, ge=16, description="Cap on tokens per answer of the embedded local model.")
    request_timeout: Number = Field(
        120.0,
        gt=0,
        description="Seconds to wait for a model provider to start answering (over all of its SDK's retries), "
        "then for each chunk of a streamed answer.",
    )
    shell_timeout: Number = Field(60.0, gt=0, description="Seconds a run_shell command may take before it is killed.")
    shell_output_limit: Int = Field(
        20000,
        ge=100,
        description="Characters of run_shell output returned to the model (head and tail kept).",
    )
    shell_sandbox: Literal["auto", "on", "off"] = Field(
        "auto",
        description="run_shell's sandbox (Linux, with bubblewrap): the command may write only in the working "
        "directory and co's temporary directory (TMPDIR), the rest is read-only. 'auto': sandboxed where bubblewrap "
        "runs, else not (co says so once per session); 'on': a command that cannot be sandboxed is not run; 'off': "
        "commands run as in your shell. A project file may only make it stricter.",
    )
    shell_network: bool = Field(
        False,
        description="Whether sandboxed run_shell commands may use the network (off: not even this machine's own "
        "servers). A project file may only turn it off.",
    )
    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="Where sessions (co-cli.db), input history and offloaded tool outputs live.",
    )
    config_dir: Path = Field(default_factory=default_config_dir, description="Where the user settings.json lives.")
    instructions_files_max_tokens: Int = Field(
        8000,
        ge=0,
        description="Cap on the project instructions files (AGENTS.md, CO.md) put in the agent's instructions, in "
        "tokens; past it they are cut with a notice (farthest files first). 0 leaves them out.",
    )
    memory: bool = Field(
        True,
        description="Long-term memory: relevant memories go in the agent's instructions, the agent can remember, "
        "recall and forget, and facts are extracted from your messages (see memory_extract). --no-memory turns it "
        "off for one run.",
    )
    memory_budget_tokens: Int = Field(
        800, ge=0, description="Tokens of memories put in the agent's instructions before each request."
    )
    memory_extract: Literal["off", "review", "auto"] = Field(
        "review",
        description="After each turn, facts from your message are extracted in the background: 'review' proposes "
        "them for /memory review, 'auto' applies them at once (logged and undoable), 'off' does nothing.",
    )
    tasks_budget_tokens: Int = Field(
        1000,
        ge=100,
        description="Tokens the session's task list may take in every request's instructions; a longer list is "
        "refused (the model is told to shorten it).",
    )
    tasks_keep_done_hours: Number = Field(
        24,
        ge=0,
        description="Done tasks leave the task list the model is sent after this many hours; "
        "`co sessions show` keeps them in the list's history.",
    )
    trash_retention_days: Int = Field(
        0,
        ge=0,
        description="Sessions in the trash longer than this many days are purged for good when co starts; "
        "0 keeps them until `co sessions purge`. Nothing outside the trash is ever removed by age.",
    )
    serve_max_request_bytes: Int = Field(
        8_000_000,
        ge=1024,
        description="`co serve` refuses a request body larger than this many bytes (413), before reading the rest.",
    )
    serve_request_timeout: Number = Field(
        30.0,
        gt=0,
        description="Seconds `co serve` gives a request to arrive whole (headers and body, from its first byte or "
        "the connection's start); a request still arriving then is answered 408 and its connection closed.",
    )
    serve_search_timeout: Number = Field(
        30.0,
        gt=0,
        description="Seconds a search of `co serve`'s browser view may take (503 past them); a search also ends "
        "when its client goes or the server stops.",
    )
    auto_title: bool = Field(
        True,
        description="After the first exchange, title the session in the background with the summarisation "
        "model (at most 8 words); off, or if that fails, the first prompt stays the title. /rename always wins.",
    )

    @field_validator("base_url", mode="after")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return _checked_http_url(value)

    @field_validator("mcp_servers", mode="after")
    @classmethod
    def _server_names(cls, value: dict[str, McpServer]) -> dict[str, McpServer]:
        for name in value:
            if not re.fullmatch(MCP_SERVER_NAME, name):  # `$` alone would let a trailing newline through
                raise ValueError(
                    f"MCP server name {name!r}: use 1-32 letters, digits, '-' or '_' (it prefixes the tools' names)"
                )
        return value

    mcp_servers: dict[str, McpServer] = Field(
        default_factory=dict,
        description='MCP servers whose tools the model may call, by name: {"name": {"command": "...", '
        '"args": [...], "env": {...}}} (stdio) or {"name": {"url": "...", "headers": {...}}} '
        '(streamable HTTP); optional "timeout" (seconds per call, 60), "enabled", and, in your own settings '
        'only, "trust" or "trusted_tools" to skip the approval question. Env and header values are secrets: '
        "masked, never saved. A project file's servers start only once you allow them (`co config trust allow`).",
    )
    mcp_schema_budget_tokens: Int = Field(
        4000,
        ge=0,
        description="Tokens the MCP servers' tool schemas may add to every request; past it the model is sent "
        "their names and one-line descriptions and loads a schema with search_tools when it needs it. 0 always "
        "sends them whole.",
    )

    @field_validator("data_dir", "config_dir", mode="after")
    @classmethod
    def _absolute_dir(cls, value: Path) -> Path:
        value = value.expanduser()
        if not str(value).strip() or not value.is_absolute():
            raise ValueError("must be an absolute directory path")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # init_settings carries the merged file values (see load_settings); the environment wins over them.
        return (env_settings, init_settings)


@dataclass(frozen=True)
class Paths:
    """Files and directories derived from the settings."""

    config_dir: Path
    data_dir: Path
    user_settings: Path
    project_settings: Path

    @property
    def db(self) -> Path:
        return self.data_dir / "co-cli.db"

    @property
    def input_history(self) -> Path:
        return self.data_dir / "input_history"

    @property
    def tool_outputs(self) -> Path:
        return self.data_dir / "tool-outputs"

    @property
    def local_model_cache(self) -> Path:
        """The embedded model's saved state after the system prompt (see local/prefix_cache.py)."""
        return self.data_dir / "local-model-cache"

    def ensure_data_dir(self) -> Path:
        """Create the data dir private to the user (0700); an existing directory is left as it is."""
        if not self.data_dir.is_dir():
            try:
                self.data_dir.mkdir(parents=True, mode=0o700)
                os.chmod(self.data_dir, 0o700)  # mkdir's mode is reduced by the umask
            except OSError as exc:
                raise ConfigError(f"cannot create data dir {self.data_dir}: {exc.strerror}") from None
        return self.data_dir


@dataclass(frozen=True)
class OwnFiles:
    """co's own files: the config and data directories (the API key, every session, the input history) and the
    project settings file. A file tool reaches them only with the user's approval and an instructions file is
    never read from them, whether through a path inside them, a symlink into them, or a hard link to one of
    their files from elsewhere."""

    roots: tuple[Path, ...]

    @classmethod
    def of(cls, paths: Paths, settings: Settings) -> OwnFiles:
        """The roots, resolved. The data dir is named twice because ``--no-save`` points ``paths`` at a scratch
        directory while the real one stays in the settings."""
        found: list[Path] = []
        for candidate in (
            paths.config_dir,
            paths.user_settings.parent,
            paths.data_dir,
            settings.config_dir,
            settings.data_dir,
            paths.project_settings,
        ):
            try:
                resolved = Path(os.path.expanduser(candidate)).resolve()
            except (OSError, RuntimeError, ValueError):
                continue
            if resolved not in found:
                found.append(resolved)
        return cls(tuple(found))

    def contains(self, resolved: Path) -> bool:
        """Whether the (already resolved) path lies in one of the roots."""
        return any(resolved == root or resolved.is_relative_to(root) for root in self.roots)

    def holds(self, resolved: Path) -> bool:
        """Whether the (already resolved) path is one of co's own files: inside a root, or a hard link to a file
        directly in one."""
        return self.contains(resolved) or self.linked_to(resolved) is not None

    def linked_to(self, resolved: Path) -> Path | None:
        """The file directly in a root that ``resolved`` is another name (a hard link) of, or None."""
        try:
            status = resolved.stat()
        except OSError:
            return None
        if status.st_nlink < 2:
            return None
        names = self._file_ids.get((status.st_dev, status.st_ino), ())
        return next((name for name in names if name != resolved), None)

    @cached_property
    def _file_ids(self) -> dict[tuple[int, int], list[Path]]:
        """The files directly in a root by (device, inode), read once, when a hard-linked file is checked."""
        ids: dict[tuple[int, int], list[Path]] = {}
        for root in self.roots:
            entries = [root] if root.is_file() else _dir_entries(root)
            for entry in entries:
                try:
                    status = entry.stat()
                except OSError:
                    continue
                ids.setdefault((status.st_dev, status.st_ino), []).append(entry)
        return ids


def _dir_entries(directory: Path) -> list[Path]:
    try:
        return [Path(entry.path) for entry in os.scandir(directory) if entry.is_file(follow_symlinks=False)]
    except OSError:
        return []


@dataclass(frozen=True)
class LoadedSettings:
    settings: Settings
    paths: Paths
    sources: dict[str, Source]
    warnings: tuple[str, ...] = ()
    project_mcp_servers: tuple[str, ...] = ()
    """The MCP servers a project file defined (they run only once the user allows them, see project_trust)."""


ScopeKind = Literal["project", "provider", "tighter", "user"]


@dataclass(frozen=True)
class ProjectScope:
    """What a project's ``.co-cli/settings.json`` may do with one setting. That file comes with the code in the
    working directory (e.g. a cloned repository), so it may act only on that project:

    - ``project``: it may set the setting.
    - ``provider``: it may set it (the model and the servers co talks to); co warns on stderr when the model or
      a server comes from the file, and asks before it sends anything to a server the file chose or starts a
      server the file defines (see project_trust).
    - ``tighter``: it may only make the setting stricter than your own value (``order``: its values from the
      strictest; without it, lower is stricter); a looser value is ignored, with a warning.
    - ``user``: only your own settings (the user file, the environment) count; the file's value is ignored,
      with a warning. ``why`` says what the setting reaches beyond the project.
    """

    kind: ScopeKind
    why: str = ""
    order: tuple[Any, ...] = ()


_PROJECT = ProjectScope("project")
_PROVIDER = ProjectScope("provider")
_MEMORY = "your memories serve every project"
_SANDBOX = "it keeps the project's commands from the rest of your machine"

# Every setting, and what a project file may do with it (a test checks each setting is here).
PROJECT_SCOPES: dict[str, ProjectScope] = {
    "model": _PROVIDER,
    "base_url": _PROVIDER,
    "api_key": _PROVIDER,
    "summarization_model": _PROVIDER,
    "tool_output_trim_chars": _PROJECT,
    "tool_output_offload_chars": _PROJECT,
    "max_history_messages": _PROJECT,
    "context_window": _PROJECT,
    "compact_threshold": _PROJECT,
    "auto_compact": _PROJECT,
    "compact_min_span_tokens": _PROJECT,
    "compact_user_words_tokens": _PROJECT,
    "local_n_ctx": _PROJECT,
    "local_max_tokens": _PROJECT,
    "request_timeout": _PROJECT,
    "shell_timeout": _PROJECT,
    "shell_output_limit": _PROJECT,
    "shell_sandbox": ProjectScope("tighter", _SANDBOX, order=("on", "auto", "off")),
    "shell_network": ProjectScope("tighter", _SANDBOX, order=(False, True)),
    "data_dir": ProjectScope("user", "it moves where co keeps every project's sessions"),
    "config_dir": ProjectScope("user", "it moves your own settings"),
    "instructions_files_max_tokens": _PROJECT,
    "memory": ProjectScope("tighter", _MEMORY, order=(False, True)),
    "memory_budget_tokens": ProjectScope("tighter", _MEMORY),
    "memory_extract": ProjectScope("tighter", _MEMORY, order=("off", "review", "auto")),
    "tasks_budget_tokens": _PROJECT,
    "tasks_keep_done_hours": _PROJECT,
    "trash_retention_days": ProjectScope("user", "it purges the trash of every project"),
    "serve_max_request_bytes": ProjectScope("user", "co serve answers for every project"),
    "serve_request_timeout": ProjectScope("user", "co serve answers for every project"),
    "serve_search_timeout": ProjectScope("user", "co serve answers for every project"),
    "auto_title": _PROJECT,
    "mcp_servers": _PROVIDER,
    "mcp_schema_budget_tokens": _PROJECT,
}


def env_var(field: str) -> str:
    return f"{ENV_PREFIX}{field.upper()}"


def _read_settings_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        if path.exists() or path.is_symlink():  # a directory, a device, a dangling link: not silently skipped
            raise ConfigError(f"settings file {path} is not a regular file")
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read settings file {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"malformed settings file {path}: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"malformed settings file {path}: expected a JSON object")
    unknown = sorted(set(data) - set(Settings.model_fields))
    if unknown:
        raise ConfigError(f"unknown setting {unknown[0]!r} in {path}")
    return data


def shown_input(field: str, value: Any) -> str:
    """How an error message quotes a rejected value: never a secret, and a URL without its credentials."""
    if field in SECRET_FIELDS:
        kind = type(value).__name__
        return f"got {'an' if kind[:1] in 'aeiou' else 'a'} {kind}, value not shown"
    if field == "base_url":
        return f"got {mask_url_credentials(value)!r}" if isinstance(value, str) else f"got a {type(value).__name__}"
    return f"got {value!r}"


def load_settings(cwd: Path | None = None, **overrides: Any) -> LoadedSettings:
    """Load settings from every source; raise ConfigError (one line) on any problem."""
    cwd = cwd or Path.cwd()
    config_dir = default_config_dir()
    user_file = config_dir / "settings.json"
    project_file = cwd / PROJECT_SETTINGS
    user = _read_settings_file(user_file)
    # What the environment or the command line sets wins over any file: a project's value of it goes unsaid.
    yours = {name for name in Settings.model_fields if os.environ.get(env_var(name)) is not None}
    yours |= {name for name, value in overrides.items() if value is not None}
    project, warnings = _within_project_scope(_read_settings_file(project_file), project_file, yours)
    merged = {**user, **project}
    merged_servers, from_project, server_warnings = _merge_mcp_servers(user, project, project_file)
    if merged_servers is not None:
        merged["mcp_servers"] = merged_servers
    files = (user, user_file, project, project_file)
    settings = _validated(merged, *files)
    warnings += _keep_only_tighter(settings, *files, yours)
    for key, value in overrides.items():
        if value is not None:
            setattr(settings, key, value)
    sources = _sources(overrides, project, user)
    warnings += _project_choices(settings, sources, project_file)
    if sources["mcp_servers"] == "environment":
        from_project = ()  # the environment's servers replace the files'
    else:
        warnings.extend(server_warnings)
        if from_project:
            sources["mcp_servers"] = "project file"
    paths = Paths(
        config_dir=settings.config_dir,
        data_dir=settings.data_dir,
        user_settings=user_file,
        project_settings=project_file,
    )
    return LoadedSettings(
        settings=settings,
        paths=paths,
        sources=sources,
        warnings=tuple(warnings),
        project_mcp_servers=from_project,
    )


def _sources(overrides: dict[str, Any], project: dict[str, Any], user: dict[str, Any]) -> dict[str, Source]:
    """Where each setting's value comes from, the strongest first: command line, environment, files, default."""
    sources: dict[str, Source] = {}
    for name in Settings.model_fields:
        if overrides.get(name) is not None:
            sources[name] = "command line"
        elif os.environ.get(env_var(name)) is not None:
            sources[name] = "environment"
        elif name in project:
            sources[name] = "project file"
        elif name in user:
            sources[name] = "user file"
        else:
            sources[name] = "default"
    return sources


def _project_choices(settings: Settings, sources: dict[str, Source], project_file: Path) -> list[str]:
    """A warning for each choice a project file made of where the conversation goes; the user's key is not sent
    to a server a project file chose (it is cleared in ``settings``)."""
    warnings = []
    if sources["base_url"] == "project file" and sources["api_key"] != "project file" and settings.api_key:
        # Never send the user's key to a server that a project file chose.
        settings.api_key = SecretStr("")
        warnings.append(
            f"base_url comes from {project_file}: your api_key is not sent there (set api_key in that file "
            "or CO_CLI_BASE_URL to allow it)"
        )
    if sources["base_url"] == "project file" and settings.base_url:
        warnings.append(
            f"base_url {mask_url_credentials(settings.base_url)} comes from {project_file}: prompts, files "
            "and command output go to that server"
        )
    if sources["model"] == "project file":
        warnings.append(f"model {settings.model!r} comes from {project_file}")
    if sources["summarization_model"] == "project file" and settings.summarization_model:
        warnings.append(
            f"summarization_model {settings.summarization_model!r} comes from {project_file}: the conversation "
            "is sent there to be summarised"
        )
    return warnings


def _within_project_scope(
    project: dict[str, Any], project_file: Path, yours: set[str]
) -> tuple[dict[str, Any], list[str]]:
    """The project file's values without those only the user's own settings may set, and a warning for each
    (none for a setting in ``yours``, the environment's or command line's, whose value wins anyway)."""
    kept, warnings = {}, []
    for key, value in project.items():
        scope = PROJECT_SCOPES[key]
        if scope.kind != "user":
            kept[key] = value
        elif key not in yours:
            warnings.append(
                f"{key} in {project_file} ignored: {scope.why}, so only your own settings (the user file, "
                f"{env_var(key)}) may set it"
            )
    return kept, warnings


def _keep_only_tighter(
    settings: Settings,
    user: dict[str, Any],
    user_file: Path,
    project: dict[str, Any],
    project_file: Path,
    yours: set[str],
) -> list[str]:
    """Put back the user's own value of each ``tighter`` setting the project file would loosen (dropping it from
    ``project``), and say so; a setting in ``yours`` (the environment's or command line's) wins anyway."""
    keys = [k for k in project if PROJECT_SCOPES[k].kind == "tighter" and k not in yours]
    if not keys:
        return []
    own = _validated(dict(user), user, user_file, {}, project_file)  # the user file, the environment, defaults
    warnings = []
    for key in keys:
        scope, theirs, yours = PROJECT_SCOPES[key], getattr(settings, key), getattr(own, key)
        looser = scope.order.index(theirs) > scope.order.index(yours) if scope.order else theirs > yours
        if looser:
            setattr(settings, key, yours)
            del project[key]
            warnings.append(
                f"{key} {json.dumps(theirs)} in {project_file} ignored: a project file may only make it stricter "
                f"than your own {json.dumps(yours)} ({scope.why})"
            )
    return warnings


def _validated(
    merged: dict[str, Any], user: dict[str, Any], user_file: Path, project: dict[str, Any], project_file: Path
) -> Settings:
    """``Settings`` from the merged file values and the environment; an invalid value is a one-line error naming
    where it came from."""
    try:
        return Settings(**merged)
    except SettingsError as exc:  # an environment variable that should hold JSON does not
        raise ConfigError(_not_json(exc)) from None
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else "?"
        if os.environ.get(env_var(field)) is not None:
            where = env_var(field)
        elif field in project:
            where = f"{field!r} in {project_file}"
        elif field in user:
            where = f"{field!r} in {user_file}"
        else:
            where = field
        inner = ".".join(str(part) for part in err["loc"][1:])
        said = str(err["msg"]).removeprefix("Value error, ")
        message = f"{inner}: {said}" if inner else said
        raise ConfigError(f"invalid setting {where}: {message} ({shown_input(field, err.get('input'))})") from None


JSON_EXPECTED = {"mcp_servers": 'a JSON object of servers by name, e.g. {"docs": {"command": "docs-mcp"}}'}
"""What a setting that the environment gives as JSON should hold."""


def _not_json(exc: SettingsError) -> str:
    """One line for an environment variable that is not the JSON its setting needs."""
    found = re.search(r'field "(\w+)"', str(exc))
    field = found.group(1) if found else ""
    if field not in Settings.model_fields:
        return f"invalid setting: {exc}"
    raw = os.environ.get(env_var(field), "")
    try:
        json.loads(raw)
        why = "not the JSON it needs"
    except json.JSONDecodeError as err:
        why = f"not valid JSON ({err.msg} at column {err.colno})"
    expected = JSON_EXPECTED.get(field, "JSON")
    return f"invalid setting {env_var(field)}: {why} ({shown_input(field, raw)}); expected {expected}"


def _merge_mcp_servers(
    user: dict[str, Any], project: dict[str, Any], project_file: Path
) -> tuple[dict[str, Any] | None, tuple[str, ...], list[str]]:
    """The user's MCP servers plus the project's (a name the user already uses keeps the user's server), the
    names the project added, and warnings. A project file cannot mark its own servers trusted."""
    if "mcp_servers" not in project:
        return None, (), []
    user_servers, project_servers = user.get("mcp_servers", {}), project["mcp_servers"]
    if not isinstance(user_servers, dict) or not isinstance(project_servers, dict):
        return None, (), []  # the Settings model reports the malformed value
    merged, added, warnings = dict(user_servers), [], []
    for name, spec in project_servers.items():
        if name in user_servers:
            warnings.append(f"MCP server {name!r} in {project_file} ignored: your settings define one of that name")
            continue
        if isinstance(spec, dict) and (spec.get("trust") or spec.get("trusted_tools")):
            warnings.append(
                f"MCP server {name!r} in {project_file}: 'trust' and 'trusted_tools' count only in your own "
                "settings; its calls ask for approval"
            )
            spec = {k: v for k, v in spec.items() if k not in ("trust", "trusted_tools")}
        merged[name] = spec
        added.append(name)
    return merged, tuple(added), warnings


def settings_reference() -> dict[str, Any]:
    """What settings.reference.json documents: each setting's default, variable, what a project file may do with
    it (its ``PROJECT_SCOPES`` kind) and description."""
    ref: dict[str, Any] = {}
    for name, info in Settings.model_fields.items():
        if name in ("data_dir", "config_dir"):
            default: Any = "(platform user " + ("data" if name == "data_dir" else "config") + " dir)/co-cli"
        else:
            default = info.get_default(call_default_factory=True)
            if isinstance(default, SecretStr):
                default = default.get_secret_value()
        ref[name] = {
            "default": default,
            "env": env_var(name),
            "project_file": PROJECT_SCOPES[name].kind,
            "description": info.description,
        }
    return ref
