"""Which memories go into a request: ranking, budget, duplicates, scope; and the instructions files."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from co_cli.config import OwnFiles
from co_cli.memory import inject
from co_cli.memory.inject import INTRO, PLAIN_INTRO, relevant_memories, render_memory_section
from co_cli.memory.instructions_files import load_instructions_files, project_root
from co_cli.memory.retrieval import Scored, near_duplicate, query_terms, rank, score, select
from co_cli.store.memories import Memories

DAY = 86400.0
PROJECT = "/repo/one"


def _age(store: Memories, memory_id: int, days: float) -> None:
    with store.db.transaction() as tx:
        tx.execute("UPDATE memories SET updated_at = ? WHERE id = ?", (time.time() - days * DAY, memory_id))


def test_relevance_beats_recency_beats_nothing(store: Memories) -> None:
    relevant_old = store.add("The kestrel service deploys to fly.io with kestrel deploy", actor="user")
    weak_new = store.add("The kestrel logo is blue", actor="user")
    weak_old = store.add("The kestrel mascot is a bird", actor="user")
    unrelated = store.add("The user's dog is called Rex", actor="user")
    _age(store, relevant_old.id, 200)
    _age(store, weak_old.id, 200)
    chosen = relevant_memories(store, "how do I deploy kestrel?", "", 800, time.time())
    ids = [c.id for c in chosen]
    assert ids[0] == relevant_old.id  # the best match wins although old
    assert ids.index(weak_new.id) < ids.index(weak_old.id)  # equally weak: the recent one first
    assert ids[-1] == unrelated.id  # no match: sent after every match, as room allows
    tight = relevant_memories(store, "how do I deploy kestrel?", "", 36, time.time())
    assert unrelated.id not in [c.id for c in tight]  # no room: the matches go first


def test_a_question_sharing_no_word_with_its_memory_still_gets_it(store: Memories) -> None:
    """A memory kept in one language, asked about in another (or in other words): no word matches, and the
    newest memories fill the room the matches leave."""
    home = store.add("Wohne seit Mai in Graz", actor="extractor")
    store.add("Our deploys go through the staging cluster first", actor="extractor")
    chosen = relevant_memories(store, "¿Qué tiempo hace donde vivo?", PROJECT, 800, time.time())
    assert home.id in [c.id for c in chosen]


def test_score_formula() -> None:
    assert score(1.0, 0.0) == pytest.approx(1.0)
    assert score(0.0, 30.0) == pytest.approx(0.2 * 0.36787944, rel=1e-6)
    assert score(1.0, 1000.0) > score(0.5, 0.0)


def test_budget_is_respected_and_instructions_go_first(store: Memories) -> None:
    for i in range(40):
        store.add(f"Fact number {i} about the kestrel project and its many details", actor="user")
    rule = store.add("Always answer in British English", actor="user", kind="instruction")
    chosen = relevant_memories(store, "tell me about kestrel", "", 120, time.time())
    assert chosen[0].id == rule.id  # an instruction goes in whatever the prompt
    text = render_memory_section(chosen)
    lines = [line for line in text.splitlines() if line.startswith("- [m")]
    assert sum(len(line) // 4 + 3 for line in lines) <= 120
    assert 1 < len(chosen) < 41
    assert relevant_memories(store, "kestrel", "", 0, time.time()) == []


def test_the_memory_section_labels_each_line_and_the_plain_form_gives_only_the_texts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chosen = [
        Scored(3, "Always answer in metric units", "instruction", 1.0),
        Scored(7, "Bob uses emacs", "fact", 0.5, about="other", person="Bob"),
    ]
    section = render_memory_section(chosen)
    assert (
        section
        == f"## Memory\n{INTRO}\n- [m3] (instruction) Always answer in metric units\n- [m7] (about Bob) Bob uses emacs"
    )
    plain = f"{PLAIN_INTRO}\n- Always answer in metric units\n- Bob uses emacs"
    assert render_memory_section(chosen, "plain") == plain
    monkeypatch.setattr(inject, "FORM", "plain")  # the form the instructions use
    assert render_memory_section(chosen) == plain
    assert render_memory_section([], "plain") == ""


def test_near_duplicates_skipped() -> None:
    assert near_duplicate("The user prefers tabs over spaces", "the user prefers TABS over spaces.")
    assert not near_duplicate("The user prefers tabs", "The user prefers spaces to tabs in Go code")
    items = [
        Scored(1, "The user prefers tabs over spaces", "fact", 1.0),
        Scored(2, "User prefers tabs over spaces", "fact", 0.9),
    ]
    assert [s.id for s in select([], items, 800)] == [1]


def test_project_memories_only_in_their_project(store: Memories) -> None:
    store.add("kestrel deploys with make ship", actor="user", scope="project", project=PROJECT)
    store.add("kestrel deploys with ansible", actor="user", scope="project", project="/repo/two")
    here = relevant_memories(store, "kestrel deploys", PROJECT, 800, time.time())
    assert [c.text for c in here] == ["kestrel deploys with make ship"]
    elsewhere = relevant_memories(store, "kestrel deploys", "/somewhere/else", 800, time.time())
    assert elsewhere == []


def test_deleted_and_proposed_are_never_sent(store: Memories) -> None:
    m = store.add("kestrel uses postgres", actor="user")
    store.review.propose("kestrel uses mysql", proposal="add")
    store.forget(m.ref, actor="user")
    assert relevant_memories(store, "kestrel database", "", 800, time.time()) == []


def test_query_terms_drop_stopwords_and_fts_syntax_is_literal(store: Memories) -> None:
    assert query_terms("What is the kestrel deploy command?") == ["kestrel", "deploy", "command"]
    store.add('kestrel "quoted" NEAR(x) text', actor="user")
    assert relevant_memories(store, 'NEAR( "quoted" OR * kestrel', "", 800, time.time())


def test_rank_is_pure_and_ordered() -> None:
    now = 1_000_000.0
    ranked = rank([(1, "a", "fact", -1.0, now), (2, "b", "fact", -4.0, now - 300 * DAY)], now)
    assert [r.id for r in ranked] == [2, 1]


# --- instructions files ---------------------------------------------------------------------------


def test_agents_md_from_repo_root_down_to_cwd_nearest_last(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    sub = repo / "pkg" / "mod"
    sub.mkdir(parents=True)
    (repo / ".git").mkdir()
    (tmp_path / "AGENTS.md").write_text("outside the repo: never read")
    (repo / "AGENTS.md").write_text("root rule")
    (repo / "pkg" / "CO.md").write_text("pkg rule")
    (sub / "AGENTS.md").write_text("nearest rule")
    config = tmp_path / "config"
    config.mkdir()
    (config / "AGENTS.md").write_text("user rule")
    found = load_instructions_files(sub, config, 8000, OwnFiles(()))
    assert project_root(sub) == repo.resolve()
    section = found.section
    assert "outside the repo" not in section
    order = [section.index(t) for t in ("user rule", "root rule", "pkg rule", "nearest rule")]
    assert order == sorted(order)
    assert section.startswith("## Project instructions")


def test_instructions_files_capped_farthest_cut_first(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    sub = tmp_path / "sub"
    sub.mkdir()
    (tmp_path / "AGENTS.md").write_text("far line\n" * 400)  # ~900 tokens
    (sub / "AGENTS.md").write_text("near rule stays whole")
    found = load_instructions_files(sub, tmp_path / "noconfig", 200, OwnFiles(()))
    assert "near rule stays whole" in found.section
    far = next(f for f in found.files if f.path.parent == tmp_path)
    assert far.cut and far.shown_tokens <= 200
    assert "[cut:" in found.section and "instructions_files_max_tokens" in found.section
    assert found.tokens < 400
    assert load_instructions_files(sub, tmp_path / "noconfig", 0, OwnFiles(())).section == ""


# ----- recall beyond keywords: the topic's own words -----


def test_a_question_about_a_topic_finds_a_memory_that_names_only_the_thing(store: Memories) -> None:
    fish = store.add("The user writes abbr definitions in config.fish", actor="user")
    store.add("The user's editor is Helix", actor="user")
    store.add("The user deploys on Fridays", actor="user")
    chosen = relevant_memories(store, "which shell do I use at work?", "", 800, time.time())
    assert [c.id for c in chosen][0] == fish.id  # found by its topic, first; the others only fill the room


def test_a_question_naming_the_thing_finds_the_topic(store: Memories) -> None:
    shell = store.add("The user's shell is zsh with oh-my-zsh", actor="user")
    chosen = relevant_memories(store, "how do I set an alias in fish?", "", 800, time.time())
    assert [c.id for c in chosen] == [shell.id]


def test_direct_matches_rank_before_expanded_ones(store: Memories) -> None:
    bash = store.add("The user's CI scripts are bash", actor="user")
    direct = store.add("The user's login shell is nushell", actor="user")
    _age(store, direct.id, 300)  # even an old direct match goes first
    chosen = relevant_memories(store, "what is my shell?", "", 800, time.time())
    assert [c.id for c in chosen] == [direct.id, bash.id]
    assert chosen[0].score > chosen[1].score
