"""Compaction commands (``terminal/commands/compaction.py``), in process: /compact (with a focus, show,
preview, apply, edit, discard), /uncompact, /pin, /pins and /unpin through the app's line runner; what is
printed and what the store then holds."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo

from co_cli.context.user_words import USER_WORDS_HEADING
from co_cli.synthetic import is_summary
from co_cli.terminal import editor
from tests.support.chat_app import ChatRun
from tests.support.compaction_turns import TURNS, three_turns
from tests.support.summariser import prose_summariser, scripted_summariser
from tests.support.turn_core import Core, core, echo, long_echo, streaming_model, summarizer

__all__ = ["core"]

pytestmark = pytest.mark.allow_model_requests

SUMMARY = "SUMMARY: the user said hello several times, with padding words."
COMPACTED = re.compile(
    r"Compacted \(summary, manual\): 6 messages, ~[\d,]+ -> ~[\d,]+ tokens[^.]*\. "
    r"/compact show reads it, /uncompact undoes it\."
)


def summaries(chat: ChatRun) -> list[ModelMessage]:
    return [m for m in chat.conv.working if is_summary(m)]


def test_compact_summarises_now_with_its_focus_and_records_it(core: Core) -> None:
    focuses: list[str] = []

    def summarise(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        focuses.append(str(messages[-1].parts[-1].content))  # type: ignore[union-attr]
        return ModelResponse(parts=[TextPart(SUMMARY)])

    chat = ChatRun(core, streaming_model(long_echo), summarizer=scripted_summariser(summarise, model_name="summariser"))
    chat.send(*TURNS)
    printed = chat.send("/compact the padding words")
    assert printed.code == 0, printed.err
    assert len(printed.lines) == 1 and COMPACTED.fullmatch(printed.lines[0]), printed.lines
    assert "Focus the summary on: the padding words" in focuses[-1]
    assert len(summaries(chat)) == 1
    assert chat.conv.session is not None
    records = core.store.compactions.list(chat.conv.session.id)
    assert [(r.trigger, r.focus, r.from_seq, r.upto_seq) for r in records] == [("manual", "the padding words", 0, 5)]
    assert SUMMARY in records[0].summary


def test_compact_with_nothing_to_compact_says_so(core: Core) -> None:
    chat = ChatRun(core, streaming_model(echo), summarizer=summarizer())
    empty = chat.send("/compact")
    assert empty.code == 0 and empty.err == ""
    assert empty.lines == ["Nothing to compact yet."]
    short = chat.send("hi", "/compact")
    assert short.code == 0 and short.err == ""
    assert re.fullmatch(
        r"Nothing worth compacting yet: the conversation \(~\d+ tokens\) is shorter than a summary of it\.",
        short.lines[1],
    )
    assert chat.conv.session is not None and core.store.compactions.list(chat.conv.session.id) == []


def test_compact_that_fails_leaves_the_history_unchanged(core: Core) -> None:
    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise RuntimeError("summariser is down")

    chat = ChatRun(core, streaming_model(long_echo), summarizer=scripted_summariser(broken, model_name="broken"))
    chat.send(*TURNS)
    before = list(chat.conv.working)
    printed = chat.send("/compact")
    assert printed.code == 1 and printed.out == ""
    assert printed.err.startswith("error: compaction failed, history unchanged: ")
    assert chat.conv.working == before
    assert chat.conv.session is not None and core.store.compactions.list(chat.conv.session.id) == []


def test_compact_show_prints_the_summary_in_force_and_the_pins(core: Core) -> None:
    chat, _ = three_turns(core)
    nothing = chat.send("/compact show")
    assert nothing.lines == ["No compaction is in force: the model sees the whole conversation."]
    printed = chat.send("/compact", "/pin Answer in British English.", "/compact show")
    assert printed.code == 0, printed.err
    shown = printed.out.split("Pinned #1", 1)[1]
    assert SUMMARY in shown
    assert shown.rstrip("\n").endswith("Pins:\n1. Answer in British English.")


def test_compact_preview_without_a_terminal_discards_the_summary(core: Core) -> None:
    chat, session_id = three_turns(core)
    before = list(chat.conv.working)
    printed = chat.send("/compact preview")
    assert printed.code == 0
    assert SUMMARY in printed.out and printed.lines[-1] == "Discarded; history unchanged."
    assert "[a]pply / [e]dit / [d]iscard? (no terminal to ask: discarded)" in printed.err
    assert chat.conv.working == before and core.store.compactions.list(session_id) == []


def test_compact_preview_applied_after_an_edit(core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    chat, session_id = three_turns(core)
    answers = iter(["e", "a"])

    async def ask(question: str) -> str | None:
        return next(answers)

    edited: list[str] = []

    def edit_text(text: str) -> str:
        edited.append(text)
        return "EDITED: the user prefers short answers."

    monkeypatch.setattr(chat.app, "ask", ask)
    monkeypatch.setattr(editor, "edit_text", edit_text)
    printed = chat.send("/compact preview keep it short")
    assert printed.code == 0, printed.err
    assert edited and SUMMARY in edited[0]
    assert printed.out.index(SUMMARY) < printed.out.index("EDITED: the user prefers short answers.")
    assert COMPACTED.fullmatch(printed.lines[-1]), printed.lines[-1]
    records = core.store.compactions.list(session_id)
    assert [(r.trigger, r.focus) for r in records] == [("manual", "keep it short")]
    assert "EDITED: the user prefers short answers." in records[0].summary and SUMMARY not in records[0].summary


def test_uncompact_restores_the_context_and_records_the_undo(core: Core) -> None:
    chat, session_id = three_turns(core)
    before = list(chat.conv.working)
    nothing = chat.send("/uncompact")
    assert nothing.lines == ["Nothing to undo: no compaction is in force."]
    printed = chat.send("/compact", "/uncompact")
    assert printed.code == 0, printed.err
    assert printed.lines[-1] == (
        "Compaction undone: the working context holds 6 messages again (the transcript never changed)."
    )
    assert chat.conv.working == before and not summaries(chat)
    records = core.store.compactions.list(session_id)
    assert len(records) == 1 and records[0].undone_at is not None


def test_pin_pins_and_unpin(core: Core) -> None:
    requests: list[str] = []

    def step(messages: list[ModelMessage]) -> str:
        requests.append(str(messages))
        return echo(messages)

    chat = ChatRun(core, streaming_model(step))
    printed = chat.send(
        "Keep answers short.",
        "/pin",
        "/pin Always answer in British English.",
        "/pin Always answer in British English.",
        "/pins",
        "next",
    )
    assert printed.code == 0, printed.err
    assert printed.lines[1:] == [
        "Pinned #1: Keep answers short.  (every request of this session carries it; /unpin 1)",
        "Pinned #2: Always answer in British English.  (every request of this session carries it; /unpin 2)",
        "Already pinned.",
        "1. Keep answers short.",
        "2. Always answer in British English.",
        "echo: next",
    ]
    assert "Always answer in British English." in requests[-1]
    assert chat.conv.session is not None
    session_id = chat.conv.session.id
    assert [(text, source) for _, text, source in core.store.pins.active(session_id)] == [
        ("Keep answers short.", "user"),
        ("Always answer in British English.", "user"),
    ]
    unpinned = chat.send("/unpin 1", "/unpin x", "/unpin 5", "/pins")
    assert unpinned.code == 1
    assert unpinned.lines == ["Unpinned: Keep answers short.", "1. Always answer in British English."]
    assert unpinned.err == "error: usage: /unpin <n> (see /pins)\nerror: no pin 5: /pins lists 1\n"
    assert [text for _, text, _ in core.store.pins.active(session_id)] == ["Always answer in British English."]


def test_pins_and_pin_with_nothing_yet(core: Core) -> None:
    printed = ChatRun(core, streaming_model(echo)).send("/pins", "/pin")
    assert printed.lines == ["No pins. /pin <instruction> keeps one verbatim in every request of this session."]
    assert printed.err == "error: nothing to pin yet: type /pin <instruction>\n"


def test_pin_remember_keeps_it_for_every_session(core: Core) -> None:
    chat = ChatRun(core, streaming_model(echo))
    printed = chat.send("hello", "/pin --remember Never push directly to main.")
    assert printed.code == 0, printed.err
    assert printed.lines[1] == (
        "Pinned #1: Never push directly to main.  (every request of this session carries it; /unpin 1)"
    )
    memories: Any = core.store.memories
    kept = [m for m in memories.list() if m.text == "Never push directly to main."]
    assert len(kept) == 1 and kept[0].kind == "instruction"
    assert printed.lines[2] == (
        f"Remembered {kept[0].ref} as an instruction for every session  (/forget {kept[0].ref})"
    )


@pytest.mark.parametrize(
    ("editor_command", "refusal"),
    [
        ("sh -c ': > \"$0\"'", "error: an empty summary is not applied; the summary is unchanged"),
        ('sh -c \'printf "  \\n\\n" > "$0"\'', "error: an empty summary is not applied; the summary is unchanged"),
        ("rm", "error: the editor left no file to read; the summary is unchanged"),
        ('sh -c \'rm "$0" && mkdir "$0"\'', "error: the editor left no file to read; the summary is unchanged"),
        ("vim 'unbalanced", "error: no editor could be started (set $EDITOR); the summary is unchanged"),
    ],
)
def test_compact_preview_keeps_the_summary_when_the_edit_leaves_nothing(
    core: Core, monkeypatch: pytest.MonkeyPatch, editor_command: str, refusal: str
) -> None:
    chat, session_id = three_turns(core)
    answers = iter(["e", "a"])

    async def ask(question: str) -> str | None:
        return next(answers)

    monkeypatch.setattr(chat.app, "ask", ask)
    monkeypatch.setenv("VISUAL", editor_command)
    printed = chat.send("/compact preview")
    assert chat.app.running and refusal in printed.err
    assert COMPACTED.fullmatch(printed.lines[-1]), printed.lines[-1]
    [record] = core.store.compactions.list(session_id)
    assert SUMMARY in record.summary  # the summary as the model wrote it, not an empty one


def test_a_pin_too_long_for_every_request_is_refused(core: Core) -> None:
    chat = ChatRun(core, streaming_model(echo))
    huge = "Always remember this detail. " * 20_000  # 580,000 characters
    printed = chat.send(f"/pin {huge}", "/pins")
    assert printed.err.startswith("error: a pin holds at most 2,000 characters (this one has 579,999)")
    assert printed.lines[-1].startswith("No pins.")
    assert chat.conv.pins.all() == []


def test_pins_stay_within_a_tenth_of_the_window(core: Core) -> None:
    chat = ChatRun(core, streaming_model(echo))
    rule = "Rule {n}: " + "always check the deployment manifest before merging anything " * 30
    lines = [f"/pin {rule.format(n=n)}" for n in range(40)]
    printed = chat.send(*lines)
    window = chat.conv.resolved.context_window
    refused = [line for line in printed.err.splitlines() if "more than a tenth" in line]
    assert refused and refused[0].startswith("error: pins would take ~")
    assert f"of the {window:,}-token window; /unpin one first" in refused[0]
    from co_cli.text_tokens import estimate_text_tokens

    assert 0 < len(chat.conv.pins) < 40
    assert sum(estimate_text_tokens(pin.text) for pin in chat.conv.pins) <= window // 10


def test_compact_preview_shows_what_it_would_change_before_it_is_applied(
    core: Core, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat, session_id = three_turns(core)
    answers = iter(["e", "d"])

    async def ask(question: str) -> str | None:
        return next(answers)

    monkeypatch.setattr(chat.app, "ask", ask)
    monkeypatch.setattr(editor, "edit_text", lambda text: "EDITED.")
    printed = chat.send("/compact preview")
    assert printed.code == 0, printed.err
    previews = [line for line in printed.lines if line.startswith("Not applied yet:")]
    assert len(previews) == 2, printed.lines  # before and after the edit
    shown = [
        re.fullmatch(
            r"Not applied yet: it would replace 6 messages, ~([\d,]+) -> ~([\d,]+) tokens(; edited by the user)?\.", p
        )
        for p in previews
    ]
    assert all(shown), previews
    before, after = (int(m.group(2).replace(",", "")) for m in shown if m)
    assert after < before  # the edit is shorter than the summary
    assert printed.lines[-1] == "Discarded; history unchanged."
    assert core.store.compactions.list(session_id) == []


def test_a_rejected_summary_says_why_and_what_to_do_next(core: Core) -> None:
    def acknowledges(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("Understood.")])

    chat = ChatRun(core, streaming_model(long_echo), summarizer=scripted_summariser(acknowledges, model_name="ack"))
    chat.send(*TURNS)
    printed = chat.send("/compact")
    assert printed.code == 0 and "SummaryRejected" not in printed.out + printed.err
    assert printed.lines[0].startswith(
        "Compacted (digest, manual) (summary rejected: the summariser answered with an acknowledgement, "
        "not a summary): "
    ), printed.lines
    assert "/uncompact" in printed.lines[0]


def test_compact_whose_summary_copies_an_answer_keeps_the_users_name_and_project(core: Core) -> None:
    """The summariser answers with a copy of an assistant paragraph: it is rejected with the reason in the
    compaction line, the digest stands in, and the next request still holds the user's name and project."""
    answer = "Nice to meet you! I can help you set up the configuration, the tests and the deployment today. "
    seen: list[str] = []

    def chat_step(messages: list[ModelMessage]) -> str:
        seen.append("\n".join(str(getattr(p, "content", "")) for m in messages for p in m.parts))
        return answer + "and some more words to make it worth summarising " * 4

    def copy(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(answer)])

    chat = ChatRun(core, streaming_model(chat_step), summarizer=scripted_summariser(copy, model_name="copier"))
    chat.send("Hi, my name is Dana Whitfield and my project is called Tern.", "What should we set up first?")
    printed = chat.send("/compact keep the names", "Who am I, and what is my project?")
    assert printed.code == 0, printed.err
    assert printed.lines[0].startswith(
        "Compacted (digest, manual) (summary rejected: it is a copy of an assistant message, not a summary): "
    )
    assert "Dana Whitfield" in seen[-1] and "Tern" in seen[-1]


def test_compact_shows_the_rules_it_pinned_and_unpin_alone_undoes_them(core: Core) -> None:
    """The summariser names the user's rule (stated in German) and one the user never wrote: the user's
    sentence is pinned and shown, the invented one dropped and counted in the compaction line."""
    rules = ["niemals direkt auf main pushen", "Always answer in French."]
    chat = ChatRun(core, streaming_model(long_echo), summarizer=summarizer(standing_instructions=rules))
    chat.send("Bitte niemals direkt auf main pushen. Padding folgt " + "with padding words " * 10, *TURNS[1:])
    printed = chat.send("/compact")
    assert printed.code == 0, printed.err
    assert COMPACTED.fullmatch(printed.lines[0]), printed.lines
    assert "; 1 quote not found in your messages, dropped." in printed.lines[0]
    assert printed.lines[1:] == [
        "Pinned a standing instruction you stated (every request carries it; /unpin undoes this):",
        "  #1 Bitte niemals direkt auf main pushen.",
    ]
    assert [pin.text for pin in chat.conv.pins] == ["Bitte niemals direkt auf main pushen."]
    listed = chat.send("/pins")
    assert listed.lines == ["1. Bitte niemals direkt auf main pushen.  (found in your messages by a compaction)"]
    undone = chat.send("/unpin")
    assert undone.lines == ["Unpinned: Bitte niemals direkt auf main pushen."]
    assert list(chat.conv.pins) == []
    again = chat.send("/unpin")
    assert "no pins found by a compaction are left to undo" in again.err


def test_a_one_off_request_the_summariser_does_not_name_is_not_pinned(core: Core) -> None:
    chat = ChatRun(core, streaming_model(long_echo), summarizer=summarizer())
    chat.send("Nunca subas nada a main hoy, primero revisa los tests. " + "with padding words " * 10, *TURNS[1:])
    printed = chat.send("/compact", "/pins")
    assert printed.code == 0, printed.err
    assert COMPACTED.fullmatch(printed.lines[0]), printed.lines
    assert printed.lines[1:] == ["No pins. /pin <instruction> keeps one verbatim in every request of this session."]


def test_a_plain_text_summary_pins_nothing_and_compact_show_lists_the_suggestions(core: Core) -> None:
    """The summariser answers in plain text even when shown the schema: nothing is pinned; the English cues'
    readings are listed by /compact show with the command that would apply each, and applying one works."""
    plain = prose_summariser(SUMMARY, model_name="prose")
    chat = ChatRun(core, streaming_model(long_echo), summarizer=plain)
    first = "Never push directly to main. The next step is the changelog. Padding " + "with padding words " * 10
    chat.send(first, *TURNS[1:])
    printed = chat.send("/compact", "/compact show")
    assert printed.code == 0, printed.err
    assert printed.lines[0].endswith(
        "/compact show reads it and lists 2 suggestions from your words, /uncompact undoes it."
    ), printed.lines
    assert list(chat.conv.pins) == []
    listing = printed.out.split("Suggested from your words", 1)[1]
    assert "  rule: Never push directly to main.\n    /pin Never push directly to main." in listing
    assert "  next step: The next step is the changelog.\n    /tasks add The next step is the changelog." in listing
    applied = chat.send("/pin Never push directly to main.", "/compact show")
    assert [pin.text for pin in chat.conv.pins] == ["Never push directly to main."]
    assert "rule: Never push directly to main." not in applied.out  # pinned now: no longer suggested
    assert "next step: The next step is the changelog." in applied.out


def test_compact_show_and_context_tell_what_of_the_users_words_is_kept(core: Core) -> None:
    chat, _ = three_turns(core)
    printed = chat.send("/compact", "/compact show", "/context")
    assert printed.code == 0, printed.err
    assert "; 2 of your messages kept verbatim." in printed.lines[0]  # the third is the latest request
    assert USER_WORDS_HEADING in printed.out
    assert "Your own messages are kept word for word beside the summary" in printed.out
    assert f"\n- {TURNS[0].strip()}" in printed.out
    assert "Your own words beside the summary: 2 messages verbatim" in printed.out


def test_an_edited_preview_counts_what_the_edited_summary_holds(core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    def names_files(messages: list[ModelMessage]) -> str:
        n = len(messages)
        return long_echo(messages) + " ".join(f"see src/module_{n}_{k}.py" for k in range(3))

    chat = ChatRun(core, streaming_model(names_files), summarizer=summarizer())
    chat.send(*TURNS)
    answers = iter(["e", "a"])

    async def ask(question: str) -> str | None:
        return next(answers)

    def keep_one_listed_path(text: str) -> str:
        """The user deletes all but the first item of the "Kept verbatim" list."""
        head, _, listed = text.partition("Kept verbatim:\n")
        items = [line for line in listed.splitlines() if line.startswith("- ")]
        assert len(items) == 9, text
        return f"{head}Kept verbatim:\n{items[0]}\n"

    monkeypatch.setattr(chat.app, "ask", ask)
    monkeypatch.setattr(editor, "edit_text", keep_one_listed_path)
    printed = chat.send("/compact preview")
    assert printed.code == 0, printed.err
    before, after = [line for line in printed.lines if line.startswith("Not applied yet:")]
    assert before.endswith("; summary kept 0/9 identifiers; 9 appended."), before
    held = "edited by the user: it holds 1/9 identifiers, 1 of its items in the Kept verbatim list"
    assert after.endswith(f"; {held}."), after
    assert f"; {held};" in printed.lines[-1] and "9 appended" not in printed.lines[-1], printed.lines[-1]
