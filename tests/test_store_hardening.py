"""The session store against hostile imports, odd or damaged databases, read-only files and secrets in URLs."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from typer.testing import CliRunner

from co_cli.context.repair import repair_orphans, tool_pairs_valid
from co_cli.errors import CoError, StoreError
from co_cli.store import CompactionRecord, Store
from co_cli.store.export import export_json, export_markdown, import_json
from co_cli.store.redact import url_without_credentials
from co_cli.terminal import sessions_cli
from co_cli.terminal.sessions_cli import app
from co_cli.terminal.views import format_time, sessions_table

runner = CliRunner()


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = tmp_path / "data"
    monkeypatch.setenv("CO_CLI_DATA_DIR", str(data))
    monkeypatch.setenv("CO_CLI_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    return data


@pytest.fixture
def db(data_dir: Path) -> Path:
    return data_dir / "co-cli.db"


def save_turn(store: Store, sid: str, messages: list[ModelMessage]) -> None:
    first = messages[0].parts[0]
    assert isinstance(first, UserPromptPart) and isinstance(first.content, str)
    seq = store.messages.begin_turn(sid, first.content)
    store.messages.finish_turn(sid, seq, messages)


def text_turn(prompt: str, answer: str, **response: Any) -> list[ModelMessage]:
    return [ModelRequest(parts=[UserPromptPart(prompt)]), ModelResponse(parts=[TextPart(answer)], **response)]


def seeded(db: Path, title: str = "a talk") -> str:
    with Store.open(db) as store:
        sid = store.sessions.create(model="test", cwd="/proj", title=title).id
        save_turn(store, sid, text_turn("where is the pelican?", "In the config."))
    return sid


def exported(db: Path, sid: str) -> dict[str, Any]:
    with Store.open(db) as store:
        document: dict[str, Any] = json.loads(export_json(store, sid))
    return document


def one_line_error(result: Any, *needles: str) -> str:
    assert isinstance(result.exception, CoError), result.output
    message = str(result.exception)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message
    return message


# ----- an out-of-range value must not get in, and must not break a listing -----------------------------


BAD_FIELDS: list[tuple[str, Any, str]] = [
    ("session.updated_at", 1e20, "updated_at"),
    ("session.updated_at", math.inf, "updated_at"),
    ("session.updated_at", math.nan, "updated_at"),
    ("session.created_at", -5, "created_at"),
    ("session.input_tokens", 2**70, "input_tokens"),
    ("session.output_tokens", -1, "output_tokens"),
    ("session.cost_usd", math.inf, "cost_usd"),
    ("session.parent_id", "../../etc", "parent_id"),
    ("session.fork_seq", 99, "fork_seq"),
    ("session.title", 7, "title"),
    ("messages.0.created_at", 1e300, "created_at"),
    ("messages.0.created_at", "yesterday", "created_at"),
    ("messages.0.kind", "wizard", "kind"),
    ("messages.1.message", {"kind": "response", "parts": "nope"}, "message"),
    ("compactions.0.upto_seq", 50, "upto_seq"),
    ("compactions.0.from_seq", 1, "from_seq"),
    ("compactions.0.tokens_before", 2**64, "tokens_before"),
    ("compactions.0.created_at", math.inf, "created_at"),
]


def _set(document: dict[str, Any], path: str, value: Any) -> None:
    *head, last = path.split(".")
    target: Any = document
    for key in head:
        target = target[int(key)] if isinstance(target, list) else target[key]
    target[int(last) if isinstance(target, list) else last] = value


@pytest.mark.parametrize(("path", "value", "needle"), BAD_FIELDS, ids=[f"{p}={v!r}" for p, v, _ in BAD_FIELDS])
def test_import_refuses_out_of_range_fields_with_one_line(
    db: Path, tmp_path: Path, path: str, value: Any, needle: str
) -> None:
    sid = seeded(db)
    with Store.open(db) as store:
        store.compactions.add(
            sid, CompactionRecord(0, 0, "sum", None, "manual", 5, 1, "m", [ModelRequest(parts=[UserPromptPart("s")])])
        )
    document = exported(db, sid)
    _set(document, path, value)
    target = tmp_path / "bad.json"
    target.write_text(json.dumps(document))  # Infinity and NaN as Python's json writes them
    result = runner.invoke(app, ["import", str(target)])
    one_line_error(result, needle)
    with Store.open(db) as store:
        assert store.sessions.count() == 1


def test_import_refuses_an_empty_transcript(db: Path, tmp_path: Path) -> None:
    document = exported(db, seeded(db))
    document["messages"] = []
    target = tmp_path / "empty.json"
    target.write_text(json.dumps(document))
    one_line_error(runner.invoke(app, ["import", str(target)]), "no messages")


@pytest.mark.parametrize("value", [1e20, -1e20, math.inf, -math.inf, math.nan, "soon", None, 2**80])
def test_format_time_never_fails(value: Any) -> None:
    assert format_time(value) == "?"


def test_odd_times_already_in_a_database_still_list_show_search_and_export(db: Path) -> None:
    sid = seeded(db)
    other = seeded(db, title="another talk")
    conn = sqlite3.connect(db)
    conn.execute("UPDATE sessions SET updated_at = 1e20, created_at = -1e20 WHERE id = ?", (sid,))
    conn.execute("UPDATE sessions SET updated_at = 'when?' WHERE id = ?", (other,))
    conn.execute("UPDATE messages SET created_at = 9e18 WHERE session_id = ?", (sid,))
    conn.commit()
    conn.close()
    for args in (["list"], ["list", "--json"], ["show", sid], ["search", "pelican"], ["export", sid]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (args, result.output, result.exception)
    assert "?" in runner.invoke(app, ["list"]).output
    with Store.open(db) as store:
        assert "(time" in export_markdown(store, sid)
        assert sessions_table(store.sessions.list())  # the REPL's /sessions renders the same table


# ----- the terminal gets no control sequences; files and pipes get the exact text ----------------------

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
CSI = "\x1b[2J\x1b[31m"
C1_CSI = "\x9b2J"


def hostile_session(db: Path) -> str:
    with Store.open(db) as store:
        sid = store.sessions.create(model=f"evil{OSC52}model", cwd=f"/tmp/{CSI}cwd", title="t").id
        save_turn(
            store,
            sid,
            [
                ModelRequest(parts=[UserPromptPart(f"read it {OSC52}")]),
                ModelResponse(parts=[ToolCallPart(f"read{CSI}_file", {"path": f"a{C1_CSI}.txt"}, "c1")]),
                ModelRequest(parts=[ToolReturnPart(f"read{CSI}_file", f"secret {OSC52} {C1_CSI}", "c1")]),
                ModelResponse(parts=[TextPart(f"done {CSI}{C1_CSI}")]),
            ],
        )
    conn = sqlite3.connect(db)  # a title as an older co or another program may have stored it
    conn.execute("UPDATE sessions SET title = ? WHERE id = ?", (f"title {OSC52}{C1_CSI}", sid))
    conn.commit()
    conn.close()
    return sid


def _controls(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]


@pytest.mark.parametrize("fmt", ["md", "json"])
def test_export_to_a_file_or_pipe_is_exact(db: Path, tmp_path: Path, fmt: str) -> None:
    sid = hostile_session(db)
    piped = runner.invoke(app, ["export", sid, "-f", fmt])
    assert piped.exit_code == 0, piped.output
    out = tmp_path / f"out.{fmt}"
    assert runner.invoke(app, ["export", sid, "-f", fmt, "-o", str(out)]).exit_code == 0
    assert out.read_text() == piped.output
    if fmt == "md":
        assert OSC52 in piped.output and C1_CSI in piped.output
    else:
        document = json.loads(piped.output)
        assert document["session"]["model"] == f"evil{OSC52}model"
        assert document["session"]["title"] == f"title {OSC52}{C1_CSI}"


@pytest.mark.parametrize(
    "args", [["export", "{sid}"], ["export", "{sid}", "-f", "json"], ["show", "{sid}"], ["list"], ["list", "--json"]]
)
def test_terminal_output_has_no_control_characters(db: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    sid = hostile_session(db)
    monkeypatch.setattr(sessions_cli, "_to_terminal", lambda: True)
    monkeypatch.setenv("TERM", "dumb")
    result = runner.invoke(app, [a.format(sid=sid) for a in args], color=False)
    assert result.exit_code == 0, result.output
    assert _controls(result.output) == [], repr(result.output)
    assert "evil" in result.output or "pelican" in result.output or "title" in result.output or "done" in result.output
    if args == ["list", "--json"] or args[-1] == "json":
        json.loads(result.output)  # still valid JSON, meaning the same


# ----- credentials in the provider URL never reach the database or an export ---------------------------

SECRET = "s3cr3t-canary-91f2"


@pytest.mark.parametrize(
    ("url", "safe"),
    [
        (f"https://user:{SECRET}@api.example.com/v1", "https://api.example.com/v1"),
        (f"https://api.example.com/v1?api-key={SECRET}", "https://api.example.com/v1"),
        (f"https://api.example.com:8443/v1?key={SECRET}&x=1#frag", "https://api.example.com:8443/v1"),
        (f"http://{SECRET}@[::1]:8080/v1/", "http://[::1]:8080/v1/"),
        ("https://api.openai.com/v1", "https://api.openai.com/v1"),
    ],
)
def test_url_without_credentials(url: str, safe: str) -> None:
    assert url_without_credentials(url) == safe


def test_provider_url_credentials_are_not_saved_or_exported(db: Path) -> None:
    url = f"https://me:{SECRET}@llm.example.com/v1?api-key={SECRET}&key={SECRET}"
    with Store.open(db) as store:
        sid = store.sessions.create(model="test", cwd="/", title="keys").id
        turn = text_turn("hi", "hello", provider_url=url, provider_name="openai")
        save_turn(store, sid, turn)
        replacement: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart("sum")]),
            ModelResponse([TextPart("ok")], provider_url=url),
        ]
        store.compactions.add(sid, CompactionRecord(0, 1, "s", None, "manual", 1, 1, "m", replacement))
        loaded = store.messages.messages(sid)
        assert isinstance(loaded[1], ModelResponse) and loaded[1].provider_url == "https://llm.example.com/v1"
        assert isinstance(turn[1], ModelResponse) and turn[1].provider_url == url  # the caller's are unchanged
        as_json = export_json(store, sid)
        as_markdown = export_markdown(store, sid)
    store.close()
    files = [p for p in db.parent.iterdir() if p.name.startswith("co-cli.db") and p.is_file()]
    assert files and all(SECRET.encode() not in p.read_bytes() for p in files)
    assert SECRET not in as_json and SECRET not in as_markdown


def test_export_strips_credentials_saved_by_an_older_co(db: Path) -> None:
    sid = seeded(db)
    conn = sqlite3.connect(db)
    data = conn.execute("SELECT json FROM messages WHERE session_id = ? AND seq = 1", (sid,)).fetchone()[0]
    message = json.loads(data)
    message[0]["provider_url"] = f"https://u:{SECRET}@host/v1"
    conn.execute("UPDATE messages SET json = ? WHERE session_id = ? AND seq = 1", (json.dumps(message), sid))
    conn.commit()
    conn.close()
    with Store.open(db) as store:
        assert SECRET not in export_json(store, sid)


# ----- damage: undecodable text, and recovering what can be read --------------------------------------


def test_undecodable_bytes_are_read_with_replacement_and_never_echoed(db: Path) -> None:
    sid = seeded(db)
    conn = sqlite3.connect(db)
    conn.execute(
        "UPDATE messages SET text = CAST(x'7069656c6963616e20fffe20707269766174652d726f77' AS TEXT) "
        "WHERE session_id = ? AND seq = 0",
        (sid,),
    )
    raw = conn.execute("SELECT json FROM messages WHERE session_id = ? AND seq = 1", (sid,)).fetchone()[0]
    broken = raw.replace("In the config.", "In the conf\x00").encode().replace(b"\x00", b"\xff")
    conn.execute("UPDATE messages SET json = CAST(? AS TEXT) WHERE session_id = ? AND seq = 1", (broken, sid))
    conn.commit()
    conn.close()
    with Store.open(db) as store:
        transcript = store.messages.transcript(sid)
        assert "\ufffd" in transcript[0].text and "private-row" in transcript[0].text
        answer = transcript[1].message
        assert isinstance(answer, ModelResponse) and answer.parts[0].content == "In the conf\ufffd"  # type: ignore[union-attr]
        assert [h.seq for h in store.search.messages("private")] == [0]
    for args in (["show", sid], ["export", sid], ["search", "private"]):
        assert runner.invoke(app, args).exit_code == 0, args


def _damaged_database(db: Path) -> tuple[list[str], int]:
    """Three sessions of 40 turns, then one page of the messages table overwritten; returns ids and page size."""
    ids = []
    with Store.open(db) as store:
        for s in range(3):
            sid = store.sessions.create(model="m", cwd="/", title=f"talk {s}").id
            ids.append(sid)
            for t in range(40):
                save_turn(store, sid, text_turn(f"prompt {s}-{t} " + "x" * 300, f"MARK{s}-{t} " + "y" * 300))
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    at = data.find(b"MARK1-20 ")
    assert at > 0
    start = at // page * page
    data[start : start + 8] = b"\xff" * 8
    db.write_bytes(bytes(data))
    return ids, page


def test_damaged_database_advice_names_recover(db: Path) -> None:
    ids, _ = _damaged_database(db)
    with Store.open(db) as store, pytest.raises(StoreError) as excinfo:
        store.messages.transcript(ids[1])
    assert "co sessions recover" in str(excinfo.value) and "MARK" not in str(excinfo.value)


def test_recover_salvages_session_by_session_and_keeps_the_old_file(db: Path) -> None:
    ids, _ = _damaged_database(db)
    damaged = db.read_bytes()
    result = runner.invoke(app, ["recover"])
    assert result.exit_code == 0, (result.output, result.exception)
    assert "saved 3 sessions" in result.output and "could not read" in result.output
    kept = [p for p in db.parent.iterdir() if ".damaged-" in p.name and p.suffix == ".db"]
    assert len(kept) == 1 and kept[0].read_bytes() == damaged
    with Store.open(db) as store:
        assert store.db.integrity_ok()
        counts = {info.id: info.message_count for info in store.sessions.list()}
        assert counts[ids[0]] == counts[ids[2]] == 80
        assert 70 <= counts[ids[1]] < 80  # only the rows of the damaged page are lost
        seqs = [m.seq for m in store.messages.transcript(ids[1])]
        assert seqs == list(range(counts[ids[1]]))  # renumbered: the next turn has a free seq
        save_turn(store, ids[1], text_turn("after recovery", "fine"))
        assert store.search.messages("recovery")[0].session_id == ids[1]
    lost = 80 - counts[ids[1]]
    assert f"could not read {lost} messages" in result.output


def test_recover_rebuilds_sessions_whose_metadata_is_lost(db: Path, tmp_path: Path) -> None:
    ids = [seeded(db, title=f"talk {n}") for n in range(3)]
    with Store.open(db) as store:
        store.compactions.add(ids[0], CompactionRecord(0, 1, "s", None, "manual", 5, 1, "m", []))
    conn = sqlite3.connect(db)
    root = conn.execute("SELECT rootpage FROM sqlite_schema WHERE name = 'sessions'").fetchone()[0]
    conn.close()
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[(root - 1) * page : (root - 1) * page + 8] = b"\xff" * 8  # the sessions table is unreadable
    db.write_bytes(bytes(data))
    target = tmp_path / "rebuilt.db"
    result = runner.invoke(app, ["recover", "-o", str(target)])
    assert result.exit_code == 0, result.output
    assert "3 sessions lost their title" in result.output
    with Store.open(target) as store:
        rebuilt = {info.id: info for info in store.sessions.list()}
        assert sorted(rebuilt) == sorted(ids)
        assert all(info.title == "where is the pelican?" and info.message_count == 2 for info in rebuilt.values())
        assert rebuilt[ids[0]].compaction_count == 1


def test_recover_into_another_file_leaves_the_database_alone(db: Path, tmp_path: Path) -> None:
    sid = seeded(db)
    with Store.open(db) as store:
        store.compactions.add(
            sid, CompactionRecord(0, 1, "sum", None, "manual", 5, 1, "m", [ModelRequest(parts=[UserPromptPart("s")])])
        )
    before = db.read_bytes()
    target = tmp_path / "copy.db"
    result = runner.invoke(app, ["recover", "--output", str(target)])
    assert result.exit_code == 0, result.output
    assert "nothing was lost" in result.output and db.read_bytes() == before
    with Store.open(target) as store:
        assert store.sessions.get(sid).message_count == 2 and len(store.compactions.list(sid)) == 1
    again = runner.invoke(app, ["recover", "--output", str(target)])
    one_line_error(again, "already exists")


def test_recover_refuses_while_a_session_is_open(db: Path) -> None:
    sid = seeded(db)
    with Store.open(db) as holder:
        holder.locks.acquire(sid)
        code = (
            "import sys; sys.path.insert(0, sys.argv[1])\n"
            "from typer.testing import CliRunner\nfrom co_cli.terminal.sessions_cli import app\n"
            "r = CliRunner().invoke(app, ['recover'])\nprint(type(r.exception).__name__, r.exception)\n"
        )
        import subprocess
        import sys

        done = subprocess.run(
            [sys.executable, "-c", code, str(Path(__file__).resolve().parents[1])],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ},
        )
    assert "open in a running co" in done.stdout, done.stdout + done.stderr


def test_recover_of_garbage_is_one_line(db: Path) -> None:
    db.parent.mkdir(parents=True)
    db.write_bytes(b"not a database at all " * 200)
    one_line_error(runner.invoke(app, ["recover"]), "not an SQLite database")


@pytest.mark.parametrize("output", [False, True], ids=["in place", "--output"])
def test_recover_refuses_a_database_from_a_newer_co(db: Path, tmp_path: Path, output: bool) -> None:
    """Not damaged, only newer: recovering would downgrade it and drop what this co does not know."""
    from co_cli.store.schema import SCHEMA_VERSION

    sid = seeded(db)
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    before = db.read_bytes()
    target = tmp_path / "recovered.db"
    one_line_error(runner.invoke(app, ["recover", *(["-o", str(target)] if output else [])]), "written by a newer co")
    assert db.read_bytes() == before and not target.exists()
    assert sorted(p.name for p in db.parent.iterdir() if "recovered" in p.name or "damaged" in p.name) == []
    assert sid


def test_a_failed_recover_leaves_no_partial_database(db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that fails halfway (a full disk) leaves no half-written database behind; neither does a killed
    run once the next recover starts."""
    from co_cli.store import recover as recovery

    seeded(db)
    left_by_a_killed_run = db.parent / f"co-cli.recovered-20250101-000000.db{recovery.PARTIAL}"
    left_by_a_killed_run.write_bytes(b"half")

    def disk_full(*args: object) -> None:
        raise StoreError("cannot write session database: the disk is full")

    monkeypatch.setattr(recovery, "_write_memories", disk_full)
    result = runner.invoke(app, ["recover"])
    one_line_error(result, "the disk is full")
    assert sorted(p.name for p in db.parent.iterdir() if p.is_file()) == ["co-cli.db"]
    target = tmp_path / "out.db"
    one_line_error(runner.invoke(app, ["recover", "-o", str(target)]), "the disk is full")
    assert not target.exists() and not list(tmp_path.glob("out.db*"))


# ----- a database that cannot be written can still be read ---------------------------------------------


def _unwritable(monkeypatch: pytest.MonkeyPatch, db: Path) -> None:
    """Make ``db`` and its directory unwritable; as root (which ignores permission bits), report them so."""
    db.chmod(0o444)
    db.parent.chmod(0o555)
    if os.geteuid() == 0:
        real_access = os.access

        def access(path: Any, mode: int, **kwargs: Any) -> bool:
            if Path(path) in (db, db.parent) and mode & os.W_OK:
                return False
            return real_access(path, mode, **kwargs)

        monkeypatch.setattr(os, "access", access)


def test_read_only_database_can_be_listed_shown_searched_and_exported(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = seeded(db)
    _unwritable(monkeypatch, db)
    try:
        for args in (["list"], ["show", sid], ["search", "pelican"], ["export", sid, "-f", "json"]):
            result = runner.invoke(app, args)
            assert result.exit_code == 0, (args, result.output, result.exception)
            assert sid in result.output or "pelican" in result.output
        rename = runner.invoke(app, ["rename", sid, "new title"])
        one_line_error(rename, "read-only")
        with Store.open(db, reads_only=True) as store:
            with pytest.raises(StoreError, match="read-only"):
                store.sessions.rename(sid, "x")
            assert store.sessions.get(sid).title == "a talk"
    finally:
        db.parent.chmod(0o700)
        db.chmod(0o600)


def test_read_only_database_memories_can_be_listed_searched_logged_and_exported(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from co_cli.terminal.memory_cli import app as memory_app

    seeded(db)
    with Store.open(db) as store:
        store.memories.add("The kestrel build uses bazel", actor="user")
        store.memories.add("Always run make check", actor="user", kind="instruction")
    _unwritable(monkeypatch, db)
    try:
        for args, needle in (
            (["list"], "m1 [user, fact] The kestrel build uses bazel"),
            (["list", "--all", "--json"], '"text": "Always run make check"'),
            (["search", "kestrel"], "The kestrel build uses bazel"),
            (["log"], "add"),
            (["export"], "- m2 [user, instruction] Always run make check"),
        ):
            result = runner.invoke(memory_app, args)
            assert result.exit_code == 0, (args, result.output, result.exception)
            assert needle in result.output, (args, result.output)
        one_line_error(runner.invoke(memory_app, ["add", "The user likes tea"]), "read-only")
    finally:
        db.parent.chmod(0o700)
        db.chmod(0o600)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["prompt", "answer", "summary"])
def test_show_bounds_a_huge_message_and_full_prints_it_whole(db: Path, where: str) -> None:
    """A pasted megabytes-long prompt (or answer, or summary) is cut with a note; --full prints it all."""
    huge = "".join(f"line {n} of a very long paste\n" for n in range(40_000))  # about 1.3 MB
    last = "line 39999 of a very long paste"
    with Store.open(db) as store:
        sid = store.sessions.create(model="m", cwd="/", title="huge").id
        prompt, answer = (huge, "short") if where == "prompt" else ("short", huge if where == "answer" else "ok")
        save_turn(store, sid, text_turn(prompt, answer))
        if where == "summary":
            store.compactions.add(
                sid,
                CompactionRecord(
                    from_seq=0, upto_seq=1, summary=huge, focus=None, trigger="manual", tokens_before=1,
                    tokens_after=1, model="m", replacement=[], created_at=time.time(),
                ),
            )  # fmt: skip
    result = runner.invoke(app, ["show", sid])
    assert result.exit_code == 0, (result.output, result.exception)
    assert len(result.output) < 200_000
    assert "more characters; co sessions show --full or co sessions export has them all" in " ".join(
        result.output.replace("`", "").split()
    )
    assert last not in result.output
    if where == "prompt":  # (rendering megabytes of Markdown whole takes a while: asked for, tested once)
        whole = runner.invoke(app, ["show", sid, "--full"])
        assert whole.exit_code == 0 and last in whole.output


def _damage_table(db: Path, table: str) -> None:
    """Overwrite the start of the first leaf pages of ``table`` (as a bad sector would)."""
    conn = sqlite3.connect(db)
    pages = [r[0] for r in conn.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf'", (table,))]
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    assert pages, table
    data = bytearray(db.read_bytes())
    for page in pages[:3]:
        data[(page - 1) * page_size : (page - 1) * page_size + 8] = b"\xff" * 8
    db.write_bytes(bytes(data))


def test_a_damaged_usage_table_leaves_sessions_listed_and_shown(db: Path) -> None:
    from co_cli.store.usage import TurnUsage
    from co_cli.store.usage import insert as insert_usage
    from co_cli.terminal.usage_cli import app as usage_app

    with Store.open(db) as store:
        ids = [store.sessions.create(model="m", cwd="/", title=f"talk {n}").id for n in range(3)]
        for sid in ids:
            for turn in range(30):
                save_turn(store, sid, text_turn(f"prompt {turn}", "answer"))
                with store.db.transaction() as tx:
                    insert_usage(tx, sid, TurnUsage("chat", "model-" + "x" * 200, 1, 10, 10, 0, 0, 0.01), 1.0)
    _damage_table(db, "turn_usage")
    listed = runner.invoke(app, ["list"])
    assert listed.exit_code == 0, (listed.output, listed.exception)
    assert all(sid in listed.output for sid in ids) and "warning: usage not shown" in listed.output
    shown = runner.invoke(app, ["show", ids[0]])
    assert shown.exit_code == 0 and "prompt 29" in shown.output and "warning: usage not shown" in shown.output
    one_line_error(runner.invoke(usage_app, []), "co sessions recover")


@pytest.mark.parametrize("lost", ["every row", "the matching rows"])
def test_a_damaged_memories_table_is_an_error_not_an_empty_search(db: Path, lost: str) -> None:
    """Rows lost from the memories table (the search index still has them): memory search says the database
    is damaged and names recover, instead of answering that nothing matches."""
    from co_cli.terminal.memory_cli import app as memory_app

    with Store.open(db) as store:
        for n in range(20):
            store.memories.add(f"The kestrel fact number {n}", actor="user")
        store.memories.add("The user drinks tea", actor="user")
    assert "kestrel fact number 7" in runner.invoke(memory_app, ["search", "kestrel"]).output
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER memories_fts_delete")  # as a damaged page loses rows without telling the index
    conn.execute("DELETE FROM memories" + ("" if lost == "every row" else " WHERE text LIKE '%kestrel%'"))
    conn.commit()
    conn.close()
    one_line_error(runner.invoke(memory_app, ["search", "kestrel"]), "is damaged", "co sessions recover")
    if lost != "every row":
        assert "The user drinks tea" in runner.invoke(memory_app, ["search", "tea"]).output


# ----- imports that could not be resumed, and files that are not files ----------------------------------


def test_import_closes_an_unanswered_tool_call_and_a_replacement_ending_in_one(db: Path, tmp_path: Path) -> None:
    sid = seeded(db)
    document = exported(db, sid)
    dangling = ModelResponse(parts=[ToolCallPart("list_dir", {"path": "."}, "open-call")])
    as_json = ModelMessagesTypeAdapter.dump_python([dangling], mode="json")[0]
    document["messages"].append(
        {"seq": 2, "created_at": time.time(), "kind": "tool-call", "status": "ok", "message": as_json}
    )
    replacement: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("summary")]), dangling]
    document["compactions"] = [
        {
            "created_at": time.time(),
            "from_seq": 0,
            "upto_seq": 1,
            "summary": "s",
            "focus": None,
            "trigger": "manual",
            "tokens_before": 10,
            "tokens_after": 2,
            "model": "m",
            "replacement": ModelMessagesTypeAdapter.dump_python(replacement, mode="json"),
        }
    ]
    target = tmp_path / "dangling.json"
    target.write_text(json.dumps(document))
    with Store.open(db) as store:
        info = import_json(store, target.read_text(), repair_orphans)
        messages = store.messages.messages(info.id)
        compaction = store.compactions.latest(info.id)
    assert info.message_count == 4 and tool_pairs_valid(messages)
    closing = messages[-1]
    assert isinstance(closing, ModelRequest) and isinstance(closing.parts[0], ToolReturnPart)
    assert closing.parts[0].tool_call_id == "open-call" and closing.parts[0].outcome == "interrupted"
    assert compaction is not None and tool_pairs_valid(compaction.replacement)
    assert isinstance(compaction.replacement[-1], ModelRequest)


def test_import_refuses_devices_fifos_and_directories_without_hanging(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    outcome: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: outcome.update(result=runner.invoke(app, ["import", str(fifo)])))
    worker.start()
    worker.join(timeout=10)
    if worker.is_alive():  # unblock the reader so the test run can end, then fail
        with open(fifo, "w"):
            pass
        worker.join()
        pytest.fail("importing a FIFO hung")
    one_line_error(outcome["result"], "not a regular file")
    one_line_error(runner.invoke(app, ["import", "/dev/zero"]), "not a regular file")
    one_line_error(runner.invoke(app, ["import", str(tmp_path)]), "not a regular file")
    monkeypatch.setattr(sessions_cli, "IMPORT_MAX_BYTES", 1000)
    big = tmp_path / "big.json"
    big.write_text(json.dumps(exported(db, seeded(db))) + " " * 2000)
    one_line_error(runner.invoke(app, ["import", str(big)]), "larger than")


# ----- a session whose first save failed is not listed --------------------------------------------------


def test_a_session_whose_first_prompt_was_not_saved_is_not_listed(db: Path) -> None:
    kept = seeded(db)
    with Store.open(db) as store:
        with store.db.transaction() as tx:
            tx.execute(
                "CREATE TEMP TRIGGER fail_inserts BEFORE INSERT ON messages "
                "BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END"
            )
        empty = store.sessions.create(model="test", cwd="/", title="never saved")
        store.locks.acquire(empty.id)
        with pytest.raises(StoreError):
            store.messages.begin_turn(empty.id, "never saved")
        assert [s.id for s in store.sessions.list()] == [kept] and store.sessions.count() == 1
        latest = store.sessions.latest()
        assert latest is not None and latest.id == kept  # `co chat -c` does not pick the empty one
        store.locks.release(empty.id)
    listed = runner.invoke(app, ["list"])
    assert "never saved" not in listed.output and kept in listed.output


def test_recover_keeps_the_trash_undone_compactions_pins_and_usage(db: Path, tmp_path: Path) -> None:
    from co_cli.store import turn_memories
    from co_cli.store.turn_memories import SentMemory
    from co_cli.store.usage import TurnUsage

    ids = [seeded(db, title=f"talk {n}") for n in range(2)]
    with Store.open(db) as store:
        store.compactions.add(ids[0], CompactionRecord(0, 1, "s", None, "manual", 5, 1, "m", [], method="digest"))
        store.compactions.undo(ids[0])
        store.pins.add(ids[0], "Never push to main.", "user")
        store.usage.record(ids[0], TurnUsage(role="chat", model="m", requests=1, input_tokens=10, output_tokens=2))
        with store.db.transaction() as tx:
            turn_memories.insert(tx, ids[0], 0, [SentMemory(4, "fact", "The user's kayak is orange")])
        store.trash.put(ids[1])
    target = tmp_path / "recovered.db"
    result = runner.invoke(app, ["recover", "-o", str(target)])
    assert result.exit_code == 0, result.output
    with Store.open(target) as store:
        assert [info.id for info in store.sessions.list()] == [ids[0]]  # the trashed one stays in the trash
        assert [info.id for info, _ in store.trash.list()] == [ids[1]]
        (record,) = store.compactions.list(ids[0])
        assert record.method == "digest" and record.undone_at is not None
        assert store.compactions.latest(ids[0]) is None  # the undo still holds
        assert [pin.text for pin in store.pins.active(ids[0])] == ["Never push to main."]
    with Store.open(target) as store:
        assert store.usage.by_role(ids[0])["chat"].input_tokens == 10
        assert store.turn_memories.by_prompt(ids[0]) == {0: [SentMemory(4, "fact", "The user's kayak is orange")]}
