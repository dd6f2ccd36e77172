"""End to end: the session picker as a 70-column terminal shows it (pyte): rows and key hints cut with an
ellipsis, the current session marked, forks told apart."""

from __future__ import annotations

from pathlib import Path

import pexpect
import pytest

from co_cli.store import Store
from tests.support.co_process import expect_prompt, send_line, spawn_co
from tests.support.saved_sessions import db_path, seed_session, turn
from tests.support.screen import screen_lines

pytestmark = pytest.mark.e2e

LONG_TITLE = "a very long title about planning the vegetable garden for the coming spring and summer"


def shown_screen(child: pexpect.spawn) -> list[str]:
    child.expect("Esc leave|Esc…|…", timeout=20)
    child.expect(pexpect.TIMEOUT, timeout=0.5)  # let the first full draw finish
    return screen_lines(child)[-20:]


@pytest.mark.timeout(60)
def test_the_picker_at_70_columns_cuts_with_an_ellipsis_marks_the_current_session_and_tells_forks_apart(
    co_server_env: dict[str, str], workdir: Path
) -> None:
    db = db_path(co_server_env)
    garden = seed_session(db, turn("plan the garden", "Plant beans."))
    with Store.open(db) as store:
        store.sessions.rename(garden, LONG_TITLE)
        first_fork = store.fork(garden, 0).id
        second_fork = store.fork(garden).id
        fork_of_fork = store.fork(first_fork).id
        short = store.sessions.short_ids([garden, first_fork, second_fork, fork_of_fork])
    child = spawn_co(["chat", "--resume", second_fork], env=co_server_env, cwd=workdir, dimensions=(20, 70))
    try:
        expect_prompt(child)
        send_line(child, "/resume")
        screen = shown_screen(child)
        rows = {sid: next((line for line in screen if short[sid] in line.split(" ⑂")[0]), "") for sid in short}
        assert all(rows.values()), screen
        assert all(len(line) <= 70 for line in screen), screen
        assert all(line.endswith("…") for line in rows.values()), rows  # each too long: cut visibly
        footer = screen[-1]
        assert footer.endswith("Esc leave"), screen  # the short key hints at this width
        assert "(this session)" in rows[second_fork]
        assert f"⑂ {short[garden]} #0 " in rows[first_fork] and f"⑂ {short[garden]} #1 " in rows[second_fork]
        assert f"⑂ {short[first_fork]} #0 " in rows[fork_of_fork] and "⑂" not in rows[garden]
        assert sum("(this session)" in line for line in screen) == 1
        assert "(fork) (fork)" not in "\n".join(screen)
        child.send("\x1b")
        expect_prompt(child)
    finally:
        child.terminate(force=True)
    with Store.open(db) as store:
        assert store.sessions.get(fork_of_fork).title.endswith("(fork)")
        assert not store.sessions.get(fork_of_fork).title.endswith("(fork) (fork)")
