"""Search work is bounded whatever the messages hold: a message with very many matches, many such messages, very
many matching messages; snippets cut from bounded pieces; a search ends when asked to."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from co_cli.errors import StoreError
from co_cli.store import Store
from co_cli.store import search as search_module
from co_cli.store import snippets as snippets_module
from co_cli.store.snippets import ELLIPSIS, SNIPPET_CLOSE, SNIPPET_OPEN, SNIPPET_SCAN_CHARS, pieces

T = TypeVar("T")

CPU_BUDGET_SECONDS = 1.5
"""A bounded search of the messages below takes well under 0.1 s of CPU; FTS5's snippet() over them took 20 s and
more (its time grows with the square of a message's matches). CPU time of this thread, so a busy machine does not
change it."""


def cpu_seconds(work: Callable[[], T]) -> tuple[float, T]:
    start = time.thread_time()
    result = work()
    return time.thread_time() - start, result


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "data" / "co-cli.db") as opened:
        yield opened


def add(store: Store, prompt: str, answer: str = "ok", title: str = "a session") -> str:
    sid = store.sessions.create(model="test", cwd="/work", title=title).id
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart(prompt)]),
        ModelResponse(parts=[TextPart(answer)], model_name="test"),
    ]
    seq = store.messages.begin_turn(sid, prompt)
    store.messages.finish_turn(sid, seq, messages)
    return sid


def marked(snippet: str) -> list[str]:
    return [part.split(SNIPPET_CLOSE)[0] for part in snippet.split(SNIPPET_OPEN)[1:]]


@pytest.mark.parametrize(
    ("text", "query", "shown"),
    [
        pytest.param("kestrel " * 60_000, "kestrel", "kestrel", id="one word 60,000 times"),
        pytest.param(
            "".join(f"line {i} Kestrels flew\n" for i in range(80_000)), "kestrel", "Kestrels", id="80,000 lines"
        ),
        pytest.param("pelican kestrel " * 40_000, "kestrel pelicans", "pelican", id="two words 40,000 times"),
        pytest.param(
            "é 🙂 kestrel-pelican; " * 30_000, "kestrel-pelican", "kestrel-pelican", id="a phrase 30,000 times"
        ),
    ],
)
def test_a_message_with_very_many_matches_is_searched_in_bounded_work(
    store: Store, text: str, query: str, shown: str
) -> None:
    sid = add(store, text)
    seconds, hits = cpu_seconds(lambda: store.search.messages(query))
    assert seconds < CPU_BUDGET_SECONDS
    assert [(hit.session_id, hit.seq) for hit in hits] == [(sid, 0)]
    assert shown in marked(hits[0].snippet) and hits[0].snippet.endswith(ELLIPSIS)
    assert len(hits[0].snippet) < 600


def test_many_messages_with_many_matches_each(store: Store) -> None:
    sessions = [add(store, f"session {n} " + "kestrel " * (3_000 + 100 * n)) for n in range(40)]
    seconds, hits = cpu_seconds(lambda: store.search.messages("kestrel", limit=50))
    assert seconds < CPU_BUDGET_SECONDS
    assert {hit.session_id for hit in hits} == set(sessions)
    assert all(marked(hit.snippet) for hit in hits)


def test_a_search_scores_only_the_newest_matching_messages(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_module, "MAX_RANKED_MATCHES", 5)
    oldest = add(store, "kestrel " * 50)  # the best match of all, but older than the five scored
    newer = [add(store, f"a kestrel, number {n}") for n in range(12)]
    for limit in (1, 5, 20):
        hits = store.search.messages("kestrel", limit=limit)
        assert len(hits) == min(limit, 5)
        assert {hit.session_id for hit in hits} <= set(newer[-5:]) and oldest not in {h.session_id for h in hits}
    assert [h.session_id for h in store.search.messages("kestrel", session_id=oldest)] == [oldest]


def test_a_match_deep_in_a_long_message_is_shown_with_what_surrounds_it(store: Store) -> None:
    filler = "the quick brown fox jumps over the lazy dog " * 1_000  # 44,000 characters
    add(store, filler + "a kestrel hovers here " + filler)
    snippet = store.search.messages("kestrel")[0].snippet
    assert marked(snippet) == ["kestrel"] and "hovers" in snippet
    assert snippet.startswith(ELLIPSIS) and snippet.endswith(ELLIPSIS)


def test_a_match_past_the_scanned_part_is_found_and_the_message_s_start_is_shown(store: Store) -> None:
    filler = "plain words " * (SNIPPET_SCAN_CHARS // 12 + 10)
    sid = add(store, "It begins here. " + filler + " kestrel")
    hits = store.search.messages("kestrel")
    assert [h.session_id for h in hits] == [sid]
    assert hits[0].snippet.startswith("It begins here.") and hits[0].snippet.endswith(ELLIPSIS)
    assert not marked(hits[0].snippet)


def test_a_search_spends_a_bounded_budget_on_snippets(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snippets_module, "SNIPPET_BUDGET_CHARS", 3 * SNIPPET_SCAN_CHARS)
    for n in range(8):
        add(store, f"message {n} kestrel " + "words " * SNIPPET_SCAN_CHARS)
    hits = store.search.messages("kestrel")
    assert len(hits) == 8
    assert sum(1 for hit in hits if marked(hit.snippet)) == 3
    assert all(hit.snippet.startswith("message") for hit in hits)


def test_a_search_ends_soon_after_it_is_asked_to(store: Store) -> None:
    for n in range(300):
        add(store, f"kestrel number {n} " + "kestrel " * 200)
    asked: list[int] = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) > 1

    with pytest.raises(StoreError):
        store.search.messages("kestrel", limit=300, stop=stop)
    assert len(asked) == 2
    with pytest.raises(StoreError):
        store.search.messages("kestrel", stop=lambda: True)
    assert len(store.search.messages("kestrel", limit=300, stop=lambda: False)) == 300


@given(st.text(alphabet=st.sampled_from("ab \n🙂é"), max_size=400), st.integers(min_value=4, max_value=50))
def test_pieces_cover_the_text_in_bounded_pieces(text: str, size: int) -> None:
    parts = pieces(text, size)
    assert "".join(parts) == text
    assert all(0 < len(part) <= size for part in parts)
    for part in parts[:-1]:  # cut after a space or line break whenever the second half of a piece has one
        window = part[size // 2 :] if len(part) == size else part
        assert part[-1] in " \n" or not any(c in " \n" for c in window)


def test_the_picker_cuts_its_snippets_from_a_bounded_part_of_a_message(store: Store) -> None:
    from co_cli.terminal.picker_model import make_snippet

    add(store, "a kestrel here " + "more words " * SNIPPET_SCAN_CHARS)
    found = store.search.newest_matches('"kestrel"', 10)
    texts = store.search.texts([rowid for _, rowid in found])
    assert [len(text) for text in texts.values()] == [SNIPPET_SCAN_CHARS]
    assert marked(make_snippet(next(iter(texts.values())), ["kestrel"])) == ["kestrel"]
