"""The phrasing bench on the corpus's tuning half (no model), and the corpus's form. Of the held-out half only
each line's id and split are read."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from bench.bench_phrasing import (
    ABOUT,
    CORPUS,
    DECISIONS,
    RULE_QUESTIONS,
    SPAN,
    TABLE_HEADER,
    CorpusError,
    Labelled,
    fallback,
    load_corpus,
    main,
    parse_args,
    score,
    split_of,
    step_question,
    stretches,
    summariser,
    table,
)
from co_cli.context.pins import find_quote


@pytest.fixture(scope="module")
def tune() -> list[Labelled]:
    return load_corpus("tune")


def test_every_line_has_a_unique_id_and_the_split_its_id_gives() -> None:
    ids: list[str] = []
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        raw = json.loads(line)
        ids.append(raw["id"])
        assert raw["split"] == split_of(raw["id"]), raw["id"]
    assert len(ids) == len(set(ids)) >= 200
    assert {split_of(i) for i in ids} == {"tune", "held"}


def test_the_tuning_half_is_well_formed_and_holds_only_its_lines(tune: list[Labelled]) -> None:
    assert tune and all(row.split == "tune" for row in tune)
    assert len({row.lang for row in tune}) >= 5
    for row in tune:
        assert row.about in ABOUT and bool(row.person) == (row.about == "other")
        assert row.change is None or (isinstance(row.change, tuple) and any(row.change))
    for decision in DECISIONS:
        assert sum(decision.truth(row) for row in tune) >= 5, decision.name


def _line(corpus_id: str, **labels: object) -> str:
    raw: dict[str, object] = {
        "id": corpus_id, "lang": corpus_id.split("-")[0], "text": "a sentence written for this test",
        "rule": False, "change": None, "next_step": False, "about": "none", "person": "", "passing": False,
        "question_only": False, "secret": False, "split": split_of(corpus_id),
    }  # fmt: skip
    raw.update(labels)
    return json.dumps(raw)


@pytest.mark.parametrize(
    ("lines", "why"),
    [
        ([_line("xx-001"), _line("xx-001")], "repeated"),
        ([_line("xx-001", split="held" if split_of("xx-001") == "tune" else "tune")], "the rule gives"),
        ([_line("xx-001", about="boss")], "about"),
        ([_line("xx-001", about="other")], "person"),
        ([_line("xx-001", change={"old": "a"})], "change"),
        ([_line("xx-001", question_only=True, secret=True)], "only asks"),
        ([_line("xx-001", rule="yes")], "rule"),
    ],
)
def test_a_malformed_line_is_refused(tmp_path: Path, lines: list[str], why: str) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=why):
        load_corpus(split_of("xx-001"), path)


def test_the_fallback_table_has_one_line_per_reader_and_every_decision(tune: list[Labelled]) -> None:
    readers = fallback(argparse.Namespace(), [row.text for row in tune])
    scores = score(tune, readers)
    assert {s.decision for s in scores} == {d.name for d in DECISIONS}
    assert [s.decision for s in scores if not s.measured] == ["about=other"]
    truth = {d.name: d.truth for d in DECISIONS}
    for s in scores:
        assert s.n == len(tune) and s.positives == sum(truth[s.decision](row) for row in tune)
        for value in (s.accuracy, s.precision, s.recall):
            assert value is None or 0.0 <= value <= 1.0
        if s.measured:
            assert s.accuracy is not None and s.tp + len(s.false_negatives) == s.positives
    lines = table(scores)
    assert len(lines) == 1 + len(readers)
    assert lines[0].split("  ")[0] == TABLE_HEADER[0] and lines[0].endswith(TABLE_HEADER[-1])
    assert any(line.startswith("about=other") and "no fallback" in line for line in lines)


def test_the_command_reads_the_held_half_unless_told(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_args([]).split == "held"
    assert main(["--split", "tune", "--misses"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("method fallback, split tune: ")
    listed = [line.split()[1] for line in out.splitlines() if line.startswith(("  missed ", "  wrongly "))]
    assert listed and all(split_of(corpus_id) == "tune" for corpus_id in listed)


def test_the_summariser_method_counts_only_verified_quotes_in_their_message(
    tune: list[Labelled], tmp_path: Path
) -> None:
    texts = [row.text for row in tune[: SPAN * 2]]
    first, second = stretches(texts)
    answers = {
        "\n".join(first): {
            "summary": "- the user wrote four messages",
            "standing_instructions": [first[0], "a rule the user never wrote"],
            "changes": [{"quote": first[1], "old": "", "new": ""}],
            "next_step": first[2],
            "people": [],
        },
        "\n".join(second): None,  # no typed answer: nothing read from these
    }
    rule = find_quote(first[0], first)
    assert rule is not None
    kept = tmp_path / "summaries.json"
    for read_as_rule in (True, False):  # the answer to the rule question asked of it alone, kept with the others
        kept.write_text(json.dumps({**answers, RULE_QUESTIONS: {rule: read_as_rule}}))
        readers = summariser(argparse.Namespace(model="unused", answers=str(kept)), texts)
        assert [r.decision for r in readers] == ["rule", "rule", "change", "next_step"]
        said = [[t for t in texts if reader.read and reader.read(t)] for reader in readers]
        assert said == [[first[0]], [first[0]] if read_as_rule else [], [first[1]], [first[2]]]
        assert "(1 of 2 stretches unread)" in readers[0].name and "asked alone" in readers[1].name


def test_the_step_method_reads_the_next_step_from_the_questions_answers(tune: list[Labelled], tmp_path: Path) -> None:
    texts = [row.text for row in tune[:4]]
    kept = tmp_path / "steps.json"
    kept.write_text(json.dumps({texts[0]: "later", texts[1]: "now", texts[2]: "fact", texts[3]: None}))
    [reader] = step_question(argparse.Namespace(model="unused", answers=str(kept)), texts)
    assert reader.decision == "next_step" and reader.read is not None
    assert [reader.read(text) for text in texts] == [True, False, False, False]
