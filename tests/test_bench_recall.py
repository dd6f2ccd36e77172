"""The recall bench's conversations: each plants twelve facts of the same kinds and three of harder kinds, each
with its question, the assistant never names a fact, and a scripted run of each completes and is scored."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.bench_recall import row, run_co, scripted_model, states
from bench.recall_variants import VARIANTS, Variant
from tests.support.planted_facts import LEDGER, PlantedFact, planted_conversation, planted_script

KINDS = [fact.kind for fact in LEDGER.facts]
HARDER_KINDS = [fact.kind for fact in LEDGER.harder]


@pytest.mark.parametrize("name", ["en-other", "de"])
def test_each_new_conversation_plants_twelve_facts_of_the_same_kinds_each_with_its_question(name: str) -> None:
    script = VARIANTS[name].script
    assert [f.kind for f in script.facts] == KINDS and [f.kind for f in script.harder] == HARDER_KINDS
    facts = (*script.facts, *script.harder)
    assert all(f.question.strip() for f in facts)
    # a question does not give its answer away (the error code is what the ledger's question asks about too)
    assert [f.kind for f in facts if f.key in f.question] == ["error code and fix"]
    ledger_keys = {f.key for f in (*LEDGER.facts, *LEDGER.harder)}
    assert len({f.key for f in facts}) == 15 and not ledger_keys & {f.key for f in facts}, "other values"
    turns = planted_script(36, script)
    prompts = [turn.prompt for turn in turns]
    for fact in script.facts:
        assert sum(fact.statement in prompt for prompt in prompts) == 1, fact.key
    proposed, tool_only, changed = script.harder
    assert turns[7].answer == proposed.statement and tool_only.statement in turns[8].tool_calls[0].output
    first_said = next(i for i, p in enumerate(prompts) if changed.stale[0] in p)
    assert first_said < 9 < prompts.index(changed.statement), "the old value first, its correction later"
    # a fact survives only through what the user said or a tool showed: the assistant never names one
    for turn in turns:
        named = [f.key for f in facts if f.key in turn.answer]
        assert named == ([proposed.key] if turn.answer == proposed.statement else []), turn.answer


def test_the_ledger_conversation_is_the_default() -> None:
    assert VARIANTS["en"].script is LEDGER
    assert planted_conversation(20).turns == planted_conversation(20, LEDGER).turns


@pytest.mark.parametrize("name", list(VARIANTS))
def test_a_scripted_run_of_each_conversation_completes_and_is_scored(name: str, tmp_path: Path) -> None:
    variant: Variant = VARIANTS[name]
    outcome = asyncio.run(run_co(scripted_model("lossy"), 32_768, 12, 20, False, tmp_path, variant=variant))
    assert outcome.compactions > 0
    assert 0 < outcome.kept <= 12 and 0 <= outcome.kept_new <= 3
    assert len(outcome.lost) == 15 - outcome.kept - outcome.kept_new
    assert f"| co | 12 | {outcome.compactions} " in row("co", 12, outcome, variant)
    assert f"{outcome.kept}/12 +{outcome.kept_new}/3" in row("co", 12, outcome, variant)


def test_an_answer_states_the_value_in_any_case_and_not_another_value() -> None:
    fact = PlantedFact("region", "sa-east-1", "We run in sa-east-1.", "Which region do we run in?")
    assert states(fact, "Sa-east-1, as you said.")
    assert not states(fact, "sa-east-2")
