"""The extractive digest: small, deterministic, and it keeps what the user said."""

from __future__ import annotations

import warnings

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, RetryPromptPart, ToolReturnPart

from co_cli.context.digest import DIGEST_HEADING, cut_middle, extractive_digest, tool_call_lines
from co_cli.context.ledger import extract_identifiers, kept_verbatim
from co_cli.context.repair import tool_pairs_valid
from co_cli.context.tokens import estimate_messages_tokens, estimate_text_tokens
from co_cli.synthetic import summary_request
from tests.support.messages import ack, calls, conversation, reply, returns, user
from tests.support.planted_facts import DEFAULT_TURNS, FACTS, facts_kept, planted_conversation, planted_script


def test_planted_conversation_shape() -> None:
    planted = planted_conversation()
    assert len(planted.turns) == DEFAULT_TURNS == 36
    assert len(planted.facts) == 12 and len({fact.kind for fact in planted.facts}) == 12
    prompts = [turn.prompt for turn in planted.turns]
    for fact in planted.facts:
        stated = [i for i, prompt in enumerate(prompts) if fact.statement in prompt]
        assert stated and stated[0] < 7, fact.kind  # stated early, verbatim
        assert not any(fact.key in turn.answer for turn in planted.turns), fact.kind
    assert tool_pairs_valid(planted.messages)
    assert sum(1 for turn in planted.turns if turn.tool_calls) >= 10
    assert facts_kept(" ".join(prompts)) == list(FACTS)
    assert [turn.prompt for turn in planted_script(10)] == prompts[:10]
    with pytest.raises(ValueError):
        planted_script(3)


def test_planted_span_shrinks_and_keeps_every_fact() -> None:
    span = planted_conversation().messages[:40]
    assert len(span) == 40
    digest = extractive_digest(span)
    span_tokens = estimate_messages_tokens(span)
    digest_tokens = estimate_text_tokens(digest)
    assert digest_tokens * 3 < span_tokens, (digest_tokens, span_tokens)
    missing = [(fact.kind, fact.key) for fact in FACTS if fact.key not in digest]
    assert missing == []
    for fact in FACTS:
        for extra in fact.also:
            assert extra in digest


def test_whole_planted_conversation_keeps_every_fact_and_every_user_message() -> None:
    planted = planted_conversation()
    digest = extractive_digest(planted.messages)
    assert [fact.key for fact in FACTS if fact.key not in digest] == []
    assert estimate_text_tokens(digest) * 3 < estimate_messages_tokens(planted.messages)
    numbered = [line for line in digest.splitlines() if line[:1].isdigit() and ". " in line[:4]]
    assert len(numbered) == len(planted.turns)


def test_fact_cut_out_of_a_long_message_comes_back_through_the_ledger() -> None:
    filler = "word " * 100
    span: list[ModelMessage] = [user(f"{filler} The service listens on port 8443. {filler}"), reply("ok")]
    digest = extractive_digest(span, max_user_chars=120)
    line = next(line for line in digest.splitlines() if line.startswith("1. "))
    assert "8443" not in line and "…" in line
    assert "8443" in kept_verbatim(digest)


def test_user_messages_are_cut_head_and_tail() -> None:
    text = "START " + "x" * 1000 + " END"
    digest = extractive_digest([user(text), reply("fine")], max_user_chars=100)
    line = next(line for line in digest.splitlines() if line.startswith("1. "))
    assert line.startswith("1. START") and line.endswith("END")
    assert len(line) <= 3 + 100 + 2


def legacy_retry(content: str, *, tool_name: str, tool_call_id: str) -> RetryPromptPart:
    """A retry prompt as older sessions hold them (pydantic-ai now records ``outcome='retried'`` instead)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return RetryPromptPart(content, tool_name=tool_name, tool_call_id=tool_call_id)


def test_tool_call_outcomes() -> None:
    span: list[ModelMessage] = [
        user("go"),
        calls(
            ("read_file", {"path": "src/app.py"}, "c1"),
            ("read_file", {"path": "missing.py"}, "c2"),
            ("run_shell", {"command": "pytest -x"}, "c3"),
            ("run_shell", {"command": "rm -rf build"}, "c4"),
            ("run_shell", {"command": "sleep 100"}, "c5"),
            ("grep", {"pattern": "TODO", "path": "src"}, "c6"),
            ("run_shell", {"command": "make"}, "c7"),
            ("list_dir", {}, "c8"),
            ("grep", {"pattern": "(", "path": "."}, "c9"),
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("read_file", "print('hi')", "c1"),
                ToolReturnPart("read_file", "Error: missing.py does not exist.", "c2"),
                ToolReturnPart("run_shell", "exit code: 1\nstdout: 1 failed\nstderr: (empty)", "c3"),
                ToolReturnPart("run_shell", "The user denied this tool call.", "c4", outcome="denied"),
                ToolReturnPart("run_shell", "interrupted", "c5", outcome="interrupted"),
                legacy_retry("bad regex", tool_name="grep", tool_call_id="c6"),
                ToolReturnPart("run_shell", "Timed out after 5 s: killed.\nexit code: -9\nstdout: (empty)", "c7"),
                ToolReturnPart("list_dir", "a\nb", "c8"),
                ToolReturnPart("grep", "missing ), unterminated subpattern", "c9", outcome="retried"),
            ]
        ),
        reply("done"),
    ]
    lines = [line.render() for line in tool_call_lines(span)]
    assert lines == [
        "- read_file src/app.py: ok",
        "- read_file missing.py: failed: missing.py does not exist.",
        "- run_shell `pytest -x`: failed (exit 1)",
        "- run_shell `rm -rf build`: denied",
        "- run_shell `sleep 100`: interrupted",
        "- grep `TODO` in src: failed: bad regex",
        "- run_shell `make`: failed (timed out)",
        "- list_dir: ok",
        "- grep `(`: failed: missing ), unterminated subpattern",
    ]
    digest = extractive_digest(span)
    for line in lines:
        assert line in digest


def test_a_call_without_a_result_in_the_span() -> None:
    lines = tool_call_lines([user("go"), calls(("read_file", {"path": "a.py"}, "c1"))])
    assert [line.render() for line in lines] == ["- read_file a.py: no result"]


def test_repeated_calls_are_folded_and_many_calls_bounded() -> None:
    span = conversation(60)
    same: list[ModelMessage] = []
    for i in range(3):
        same += [calls(("read_file", {"path": "same.py"}, f"s{i}")), returns(("read_file", "x", f"s{i}"))]
    digest = extractive_digest([*same, *span], max_chars=3000)
    assert "- read_file same.py: ok (×3)" in digest
    assert "more tool calls: read_file ×" in digest
    assert "src/file_0.py" in digest and "src/file_59.py" in digest
    assert len(digest) <= 3000 + 200


def test_earlier_summary_is_carried_bounded_with_its_kept_items() -> None:
    long_prose = "The user worked on the ingestion path. " * 80
    earlier = summary_request(30, f"{long_prose}\n\nKept verbatim:\n- PHOENIX7\n- pytest -x tests/unit\n- eu-central-2")
    span: list[ModelMessage] = [earlier, ack(), user("now look at the sync client"), reply("ok")]
    digest = extractive_digest(span, max_chars=2000)
    assert "Earlier summary:" in digest
    assert digest.count("The user worked on the ingestion path.") < 80
    assert len(digest) <= 2200
    for item in ("PHOENIX7", "pytest -x tests/unit", "eu-central-2"):
        assert item in kept_verbatim(digest)
    assert "Understood." not in digest  # the acknowledgement is not conversation
    assert "1. now look at the sync client" in digest
    assert "30 earlier messages" not in digest


def test_digest_of_a_digest_keeps_the_ledger() -> None:
    planted = planted_conversation()
    first = summary_request(40, extractive_digest(planted.messages[:40]))
    second = extractive_digest([first, ack(), *planted.messages[40:80]])
    third = extractive_digest([summary_request(80, second), ack(), *planted.messages[80:]])
    assert [fact.key for fact in FACTS if fact.key not in third] == []
    keys = {ident.text for ident in extract_identifiers([summary_request(100, third)])}
    assert {fact.key for fact in FACTS} <= keys
    # carried by its content: headings do not nest once per compaction
    assert third.count(DIGEST_HEADING) == 1 and third.count("Earlier summary:") == 1
    assert third.count("Tool calls:") <= 1


def test_many_user_messages_share_the_budget() -> None:
    span: list[ModelMessage] = []
    for i in range(300):
        span += [user(f"message number {i} about the thing " + "filler " * 40), reply("ok")]
    digest = extractive_digest(span, max_chars=4000)
    assert len(digest) <= 4000 + 200
    assert "1. message number 0 " in digest
    assert "message number 299 " in digest
    assert "user messages omitted" in digest


def test_deterministic_and_empty() -> None:
    span = planted_conversation().messages[:30]
    assert extractive_digest(span) == extractive_digest(list(span))
    assert extractive_digest([]) == ""
    assert extractive_digest([ack()]) == ""
    assert extractive_digest([user("hi")]).startswith(DIGEST_HEADING)


def test_cut_middle() -> None:
    assert cut_middle("a  b\n c", 10) == "a b c"
    cut = cut_middle("alpha beta gamma delta epsilon zeta eta theta iota kappa", 30)
    assert cut.startswith("alpha") and cut.endswith("kappa") and " … " in cut
    assert len(cut) <= 30
