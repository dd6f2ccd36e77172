"""Merge-import across machines: skip what is here, append what grew, fork what diverged; twice changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from typer.testing import CliRunner

from co_cli.context.repair import repair_orphans
from co_cli.errors import CoError
from co_cli.store import CompactionRecord, Store
from co_cli.store.export import export_json, export_json_line
from co_cli.store.lockfiles import SessionLocks
from co_cli.store.merge import merge_import


@pytest.fixture
def machines(tmp_path: Path) -> Iterator[tuple[Store, Store]]:
    with Store.open(tmp_path / "a" / "co-cli.db") as a, Store.open(tmp_path / "b" / "co-cli.db") as b:
        yield a, b


def talk(store: Store, session_id: str, prompt: str) -> None:
    seq = store.messages.begin_turn(session_id, prompt)
    store.messages.finish_turn(
        session_id,
        seq,
        [ModelRequest(parts=[UserPromptPart(prompt)]), ModelResponse(parts=[TextPart(f"answer to {prompt}")])],
    )


def everything(store: Store) -> str:
    return "".join(export_json_line(store, s.id) + "\n" for s in store.sessions.list(limit=1000))


def texts(store: Store, session_id: str) -> list[str]:
    return [m.text for m in store.messages.transcript(session_id)]


def snapshot(store: Store) -> list[tuple[object, ...]]:
    rows = store.db.read("SELECT id, parent_id, fork_seq, message_count, compaction_count FROM sessions ORDER BY id")
    messages = store.db.read("SELECT session_id, seq, text, status FROM messages ORDER BY session_id, seq")
    return [tuple(row) for row in (*rows, *messages)]


def test_new_sessions_are_imported_and_a_second_import_changes_nothing(
    machines: tuple[Store, Store],
) -> None:
    a, b = machines
    first = a.sessions.create(model="m", cwd="/", title="first").id
    talk(a, first, "hello")
    summary: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("summary")])]
    a.compactions.add(first, CompactionRecord(0, 1, "sum", None, "manual", 9, 3, "m", summary))
    second = a.sessions.create(model="m", cwd="/", title="second").id
    talk(a, second, "hi")
    exported = everything(a)
    report = merge_import(b, exported, repair_orphans)
    assert sorted(i.id for i in report.imported) == sorted([first, second])
    assert texts(b, first) == texts(a, first) and len(b.compactions.list(first)) == 1
    before = snapshot(b)
    again = merge_import(b, exported, repair_orphans)
    assert sorted(again.skipped) == sorted([first, second]) and not again.imported and not again.appended
    assert snapshot(b) == before


def test_a_session_that_grew_elsewhere_gets_the_new_messages_appended(
    machines: tuple[Store, Store],
) -> None:
    a, b = machines
    sid = a.sessions.create(model="m", cwd="/", title="grows").id
    talk(a, sid, "one")
    merge_import(b, everything(a), repair_orphans)
    talk(a, sid, "two")
    summary: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("summary")])]
    a.compactions.add(sid, CompactionRecord(0, 1, "sum", None, "auto", 9, 3, "m", summary))
    exported = everything(a)
    report = merge_import(b, exported, repair_orphans)
    [(info, added)] = report.appended
    assert info.id == sid and added == 2
    assert texts(b, sid) == texts(a, sid) == ["one", "answer to one", "two", "answer to two"]
    assert len(b.compactions.list(sid)) == 1 and b.sessions.get(sid).message_count == 4
    assert {h.session_id for h in b.search.messages("two")} == {sid}
    before = snapshot(b)
    assert merge_import(b, exported, repair_orphans).skipped == [sid]
    assert snapshot(b) == before
    # The other way round: b has everything a has; a's older copy is no news to b.
    assert merge_import(a, everything(b), repair_orphans).skipped == [sid]


def test_a_diverged_session_is_imported_as_a_fork_of_the_common_point(
    machines: tuple[Store, Store],
) -> None:
    a, b = machines
    sid = a.sessions.create(model="m", cwd="/", title="shared").id
    talk(a, sid, "common")
    merge_import(b, everything(a), repair_orphans)
    talk(a, sid, "on machine a")
    talk(b, sid, "on machine b")
    exported = everything(a)
    report = merge_import(b, exported, repair_orphans)
    [(fork, local)] = report.forked
    assert local == sid and fork.parent_id == sid and fork.fork_seq == 1
    assert texts(b, sid)[2:] == ["on machine b", "answer to on machine b"]  # b's own session is untouched
    assert texts(b, fork.id) == texts(a, sid)
    before = snapshot(b)
    assert merge_import(b, exported, repair_orphans).skipped == [fork.id]  # twice: nothing new
    assert snapshot(b) == before
    # a keeps going; the next import appends to the fork made last time.
    talk(a, sid, "later on a")
    [(grown, added)] = merge_import(b, everything(a), repair_orphans).appended
    assert grown.id == fork.id and added == 2


def test_a_session_open_in_another_co_is_left_for_later(machines: tuple[Store, Store]) -> None:
    a, b = machines
    sid = a.sessions.create(model="m", cwd="/", title="busy").id
    talk(a, sid, "one")
    merge_import(b, everything(a), repair_orphans)
    talk(a, sid, "two")
    holder = SessionLocks(b.path.parent / f"{b.path.name}.locks")
    assert holder.acquire(sid)
    try:
        report = merge_import(b, everything(a), repair_orphans)
        assert report.busy == [sid] and b.sessions.get(sid).message_count == 2
    finally:
        holder.release(sid)
    assert merge_import(b, everything(a), repair_orphans).appended[0][1] == 2


def test_single_document_exports_merge_too_and_bad_lines_are_named(
    machines: tuple[Store, Store],
) -> None:
    a, b = machines
    sid = a.sessions.create(model="m", cwd="/", title="single").id
    talk(a, sid, "one")
    assert [i.id for i in merge_import(b, export_json(a, sid), repair_orphans).imported] == [sid]
    assert merge_import(b, export_json(a, sid), repair_orphans).skipped == [sid]
    with pytest.raises(CoError, match="line 2: not a co session export"):
        merge_import(b, export_json_line(a, sid) + "\n{}\n", repair_orphans)
    with pytest.raises(CoError, match="empty"):
        merge_import(b, "\n", repair_orphans)


def test_cli_export_all_and_import_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from co_cli.terminal.sessions_cli import app

    runner = CliRunner()
    monkeypatch.setenv("CO_CLI_DATA_DIR", str(tmp_path / "one"))
    with Store.open(tmp_path / "one" / "co-cli.db") as one:
        sid = one.sessions.create(model="m", cwd="/", title="travelling").id
        talk(one, sid, "pack the bags")
        trashed = one.sessions.create(model="m", cwd="/", title="gone").id
        talk(one, trashed, "never mind")
        one.trash.put(trashed)
    out = tmp_path / "all.jsonl"
    exported = runner.invoke(app, ["export", "--all", "-o", str(out)])
    assert exported.exit_code == 0, exported.output
    assert len(out.read_text().splitlines()) == 1 and (out.stat().st_mode & 0o777) == 0o600
    monkeypatch.setenv("CO_CLI_DATA_DIR", str(tmp_path / "two"))
    first = runner.invoke(app, ["import", str(out)])
    assert first.exit_code == 0, first.output
    assert f"imported {sid} (travelling, 2 messages)" in first.output and "1 new" in first.output
    second = runner.invoke(app, ["import", str(out)])
    assert "0 new, 0 grown (0 messages appended), 0 diverged (imported as forks), 1 unchanged" in second.output
    both = runner.invoke(app, ["export", sid, "--all"])
    assert isinstance(both.exception, CoError)
