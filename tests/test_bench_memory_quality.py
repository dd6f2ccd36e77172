"""The memory-quality bench's questions, asked through co's own requests (a fresh conversation per question)
with the scripted answerer: each memory form reaches the model where it should, and answers are scored."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from bench.bench_memory_quality import (
    ENGLISH,
    FORMS,
    OTHER_WORDING,
    Variant,
    answer_from_memories,
    ask,
    judge,
    read_forced,
    run_co,
    scripted_answerer,
    scripted_model,
    shown_memories,
)
from co_cli.memory.inject import FORM, INTRO, PLAIN_INTRO
from co_cli.memory.instructions_files import project_root
from co_cli.models import ModelChoice, ResolvedModel
from co_cli.store.db import Database
from co_cli.store.memories import Memories

pytestmark = pytest.mark.allow_model_requests


def resolved(model: FunctionModel) -> ResolvedModel:
    return ResolvedModel(model, ModelChoice("scripted", "test"), 32_768, "test")


def recording(requests: list[ModelRequest]) -> FunctionModel:
    """The scripted answerer, keeping each request it answers."""
    answerer = scripted_answerer()

    async def stream(messages: list[ModelMessage], info: AgentInfo):  # type: ignore[no-untyped-def]
        assert isinstance(messages[-1], ModelRequest)
        requests.append(messages[-1])
        assert answerer.stream_function is not None
        async for chunk in answerer.stream_function(messages, info):
            yield chunk

    return FunctionModel(stream_function=stream, model_name="recording")


def test_every_form_reaches_the_model_and_each_question_is_answered_from_the_memories_co_sends(
    tmp_path: Path,
) -> None:
    cwd = tmp_path / "kestrel"
    cwd.mkdir()
    asyncio.run(run_co(scripted_model(ENGLISH), ENGLISH, tmp_path, project=str(project_root(cwd))))
    for form in FORMS:
        requests: list[ModelRequest] = []
        answers = asyncio.run(ask(resolved(recording(requests)), ENGLISH, tmp_path / "co.db", cwd, form))
        assert (answers.asked, answers.right, answers.stale) == (9, 9, 0), (form, answers.misses)
        assert len(requests) == 9, "one request per question, each the first of its conversation"
        first = requests[0]
        instructions = first.instructions or ""
        message = "".join(p.content for p in first.parts if isinstance(p, UserPromptPart))  # type: ignore[misc]
        assert instructions.startswith("You are co"), "co's own instructions"
        if form == "section":
            assert INTRO in instructions and "- [m" in instructions and message == ENGLISH.questions["name"]
        elif form == "plain":
            assert PLAIN_INTRO in instructions and INTRO not in instructions and "- [m" not in instructions
        else:
            assert PLAIN_INTRO not in instructions and INTRO not in instructions
            assert message.startswith(PLAIN_INTRO) and message.endswith(f"\n\n{ENGLISH.questions['name']}")
            assert "- I'm Sam" in message
    assert FORM == "section", "co's default form is back after the bench"


def test_an_answer_with_the_current_fact_is_right_and_one_from_a_superseded_memory_is_not(tmp_path: Path) -> None:
    cwd = tmp_path / "kestrel"
    cwd.mkdir()
    db = Database.open(tmp_path / "co.db")
    memories = Memories(db)
    memories.add("My name is Sam", actor="user")
    memories.add("I live in Paris", actor="user")  # the move to Lyon never reached memory
    db.close()
    variant = Variant(
        sessions=(),
        current={"name": ENGLISH.current["name"], "city": ENGLISH.current["city"]},
        superseded={"city": ENGLISH.superseded["city"]},
        colleague=(),
        questions={"name": "What's my name again?", "city": "Where do I live?"},
    )
    answers = asyncio.run(ask(resolved(scripted_answerer()), variant, tmp_path / "co.db", cwd, "section"))
    assert (answers.asked, answers.right, answers.stale) == (2, 1, 1)
    assert [(key, verdict) for key, verdict, _ in answers.misses] == [("city", "stale")]
    assert judge(ENGLISH, "city", "You moved from Paris to Lyon last month.") == "right"
    assert judge(ENGLISH, "city", "I don't know where you live.") == "wrong"
    assert judge(ENGLISH, "shell", "Add it to your ~/.fishrc.") == "right"  # a dot file names its program
    assert judge(ENGLISH, "shell", "Add it to your ~/.bashrc.") == "wrong"


def test_the_scripted_answerer_reads_each_form_and_says_so_when_shown_none() -> None:
    def request(instructions: str, prompt: str) -> list[ModelMessage]:
        return [ModelRequest(parts=[UserPromptPart(prompt)], instructions=instructions)]

    section = f"You are co.\n\n## Memory\n{INTRO}\n- [m3] (about Bob) Bob uses emacs\n- [m4] I use helix"
    assert shown_memories(request(section, "Which editor?")) == ["Bob uses emacs", "I use helix"]
    assert shown_memories(request("You are co.", f"{PLAIN_INTRO}\n- I use helix\n\nWhich editor?")) == ["I use helix"]
    assert (
        answer_from_memories(request(section, "Which editor?")) == "From what I remember: Bob uses emacs; I use helix."
    )
    assert answer_from_memories(request("You are co.", "Which editor?")) == "I don't know."


def test_read_message_by_message_a_careful_reading_scores_every_fact_and_a_reading_of_nothing_scores_none(
    tmp_path: Path,
) -> None:
    careful = asyncio.run(read_forced(scripted_model(OTHER_WORDING, tool_calls=True), OTHER_WORDING, tmp_path / "a"))
    assert [s.kept for s in careful] == [s.facts for s in careful]
    assert sum(s.facts for s in careful) >= 9
    assert sum(s.replaced for s in careful) == sum(s.replacements for s in careful) == len(OTHER_WORDING.superseded)
    assert sum(s.junk + s.wrong_removals + s.merged + s.secrets for s in careful) == 0

    def nothing(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart('{"facts": []}')])

    (tmp_path / "b").mkdir()
    blind = asyncio.run(read_forced(FunctionModel(nothing), OTHER_WORDING, tmp_path / "b"))
    assert sum(s.kept + s.replaced for s in blind) == 0
    assert sum(s.replacements for s in blind) == len(OTHER_WORDING.superseded)
    assert any(note.startswith("left active: I live in Porto") for s in blind for note in s.notes)
