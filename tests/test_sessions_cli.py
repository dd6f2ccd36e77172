"""``co sessions``: the typer app on its own, against a store in a temporary data dir."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from typer.testing import CliRunner

from co_cli.errors import CoError, SessionNotFound
from co_cli.store import Store
from co_cli.terminal.sessions_cli import app

runner = CliRunner()


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = tmp_path / "data"
    monkeypatch.setenv("CO_CLI_DATA_DIR", str(data))
    monkeypatch.setenv("CO_CLI_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    return data


def _populate(data_dir: Path) -> tuple[str, str]:
    with Store.open(data_dir / "co-cli.db") as store:
        first = store.sessions.create(model="test", cwd="/proj", title="Configure the pelican").id
        seq = store.messages.begin_turn(first, "where is the pelican config?")
        store.messages.finish_turn(
            first,
            seq,
            [
                ModelRequest(parts=[UserPromptPart("where is the pelican config?")]),
                ModelResponse(parts=[ToolCallPart("read_file", {"path": "pelican.toml"}, "c1")]),
                ModelRequest(parts=[ToolReturnPart("read_file", "wings = 2", "c1")]),
                ModelResponse(parts=[TextPart("It is in **pelican.toml**.")]),
            ],
        )
        second = store.sessions.create(model="test", cwd="/proj", title="Second talk").id
        seq = store.messages.begin_turn(second, "hello")
        store.messages.finish_turn(second, seq, [ModelResponse(parts=[TextPart("hi")])])
    return first, second


def test_list_empty(data_dir: Path) -> None:
    result = runner.invoke(app, ["list"])
    assert result.exit_code == 0, result.output
    assert "No saved sessions" in result.output


def test_list_table_and_json(data_dir: Path) -> None:
    first, second = _populate(data_dir)
    result = runner.invoke(app, ["list"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert first in result.output and "Configure the pelican" in result.output
    assert result.output.index(second) < result.output.index(first)  # most recently updated first
    as_json = json.loads(runner.invoke(app, ["list", "--json"]).output)
    assert [s["id"] for s in as_json] == [second, first]
    assert as_json[1]["message_count"] == 4
    limited = runner.invoke(app, ["list", "--limit", "1"])
    assert second in limited.output and first not in limited.output and "1 of 2" in limited.output


def test_show_renders_transcript(data_dir: Path) -> None:
    first, _ = _populate(data_dir)
    result = runner.invoke(app, ["show", first[:14]])
    assert result.exit_code == 0, result.output
    for expected in ("Configure the pelican", "where is the pelican config?", "read_file", "wings = 2", "pelican.toml"):
        assert expected in result.output
    missing = runner.invoke(app, ["show", "ffffffff"])
    assert isinstance(missing.exception, SessionNotFound)


def test_search(data_dir: Path) -> None:
    first, _ = _populate(data_dir)
    result = runner.invoke(app, ["search", "pelican"])
    assert result.exit_code == 0, result.output
    assert first in result.output and "pelican" in result.output
    for query in ['"', "NEAR(", "AND OR", "*"]:
        nasty = runner.invoke(app, ["search", query])
        assert nasty.exit_code == 0, (query, nasty.output)
    assert "No messages match" in runner.invoke(app, ["search", "albatross"]).output


def test_export_import_round_trip(data_dir: Path, tmp_path: Path) -> None:
    first, _ = _populate(data_dir)
    markdown = runner.invoke(app, ["export", first])
    assert markdown.exit_code == 0 and markdown.output.startswith("# Configure the pelican")
    out = tmp_path / "export.json"
    result = runner.invoke(app, ["export", first, "--format", "json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert json.loads(out.read_text())["session"]["id"] == first
    imported = runner.invoke(app, ["import", str(out)])
    assert imported.exit_code == 0, imported.output
    assert "1 unchanged" in imported.output  # the same session, already here
    with Store.open(data_dir / "co-cli.db") as store:
        assert store.sessions.count() == 2
        store.sessions.delete(first)
    imported = runner.invoke(app, ["import", str(out)])
    assert f"imported {first} (Configure the pelican, 4 messages)" in imported.output


def test_import_of_invalid_file_is_a_co_error(data_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{ nope")
    result = runner.invoke(app, ["import", str(bad)])
    assert isinstance(result.exception, CoError) and "invalid JSON" in str(result.exception)
    missing = runner.invoke(app, ["import", str(tmp_path / "missing.json")])
    assert isinstance(missing.exception, CoError) and "cannot read" in str(missing.exception)


def test_rename(data_dir: Path) -> None:
    first, _ = _populate(data_dir)
    result = runner.invoke(app, ["rename", first[:14], "Pelican\nsetup"])
    assert result.exit_code == 0, result.output
    with Store.open(data_dir / "co-cli.db") as store:
        assert store.sessions.get(first).title == "Pelican setup"


def test_delete_asks_and_moves_to_the_trash_keeping_everything(data_dir: Path) -> None:
    first, second = _populate(data_dir)
    outputs = data_dir / "tool-outputs" / first
    outputs.mkdir(parents=True)
    (outputs / "c1.txt").write_text("offloaded")
    declined = runner.invoke(app, ["delete", first], input="n\n")
    assert declined.exit_code == 1 and "not deleted" in declined.output
    accepted = runner.invoke(app, ["delete", first], input="y\n")
    assert accepted.exit_code == 0, accepted.output
    assert "trash" in accepted.output and "restore" in accepted.output
    assert (outputs / "c1.txt").read_text() == "offloaded"  # kept until purged
    with Store.open(data_dir / "co-cli.db") as store:
        assert [s.id for s in store.sessions.list()] == [second]
        assert store.search.messages("pelican") == []
        assert store.sessions.latest() is not None and store.sessions.latest().id == second  # type: ignore[union-attr]
        assert [info.id for info, _ in store.trash.list()] == [first]
        assert len(store.messages.transcript(first)) == 4
    listed = runner.invoke(app, ["trash"], env={"COLUMNS": "160"})
    assert listed.exit_code == 0 and first in listed.output and "Configure the pelican" in listed.output
    again = runner.invoke(app, ["delete", first, "--yes"])
    assert isinstance(again.exception, SessionNotFound) and "in the trash" in again.exception.message


def test_restore_brings_a_session_back_unchanged(data_dir: Path) -> None:
    first, second = _populate(data_dir)
    with Store.open(data_dir / "co-cli.db") as store:
        before = (store.sessions.get(first), [(m.seq, m.text, m.status) for m in store.messages.transcript(first)])
    assert runner.invoke(app, ["delete", first, "--yes"]).exit_code == 0
    not_trashed = runner.invoke(app, ["restore", second])
    assert isinstance(not_trashed.exception, SessionNotFound) and "not in the trash" in not_trashed.exception.message
    restored = runner.invoke(app, ["restore", first[:14]])
    assert restored.exit_code == 0, restored.output
    with Store.open(data_dir / "co-cli.db") as store:
        assert (
            store.sessions.get(first),
            [(m.seq, m.text, m.status) for m in store.messages.transcript(first)],
        ) == before
        assert {h.session_id for h in store.search.messages("pelican")} == {first}
        assert store.trash.list() == []


def test_purge_needs_yes_and_removes_rows_and_tool_outputs(data_dir: Path) -> None:
    first, second = _populate(data_dir)
    outputs = data_dir / "tool-outputs" / first
    outputs.mkdir(parents=True)
    (outputs / "c1.txt").write_text("offloaded")
    live = runner.invoke(app, ["purge", second, "--yes"])
    assert isinstance(live.exception, SessionNotFound)  # only what is in the trash can be purged
    assert runner.invoke(app, ["delete", first, "--yes"]).exit_code == 0
    unconfirmed = runner.invoke(app, ["purge", first])
    assert isinstance(unconfirmed.exception, CoError) and "--yes" in unconfirmed.exception.message
    assert outputs.exists()
    purged = runner.invoke(app, ["purge", first, "--yes"])
    assert purged.exit_code == 0, purged.output
    assert not outputs.exists()
    with Store.open(data_dir / "co-cli.db") as store:
        assert store.trash.list() == [] and [s.id for s in store.sessions.list()] == [second]
        with pytest.raises(SessionNotFound):
            store.sessions.get(first, trashed=True)
    assert runner.invoke(app, ["delete", second, "--yes"]).exit_code == 0
    everything = runner.invoke(app, ["purge", "--all", "--yes"])
    assert everything.exit_code == 0 and everything.output.endswith("purged 1 session\n")  # not "1 session(s)"
    both = runner.invoke(app, ["purge", first, "--all", "--yes"])
    assert isinstance(both.exception, CoError) and both.exception.exit_code == 2


def test_list_search_rename_delete_do_not_import_pydantic_ai(data_dir: Path) -> None:
    first, _ = _populate(data_dir)
    script = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from co_cli.terminal.sessions_cli import app\n"
        "runner = CliRunner()\n"
        f"for args in (['list'], ['search', 'pelican'], ['rename', '{first}', 'x'], ['delete', '{first}', '-y']):\n"
        "    result = runner.invoke(app, args)\n"
        "    assert result.exit_code == 0, (args, result.output)\n"
        "print('pydantic_ai' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_piped_listings_print_whole_lines_without_padding(data_dir: Path) -> None:
    """Piped, `co sessions list/show/search` wrapped titles at 80 columns and padded every line with spaces."""
    title = "A long title about the pelican configuration that goes well past eighty columns of text, yes"
    answer = "The pelican answer is one long line of prose that a pipe must get whole, " * 3
    with Store.open(data_dir / "co-cli.db") as store:
        sid = store.sessions.create(model="test", cwd="/proj", title=title).id
        seq = store.messages.begin_turn(sid, "tell me about the pelican")
        store.messages.finish_turn(sid, seq, [ModelResponse(parts=[TextPart(answer.strip())])])
    for args in (["list"], ["show", sid], ["search", "pelican"]):
        result = runner.invoke(app, args, env={"COLUMNS": "80"})
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        assert [line for line in lines if line != line.rstrip()] == [], args
        if args[0] != "search":
            assert any(title in line for line in lines), (args, lines)
    shown = runner.invoke(app, ["show", sid], env={"COLUMNS": "80"}).output
    assert any(answer.strip() in line for line in shown.splitlines())
