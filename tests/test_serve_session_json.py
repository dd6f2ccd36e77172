"""What the browser view reads: saved sessions turned into JSON (in process), and the page shipped in the
package."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from co_cli.errors import SessionNotFound
from co_cli.serve import browser, session_json
from co_cli.store import CompactionRecord, Store, turn_memories
from co_cli.store.turn_memories import SentMemory
from co_cli.store.usage import TurnUsage

ROOT = Path(__file__).resolve().parent.parent


def _turn(store: Store, session_id: str, prompt: str, answer: str, usage: TurnUsage | None = None) -> None:
    seq = store.messages.begin_turn(session_id, prompt)
    store.messages.finish_turn(
        session_id,
        seq,
        [ModelRequest(parts=[UserPromptPart(prompt)]), ModelResponse(parts=[TextPart(answer)])],
        usage=usage,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "co-cli.db") as opened:
        yield opened


def test_each_usage_row_follows_the_answer_it_was_saved_with_and_compactions_follow(store: Store) -> None:
    sid = store.sessions.create(model="m", cwd="/w", title="two turns").id
    _turn(store, sid, "first", "one", TurnUsage(model="m", requests=1, input_tokens=10, output_tokens=2))
    _turn(store, sid, "second", "two", TurnUsage(model="m", requests=2, input_tokens=30, output_tokens=4))
    summary = [ModelRequest(parts=[UserPromptPart("summary")])]
    store.compactions.add(sid, CompactionRecord(0, 1, "the first turn", None, "manual", 50, 5, "m", summary))
    store.usage.record(sid, TurnUsage(role="summary", model="m", requests=1, input_tokens=50, output_tokens=5))

    items = session_json.session_record(store, sid[:10])["items"]

    shape = [(i["type"], i.get("seq", i.get("input_tokens", i.get("upto_seq")))) for i in items]
    assert shape == [
        ("message", 0),
        ("message", 1),
        ("usage", 10),
        ("compaction", 1),
        ("message", 2),
        ("message", 3),
        ("usage", 30),
        ("usage", 50),  # the summariser's row, saved after the last message
    ]
    assert items[1]["parts"] == [
        {
            "kind": "text",
            "text": "one",
            "cut": False,
            "chars": 3,
            "tool_name": None,
            "outcome": None,
            "markdown": [{"t": "p", "c": ["one"]}],
        }
    ]
    assert items[3]["description"].startswith("Compaction (summary, manual): messages #0–#1 replaced")


def test_the_memories_a_turn_was_sent_follow_its_prompt(store: Store) -> None:
    sid = store.sessions.create(model="m", cwd="/w", title="kayak").id
    _turn(store, sid, "what colour is my kayak?", "orange", TurnUsage(model="m", requests=1, input_tokens=10))
    _turn(store, sid, "thanks", "you're welcome")
    with store.db.transaction() as tx:
        turn_memories.insert(tx, sid, 0, [SentMemory(3, "fact", "The user's kayak is orange")])

    items = session_json.session_record(store, sid)["items"]

    assert [(i["type"], i.get("seq")) for i in items] == [
        ("message", 0),
        ("memories", 0),
        ("message", 1),
        ("usage", None),
        ("message", 2),
        ("message", 3),
    ]
    assert items[1]["memories"] == [{"id": 3, "kind": "fact", "text": "The user's kayak is orange"}]


def test_a_long_part_is_cut_and_says_how_long_it_was(store: Store) -> None:
    sid = store.sessions.create(model="m", cwd="/w", title="long").id
    long = "x" * (session_json.PART_SHOWN_CHARS + 5)
    _turn(store, sid, "show me", long)
    part = session_json.session_record(store, sid)["items"][1]["parts"][0]
    assert part["cut"] and part["chars"] == len(long) and len(part["text"]) == session_json.PART_SHOWN_CHARS


def test_listing_and_search_read_the_store(store: Store) -> None:
    first = store.sessions.create(model="m", cwd="/w", title="about herons").id
    _turn(store, first, "tell me about herons", "grey ones")
    empty = store.sessions.create(model="m", cwd="/w", title="never used").id
    listed = session_json.session_list(store)
    assert [s["id"] for s in listed["sessions"]] == [first] and listed["total"] == 1
    assert listed["sessions"][0]["short_id"] == first[:8] and empty != first
    found = session_json.search_hits(store, "herons")
    assert [(h["session_id"], h["seq"]) for h in found["hits"]] == [(first, 0)]
    assert found["open"] in found["hits"][0]["snippet"]
    with pytest.raises(SessionNotFound):
        session_json.session_record(store, "ffffffff")


def test_the_page_ships_as_package_data() -> None:
    """Every file of the page is matched by pyproject's package-data, so an installed (non-editable) co has it."""
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "co_cli.serve"
    ]
    static = ROOT / "co_cli" / "serve" / "static"
    shipped = {path.relative_to(static.parent).as_posix() for path in static.iterdir()}
    assert shipped == {"static/index.html", *(f"static/{name}" for name in browser.STATIC_FILES)}
    assert all(any(fnmatch(name, pattern) for pattern in patterns) for name in shipped)


def test_a_failed_turn_says_why(store: Store) -> None:
    from co_cli.synthetic import with_failure

    sid = store.sessions.create(model="m", cwd="/w", title="failing").id
    seq = store.messages.begin_turn(sid, "will it work?")
    saved = with_failure([], "will it work?", "the provider is overloaded (HTTP 529)")
    store.messages.finish_turn(sid, seq, saved, status="failed")
    _turn(store, sid, "and now?", "yes")
    items = session_json.session_record(store, sid)["items"]
    assert [(i["status"], i["error"]) for i in items] == [
        ("failed", "the provider is overloaded (HTTP 529)"),
        ("ok", None),
        ("ok", None),
    ]
    assert items[0]["parts"][0]["text"] == "will it work?"


def test_an_answer_s_markdown_is_sent_as_plain_elements_and_markup_stays_text(store: Store) -> None:
    sid = store.sessions.create(model="m", cwd="/w", title="markdown").id
    answer = (
        "# Plan\n\n1. **read** [docs](https://example.org) [x](javascript:alert(1)) [y](/api/sessions)\n"
        "2. <script>alert(1)</script>\n\n![pic](data:image/png;base64,AAAA) ![web](https://example.org/p.png)\n\n"
        "```sh\nls -l\n```"
    )
    _turn(store, sid, "**not** rendered", answer)
    user, reply = session_json.session_record(store, sid)["items"][:2]
    assert "markdown" not in user["parts"][0], "a prompt is shown as typed"
    assert reply["parts"][0]["markdown"] == [
        {"t": "h1", "c": ["Plan"]},
        {
            "t": "ol",
            "c": [
                {
                    "t": "li",
                    "c": [
                        {"t": "strong", "c": ["read"]},
                        " ",
                        {"t": "a", "a": {"href": "https://example.org"}, "c": ["docs"]},
                        " [x](javascript:alert(1)) ",
                        "y",
                    ],
                },
                {"t": "li", "c": ["<script>alert(1)</script>"]},
            ],
        },
        {"t": "p", "c": ["pic", " ", {"t": "a", "a": {"href": "https://example.org/p.png"}, "c": ["web"]}]},
        {"t": "pre", "c": [{"t": "code", "c": ["ls -l"]}]},
    ]
