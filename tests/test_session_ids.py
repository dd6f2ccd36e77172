"""Session ids as co shows them: every prefix co prints names exactly one session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from co_cli.store import Store
from co_cli.store import sessions as sessions_module
from co_cli.store.sessions import is_session_id, new_session_id


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "sessions.db") as opened:
        yield opened


def test_sessions_started_in_the_same_minute_and_forks_differ_in_their_first_eight_characters(store: Store) -> None:
    """Ids began with the time: sessions of the same minute, and every fork, showed the same 8 characters and
    `/resume <the id in the toolbar>` said it was ambiguous."""
    made = [store.sessions.create(model="test", cwd="/work", title=f"s{i}").id for i in range(4)]
    forked = store.sessions.create(model="test", cwd="/work", title="s0", parent_id=made[0], fork_seq=0).id
    ids = [*made, forked]
    assert len({session_id[:8] for session_id in ids}) == len(ids)
    shown = store.sessions.short_ids(ids)
    for session_id in ids:
        assert len(shown[session_id]) == 8
        assert store.sessions.get(shown[session_id]).id == session_id


def test_a_shown_id_grows_until_it_names_one_session(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    fixed = iter(["abcdef0123" + tail for tail in ("0000000001", "0000000002", "ffff000003")])
    monkeypatch.setattr(sessions_module, "new_session_id", lambda now=None: next(fixed))
    ids = [store.sessions.create(model="test", cwd="/work", title=f"s{i}").id for i in range(3)]
    store.trash.put(ids[2])  # a session in the trash still takes its prefix: restore takes one too
    shown = store.sessions.short_ids(ids)
    assert shown == {ids[0]: ids[0][:20], ids[1]: ids[1][:20], ids[2]: ids[2][:11]}
    assert store.sessions.get(shown[ids[1]]).id == ids[1]
    assert store.sessions.get(shown[ids[2]], trashed=True).id == ids[2]


def test_ids_keep_their_form_and_older_ids_still_count() -> None:
    made = new_session_id(now=1_700_000_000.0)
    assert is_session_id(made) and made.endswith(f"{1_700_000_000_000:012x}")
    assert is_session_id(f"{1_700_000_000_000:012x}0123abcd")  # the form ids had before
