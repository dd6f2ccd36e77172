"""Building CoDeps and RunContext for tool tests, with every directory under a temporary path."""

from __future__ import annotations

from pathlib import Path

from pydantic_ai import RunContext
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RunUsage

from co_cli.config import Paths, Settings
from co_cli.deps import CoDeps
from co_cli.store import Store
from co_cli.store.sessions import SessionInfo


def make_deps(tmp_path: Path, **settings: object) -> CoDeps:
    """CoDeps working in ``tmp_path/work`` (created); the caller has cleared CO_CLI_* from the environment."""
    config = Settings(
        data_dir=tmp_path / "data",
        config_dir=tmp_path / "config",
        **settings,  # type: ignore[arg-type]
    )
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    paths = Paths(
        config_dir=config.config_dir,
        data_dir=config.data_dir,
        user_settings=config.config_dir / "settings.json",
        project_settings=work / ".co-cli" / "settings.json",
    )
    paths.ensure_data_dir()
    return CoDeps(settings=config, paths=paths, cwd=work, store=Store.open(paths.db))


def ctx_for(deps: CoDeps, *, approved: bool = False) -> RunContext[CoDeps]:
    return RunContext(deps=deps, model=TestModel(), usage=RunUsage(), tool_call_approved=approved)


def in_session(deps: CoDeps, session_id: str) -> CoDeps:
    """``deps`` as in the live session ``session_id`` (its state names that session)."""
    deps.state.info = SessionInfo(session_id, "", 0.0, 0.0, "test", str(deps.cwd), None, None, 0, 0, 0, 0.0, 0)
    return deps
