"""End to end: compaction the user can see, steer and undo (/pin, /compact preview, /uncompact, /compact show)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.co_process import expect_prompt, run_co, send_line, spawn_co
from tests.support.screen import screen_lines
from tests.support.scripted_server import ScriptedServer
from tests.support.summariser_requests import chat_turns, long_prompt, summariser_answers, summary_messages

pytestmark = pytest.mark.e2e

SUMMARY = "GOAL-SUMMARY: the user walks through a checklist in notes/plan.md."


def instructions_of(request: object) -> str:
    return "\n".join(request.texts("system"))  # type: ignore[attr-defined]


def test_pins_reach_every_request_and_can_be_removed(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    lines = ["/pin Always answer in British English.", "hello", "/pins", "/unpin 1", "again"]
    result = run_co(["chat", "--lines"], co_server_env, workdir, input="\n".join(lines) + "\n")
    assert result.returncode == 0, result.stderr
    assert "Pinned #1: Always answer in British English." in result.stdout
    assert "1. Always answer in British English." in result.stdout
    assert "Unpinned: Always answer in British English." in result.stdout
    first, second = chat_turns(scripted_server)
    assert "Always answer in British English." in instructions_of(first)
    assert "Always answer in British English." not in instructions_of(second)


def test_preview_apply_show_and_uncompact_in_a_terminal(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    scripted_server.responder = summariser_answers(SUMMARY)
    child = spawn_co(["chat"], env=co_server_env, cwd=workdir)
    try:
        expect_prompt(child)
        for step in (1, 2):
            send_line(child, long_prompt(step))
            expect_prompt(child)
        send_line(child, "/compact preview the checklist")
        child.expect(r"\[d\]iscard", timeout=20)
        send_line(child, "a")
        expect_prompt(child)
        send_line(child, "/compact show")
        expect_prompt(child)
        send_line(child, "after the summary")
        expect_prompt(child)
        send_line(child, "/uncompact")
        expect_prompt(child)
        send_line(child, "after the undo")
        expect_prompt(child)
        screen = "\n".join(screen_lines(child))
    finally:
        child.terminate(force=True)
    assert "Compacted (summary, manual): 4 messages" in screen
    assert "/uncompact undoes it" in screen
    assert screen.count("GOAL-SUMMARY") >= 2  # the preview, then /compact show
    assert "Compaction undone" in screen
    summarised, undone = chat_turns(scripted_server)[-2:]
    assert summary_messages(summarised) and {"role": "user", "content": long_prompt(1)} not in summarised.messages
    assert not summary_messages(undone) and long_prompt(1) in undone.all_text


def test_preview_discarded_changes_nothing(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    scripted_server.responder = summariser_answers(SUMMARY)
    child = spawn_co(["chat"], env=co_server_env, cwd=workdir)
    try:
        expect_prompt(child)
        for step in (1, 2):
            send_line(child, long_prompt(step))
            expect_prompt(child)
        send_line(child, "/compact preview")
        child.expect(r"\[d\]iscard", timeout=20)
        send_line(child, "d")
        expect_prompt(child)
        send_line(child, "still whole?")
        expect_prompt(child)
        screen = "\n".join(screen_lines(child))
    finally:
        child.terminate(force=True)
    assert "Discarded; history unchanged." in screen
    last = chat_turns(scripted_server)[-1]
    assert not summary_messages(last) and long_prompt(1) in last.all_text
    listed = run_co(["sessions", "list", "--json"], co_server_env, workdir)
    assert '"compaction_count": 0' in listed.stdout


def test_sessions_show_and_export_show_compactions_in_place(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    scripted_server.responder = summariser_answers(SUMMARY)
    lines = [long_prompt(1), long_prompt(2), "/compact", "after", "/uncompact"]
    result = run_co(["chat", "--lines"], co_server_env, workdir, input="\n".join(lines) + "\n")
    assert result.returncode == 0, result.stderr
    listed = run_co(["sessions", "list", "--json"], co_server_env, workdir)
    session_id = listed.stdout.split('"id": "')[1].split('"')[0]
    shown = run_co(["sessions", "show", session_id], co_server_env, workdir)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "Compaction (summary, manual): messages #0–#3 replaced" in out and "undone" in out
    assert out.index("echo: " + long_prompt(2)[:20]) < out.index("Compaction (summary") < out.index("after")
    exported = run_co(["sessions", "export", session_id, "--format", "md"], co_server_env, workdir)
    assert exported.returncode == 0, exported.stderr
    assert "> **Compaction (summary, manual): messages #0–#3 replaced" in exported.stdout
    assert "GOAL-SUMMARY" in exported.stdout


def test_pin_remember_keeps_it_for_every_session_and_memory_lists_both(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    lines = ["/pin --remember Never push directly to main.", "/pin Keep answers short.", "/memory"]
    result = run_co(["chat", "--lines"], co_server_env, workdir, input="\n".join(lines) + "\n")
    assert result.returncode == 0, result.stderr
    assert "Pinned #1: Never push directly to main." in result.stdout
    assert "as an instruction for every session" in result.stdout
    listing = "Remembered (/forget <id> forgets one):\n  m1 [user, instruction] Never push directly to main."
    assert listing in result.stdout
    assert "Pinned in this session only" in result.stdout and "2. Keep answers short." in result.stdout
    listed = run_co(["memory", "list", "--json"], co_server_env, workdir)
    assert '"kind": "instruction"' in listed.stdout and "Never push directly to main." in listed.stdout
    later = run_co(["chat", "-p", "how do I ship this?"], co_server_env, workdir)
    assert later.returncode == 0, later.stderr
    instructions = instructions_of(chat_turns(scripted_server)[-1])
    assert "Never push directly to main." in instructions and "Keep answers short." not in instructions


def test_a_hung_summariser_is_given_up_after_request_timeout(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    """The summariser's requests are bounded by request_timeout as the chat model's are (over SDK retries)."""
    import time

    from tests.support.scripted_server import Hang
    from tests.support.summariser_requests import is_summariser_request

    scripted_server.responder = lambda body: Hang(30) if is_summariser_request(body) else None
    env = {**co_server_env, "CO_CLI_REQUEST_TIMEOUT": "1.5"}
    lines = [long_prompt(1), long_prompt(2), "/compact"]
    start = time.monotonic()
    result = run_co(["chat", "--lines"], env, workdir, input="\n".join(lines) + "\n", timeout=60)
    elapsed = time.monotonic() - start
    assert "compaction failed, history unchanged: the summariser sent nothing for 1.5 s." in result.stderr
    assert "raise request_timeout" in result.stderr
    assert elapsed < 12, elapsed  # one timeout, not one per SDK retry (3 x 1.5 s) plus a 30 s hang


def test_a_slow_summariser_is_asked_once_per_summary_and_named_once(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    """A summariser that sends nothing: each summary request is sent once (no SDK retry of a timed-out
    request), streamed, and co says once that the summariser is slow, naming the setting."""
    import json

    from tests.support.scripted_server import Hang
    from tests.support.summariser_requests import is_summariser_request, summariser_calls

    scripted_server.responder = lambda body: Hang(30) if is_summariser_request(body) else None
    env = {**co_server_env, "CO_CLI_REQUEST_TIMEOUT": "1.5", "CO_CLI_MAX_HISTORY_MESSAGES": "6"}
    prompts = [long_prompt(i) for i in range(1, 10)]
    result = run_co(["chat", "--lines"], env, workdir, input="\n".join(prompts) + "\n", timeout=120)
    assert result.returncode == 0, result.stderr
    calls = summariser_calls(scripted_server)
    assert calls and all((call.body or {}).get("stream") for call in calls)
    bodies = [json.dumps(call.body, sort_keys=True) for call in calls]
    assert len(set(bodies)) == len(bodies)  # no request sent twice
    assert result.stderr.count("The summariser is slow") == 1
    assert "raise request_timeout" in result.stderr
    assert "Compacted (digest" in result.stderr


def test_a_summariser_that_writes_slowly_but_steadily_is_not_cut_off(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    """request_timeout bounds the summariser's silences, not the time it takes to write the whole summary."""
    from tests.support.scripted_server import JSON, Reply
    from tests.support.summariser_requests import is_summariser_request, summariser_reply

    def slow(body: JSON) -> Reply | None:  # ~4 s in all, never more than 0.4 s of silence
        return summariser_reply(body, SUMMARY, delay=0.4) if is_summariser_request(body) else None

    scripted_server.responder = slow
    env = {**co_server_env, "CO_CLI_REQUEST_TIMEOUT": "1.5"}
    result = run_co(
        ["chat", "--lines"], env, workdir, input="\n".join([long_prompt(1), long_prompt(2), "/compact"]) + "\n"
    )
    assert result.returncode == 0, result.stderr
    assert "Compacted (summary, manual)" in result.stdout, result.stdout + result.stderr


def test_a_rule_stated_in_german_is_pinned_by_compact_and_an_invented_one_is_not(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    """The summariser's typed answer names the user's rule (a fragment of it) and one the user never wrote:
    /compact pins the user's whole German sentence, counts the invented one as dropped, /pins and /compact show
    list the pin, and the next request carries it."""
    rule = "Antworte mir ab jetzt bitte immer auf Deutsch, auch bei Fehlermeldungen."
    scripted_server.responder = summariser_answers(
        SUMMARY, standing_instructions=["ab jetzt bitte immer auf Deutsch", "Duze mich nie."]
    )
    first = f"{rule} Zuerst geht es um die Checkliste in notes/plan.md. " + long_prompt(1)
    lines = [first, long_prompt(2), "/compact", "/pins", "/compact show", "weiter"]
    result = run_co(["chat", "--lines"], co_server_env, workdir, input="\n".join(lines) + "\n")
    assert result.returncode == 0, result.stderr
    assert "; 1 quote not found in your messages, dropped." in result.stdout
    assert f"Pinned a standing instruction you stated (every request carries it; /unpin undoes this):\n  #1 {rule}" in (
        result.stdout
    )
    assert f"1. {rule}  (found in your messages by a compaction)" in result.stdout  # /pins
    assert f"Pins:\n1. {rule}" in result.stdout  # /compact show
    assert "Duze mich nie." not in result.stdout
    after = chat_turns(scripted_server)[-1]
    assert rule in instructions_of(after) and "Duze mich nie." not in instructions_of(after)


def test_a_summary_in_plain_text_pins_nothing_and_compact_show_suggests(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    from tests.support.summariser_requests import summariser_prose

    scripted_server.responder = summariser_prose(SUMMARY)
    first = "Never commit generated files. Then: " + long_prompt(1)
    lines = [first, long_prompt(2), "/compact", "/compact show", "/pins"]
    result = run_co(["chat", "--lines"], co_server_env, workdir, input="\n".join(lines) + "\n")
    assert result.returncode == 0, result.stderr
    assert "lists 1 suggestion from your words" in result.stdout
    assert "Pinned" not in result.stdout
    assert "  rule: Never commit generated files.\n    /pin Never commit generated files." in result.stdout
    assert "No pins." in result.stdout
