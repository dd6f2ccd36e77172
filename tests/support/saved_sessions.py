"""Sessions written straight into a session database for the e2e tests, read back with SQL, and checks of what co
printed about them."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.support.scripted_server import RecordedRequest


def db_path(env: dict[str, str]) -> Path:
    return Path(env["CO_CLI_DATA_DIR"]) / "co-cli.db"


def query(db: Path, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def session_row(db: Path, session_id: str) -> dict[str, Any]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        row = conn.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
    finally:
        conn.close()
    assert row is not None, f"no session {session_id}"
    return dict(row)


def stored_texts(db: Path, session_id: str) -> list[tuple[Any, ...]]:
    """(seq, kind, status, text) of each saved message of the session, in order."""
    sql = "SELECT seq, kind, status, text FROM messages WHERE session_id = ? ORDER BY seq"
    return query(db, sql, (session_id,))


def turn(prompt: str, answer: str) -> list[Any]:
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    return [
        ModelRequest(parts=[UserPromptPart(prompt)]),
        ModelResponse(parts=[TextPart(answer)], model_name="scripted"),
    ]


def tool_turn(prompt: str, answer: str) -> list[Any]:
    """A completed turn with one list_dir call and its result."""
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    return [
        ModelRequest(parts=[UserPromptPart(prompt)]),
        ModelResponse(parts=[ToolCallPart("list_dir", {"path": "."}, tool_call_id="seeded_call_1")]),
        ModelRequest(parts=[ToolReturnPart("list_dir", "notes.txt", tool_call_id="seeded_call_1")]),
        ModelResponse(parts=[TextPart(answer)], model_name="scripted"),
    ]


def append_turn(db: Path, session_id: str, messages: list[Any]) -> None:
    """Save one turn the way co does: the prompt first, then the whole turn."""
    from co_cli.store import Store

    with Store.open(db) as store:
        seq = store.messages.begin_turn(session_id, messages[0].parts[0].content)
        store.messages.finish_turn(session_id, seq, messages)


def seed_session(db: Path, *turns: list[Any]) -> str:
    """A saved session holding ``turns``, as co would have saved them; returns its id."""
    from co_cli.store import Store

    db.parent.mkdir(parents=True, exist_ok=True)
    with Store.open(db) as store:
        info = store.sessions.create(model="scripted", cwd=str(db.parent), title="")
    for messages in turns:
        append_turn(db, info.id, messages)
    return info.id


def assert_ok(result: Any) -> None:
    assert result.returncode == 0, f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert "Traceback" not in result.stderr


def assert_one_line_error(result: Any, exit_code: int, *needles: str) -> None:
    assert result.returncode == exit_code, f"exit {result.returncode}: {result.stderr}"
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    for needle in needles:
        assert needle in result.stderr


def conversation(request: RecordedRequest) -> list[tuple[str, str]]:
    """(role, text) of every non-system message the server received."""
    from tests.support.scripted_server import message_text

    return [(m["role"], message_text(m)) for m in request.messages if m.get("role") != "system"]
