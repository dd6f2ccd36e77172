"""The session picker: filtering by title and message text, the directory toggle, marks, and its keys."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from co_cli.store import Store
from co_cli.store.lockfiles import SessionLocks
from co_cli.terminal.picker import PickChoice, Picker
from co_cli.terminal.picker_model import PickerModel, match_query


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "data" / "co-cli.db") as opened:
        yield opened


def session(store: Store, title: str, prompt: str, answer: str, cwd: str = "/home/me/proj") -> str:
    sid = store.sessions.create(model="test", cwd=cwd, title=title).id
    seq = store.messages.begin_turn(sid, prompt)
    store.messages.finish_turn(
        sid, seq, [ModelRequest(parts=[UserPromptPart(prompt)]), ModelResponse(parts=[TextPart(answer)])]
    )
    return sid


def test_match_query_quotes_words_and_makes_the_last_a_prefix() -> None:
    assert match_query("pel") == '"pel"*'
    assert match_query('say "hi" AND') == '"say" "hi" "AND"*'
    assert match_query("pel pelican pel") == '"pelican" "pel"*'
    assert match_query("kestrel " * 500 + "kes") == '"kestrel" "kes"*'
    assert match_query("done ") == '"done"'
    assert match_query("   ") == ""


def test_filter_finds_titles_and_message_text_with_a_snippet(store: Store) -> None:
    pelican = session(store, "Birds", "where does the pelican nest?", "On the coast.")
    config = session(store, "pelican config", "hello", "hi")
    other = session(store, "Something else", "unrelated", "indeed", cwd="/elsewhere")
    store.trash.put(session(store, "pelican trashed", "pelican", "gone"))
    model = PickerModel(store, cwd="/home/me/proj")
    model.load()
    assert [m.row.id for m in model.filter("")] == [other, config, pelican]  # newest first, trash left out
    found = model.filter("pelic")
    assert [m.row.id for m in found] == [config, pelican]
    assert found[0].message_rowid is None  # the title matched
    snippet = model.snippet("pelic", found[1])
    assert "«pelican»" in snippet
    assert [m.row.id for m in model.filter("coast")] == [pelican]
    assert model.filter("no such words") == []
    model.this_directory_only = True
    assert [m.row.id for m in model.filter("")] == [config, pelican]
    for nasty in ('"', "AND", "NEAR(", "*", "col:x", "(("):
        model.filter(nasty)  # never an error


def test_sessions_open_in_another_co_are_marked(store: Store) -> None:
    sid = session(store, "busy", "hello", "hi")
    other = SessionLocks(store.path.parent / f"{store.path.name}.locks")
    assert other.acquire(sid)
    try:
        model = PickerModel(store, cwd="/")
        model.load()
        assert model.open_elsewhere == {sid}
    finally:
        other.release(sid)


def drive(store: Store, keys: str, current: str | None = None) -> PickChoice | None:
    """Run the picker on a pipe, typing ``keys``."""

    async def main() -> PickChoice | None:
        with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
            picker = Picker(store, "/home/me/proj", current)
            pipe.send_text(keys)
            return await asyncio.wait_for(picker.app.run_async(), timeout=10)

    return asyncio.run(main())


def test_keys_enter_resumes_the_filtered_session_ctrl_f_forks_escape_leaves(store: Store) -> None:
    pelican = session(store, "Birds", "where does the pelican nest?", "On the coast.")
    session(store, "Other", "hello", "hi")
    assert drive(store, "coast\r") == PickChoice("resume", pelican)
    assert drive(store, "coast\x06") == PickChoice("fork", pelican)
    assert drive(store, "\x1b") is None
    assert drive(store, "\x1b[B\r") == PickChoice("resume", pelican)  # Down, then Enter
    assert drive(store, "\t\r") == PickChoice("resume", pelican)  # Tab moves down too


def test_typing_always_filters_even_after_tab_and_moving(store: Store) -> None:
    pelican = session(store, "Birds", "where does the pelican nest?", "On the coast.")
    other = session(store, "Other", "hello", "hi")
    finder = session(store, "fd and friends", "which finder?", "fd.")
    assert drive(store, "\tpelican\r") == PickChoice("resume", pelican)
    assert drive(store, "\x1b[B\tfd\r") == PickChoice("resume", finder)  # f and d are letters of the filter
    assert drive(store, "coast\t\x7f\x7f\x7f\x7f\x7fhello\r") == PickChoice("resume", other)


def test_ctrl_d_asks_before_moving_to_the_trash(store: Store) -> None:
    pelican = session(store, "Birds", "where does the pelican nest?", "On the coast.")
    other = session(store, "Other", "hello", "hi")
    assert drive(store, "Birds\x04n\x1b") is None
    assert {s.id for s in store.sessions.list()} == {pelican, other}
    assert drive(store, "Birds\x04y\r\x1b") is None  # nothing left that matches: Enter does nothing
    assert [s.id for s in store.sessions.list()] == [other]
    assert store.trash.list()[0][0].id == pelican
    assert drive(store, "\x04y\x1b", current=other) is None  # the current session is not trashed from here
    assert [s.id for s in store.sessions.list()] == [other]


def test_make_snippet_marks_words_and_elides() -> None:
    from co_cli.terminal.picker_model import make_snippet

    text = " ".join(f"w{i}" for i in range(40)) + " the Pelican flies " + " ".join(f"v{i}" for i in range(40))
    snippet = make_snippet(text, ["pelic"], size=8)
    assert snippet.startswith("… ") and snippet.endswith(" …") and "«Pelican»" in snippet
    assert len(snippet.split()) <= 10
    assert make_snippet("short one", ["zzz"]) == "short one"


def test_common_words_show_the_newest_matches_first_then_every_match(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from co_cli.terminal import picker_model

    ids = [session(store, f"talk {i}", f"kestrel number {i}", "the kestrel hovers") for i in range(6)]
    monkeypatch.setattr(picker_model, "FAST_MATCHES", 4)  # 4 of the 12 matching messages: 2 sessions
    model = PickerModel(store, cwd="/")
    model.load()
    quick = model.filter("kestrel")
    assert not model.complete and [m.row.id for m in quick] == ids[::-1][:2]
    every = model.complete_filter("kestrel")
    assert [m.row.id for m in every] == ids[::-1]
    assert model.filter("number 3") and model.complete

    async def main() -> list[str]:
        with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
            picker = Picker(store, "/")
            running = asyncio.ensure_future(picker.app.run_async())
            pipe.send_text("kestrel")
            for _ in range(100):
                await asyncio.sleep(0.02)
                if len(picker.matches) == 6 and not picker.searching:
                    break
            shown = [m.row.id for m in picker.matches]
            pipe.send_text("\x1b")
            await asyncio.wait_for(running, 10)
            return shown

    assert asyncio.run(main()) == ids[::-1]
