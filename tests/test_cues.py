"""The word cues (``co_cli/cues.py``): English phrasings only, and only ever read by code that suggests."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from co_cli.cues import is_question, is_standing, names_next_step, states_change

PACKAGE = Path(__file__).resolve().parent.parent / "co_cli"


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("Never run the seed script against prod-db-07.", True),
        ("From now on, answer in Canadian English.", True),
        ("Hard rule: no force pushes to release.", True),
        ("please always name the file you edited.", True),
        ("I prefer pathlib over os.path.", True),
        ("Stop adding docstrings to private helpers.", True),
        ("Don't push yet.", False),  # for now only
        ("Don't worry about the flaky test.", False),  # a figure of speech
        ("Should we always retry?", False),  # a question
        ("Nie wieder direkt auf main pushen.", False),  # German: the cues know English only
        ("Nunca borres la tabla de pedidos.", False),
        ("常に敬語で答えてください。", False),
    ],
)
def test_standing_rule_cue(sentence: str, expected: bool) -> None:
    assert is_standing(sentence) is expected


def test_change_next_step_and_question_cues() -> None:
    assert states_change("Correction: the cache moved to redis-4.")
    assert states_change("We no longer ship on Fridays.")
    assert not states_change("Did the cache move to redis-4?")
    assert names_next_step("The next step is the migration.")
    assert not names_next_step("What is the next step?")
    assert is_question("Wie geht das?") and is_question("どうしますか？")
    assert not is_question("Antworte kurz.")


def test_compaction_reads_the_cues_only_where_it_suggests() -> None:
    """In compaction, only the module that lists suggestions imports the cues (nothing that pins, quotes into a
    summary or chooses what to keep); memory extraction's use is its own."""
    readers = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.module == "co_cli.cues" or (node.module == "co_cli" and "cues" in {a.name for a in node.names}):
                readers.add(path.relative_to(PACKAGE).as_posix())
    assert {reader for reader in readers if not reader.startswith("memory/")} == {"context/user_quotes.py"}
