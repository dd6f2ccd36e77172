"""`co serve` through the official `openai` client: a real server subprocess, co's model the scripted server."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from co_cli.project_trust import allow_command
from co_cli.store import Store
from co_cli.synthetic import failure_of
from tests.support.scripted_server import Error, ScriptedServer, Text, ToolCalls, last_user_text
from tests.support.serve_process import ServeProcess, serve_env

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, model: ScriptedServer) -> Iterator[ServeProcess]:
    root = tmp_path_factory.mktemp("serve")
    work = root / "work"
    work.mkdir()
    (work / "AGENTS.md").write_text("Project rule: answers about birds name the pelican first.\n")
    env = serve_env(dict(os.environ), root / "data", root / "config", model.base_url)
    with ServeProcess(env, work) as process:
        yield process


def _db(served: ServeProcess) -> Path:
    return Path(served.env["CO_CLI_DATA_DIR"]) / "co-cli.db"


def _request_with(model: ScriptedServer, text: str) -> list[str]:
    """The texts of the last chat request the model server got whose user messages hold ``text``."""
    for request in reversed(model.chat_requests):
        if any(text in t for t in request.texts("user")):
            return request.texts()
    raise AssertionError(f"no request held {text!r}")


def test_models_lists_the_configured_model(served: ServeProcess) -> None:
    models = served.client().models.list()
    assert [m.id for m in models.data] == ["scripted"]


def test_plain_answer_runs_a_turn_of_a_new_saved_session(served: ServeProcess, model: ScriptedServer) -> None:
    raw = served.client().chat.completions.with_raw_response.create(
        model="scripted", messages=[{"role": "user", "content": "plain question about herons"}]
    )
    answer = raw.parse()
    assert answer.choices[0].message.content == "echo: plain question about herons"
    assert answer.choices[0].finish_reason == "stop"
    assert answer.usage is not None and answer.usage.prompt_tokens > 0
    session_id = raw.headers["x-co-session"]
    sent = _request_with(model, "plain question about herons")
    assert any("name the pelican first" in text for text in sent), "the instructions file of the server's cwd"
    with Store.open(_db(served), reads_only=True) as store:
        info = store.sessions.get(session_id)
        assert info.origin == "serve" and info.message_count == 2
        assert store.usage.totals([session_id])[session_id].tokens > 0


def test_streamed_answer_arrives_in_chunks(served: ServeProcess, model: ScriptedServer) -> None:
    model.script(Text("a streamed answer in several small pieces", chunk_size=5))
    stream = served.client().chat.completions.create(
        model="scripted",
        messages=[{"role": "user", "content": "stream please"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    deltas = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert "".join(deltas) == "a streamed answer in several small pieces"
    assert len(deltas) > 3
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_wrong_or_missing_token_is_401(served: ServeProcess) -> None:
    with pytest.raises(openai.AuthenticationError) as wrong:
        served.client(api_key="not-the-token").models.list()
    assert wrong.value.status_code == 401
    assert wrong.value.body == {"message": "wrong token", "type": "authentication_error", "code": "invalid_api_key"}
    missing = httpx.post(f"{served.url}/v1/chat/completions", json={"messages": []})
    assert missing.status_code == 401 and missing.json()["error"]["code"] == "invalid_api_key"


def test_a_client_resending_its_history_continues_one_session(served: ServeProcess) -> None:
    client = served.client()
    history = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "first words about egrets"}]
    first = client.chat.completions.with_raw_response.create(model="scripted", messages=history)
    reply = first.parse().choices[0].message.content
    history += [{"role": "assistant", "content": reply}, {"role": "user", "content": "second words about egrets"}]
    second = client.chat.completions.with_raw_response.create(model="scripted", messages=history)
    session_id = first.headers["x-co-session"]
    assert second.headers["x-co-session"] == session_id
    history += [{"role": "assistant", "content": second.parse().choices[0].message.content}]
    history += [{"role": "user", "content": "third, streamed"}]
    with client.chat.completions.with_streaming_response.create(
        model="scripted", messages=history, stream=True
    ) as third:
        assert third.headers["x-co-session"] == session_id
        list(third.parse())
    with Store.open(_db(served), reads_only=True) as store:
        assert store.sessions.get(session_id).message_count == 6


def test_the_session_header_pins_a_session_by_prefix(served: ServeProcess, model: ScriptedServer) -> None:
    client = served.client()
    first = client.chat.completions.with_raw_response.create(
        model="scripted", messages=[{"role": "user", "content": "remember the word ibis"}]
    )
    session_id = first.headers["x-co-session"]
    again = client.chat.completions.with_raw_response.create(
        model="scripted",
        messages=[{"role": "user", "content": "which word?"}],
        extra_headers={"X-Co-Session": session_id[:12]},
    )
    assert again.headers["x-co-session"] == session_id
    sent = _request_with(model, "which word?")
    assert "remember the word ibis" in sent, "the session's history went to the model"
    with pytest.raises(openai.NotFoundError) as unknown:
        client.chat.completions.create(
            model="scripted", messages=[{"role": "user", "content": "x"}], extra_headers={"X-Co-Session": "ffffffff00"}
        )
    assert unknown.value.body["code"] == "session_not_found"


def test_the_system_message_is_added_to_co_s_instructions(served: ServeProcess, model: ScriptedServer) -> None:
    served.client().chat.completions.create(
        model="scripted",
        messages=[{"role": "system", "content": "Answer in haiku."}, {"role": "user", "content": "about storks"}],
    )
    sent = _request_with(model, "about storks")
    assert any("Answer in haiku." in text for text in sent)
    assert any("name the pelican first" in text for text in sent), "co's instructions and the client's, together"


def test_memories_are_retrieved_into_the_request(served: ServeProcess, model: ScriptedServer) -> None:
    added = served.co("memory", "add", "The user's heron sanctuary is in Camargue")
    assert added.returncode == 0, added.stderr
    served.client().chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "where is my heron sanctuary?"}]
    )
    sent = _request_with(model, "where is my heron sanctuary?")
    assert any("Camargue" in text for text in sent if "where is my heron" not in text)


def test_served_sessions_are_listed_with_their_origin_and_resume_in_the_terminal(
    served: ServeProcess, model: ScriptedServer
) -> None:
    raw = served.client().chat.completions.with_raw_response.create(
        model="scripted", messages=[{"role": "user", "content": "a flamingo fact"}]
    )
    session_id = raw.headers["x-co-session"]
    listed = served.co("sessions", "list", "--json")
    origins = {row["id"]: row["origin"] for row in json.loads(listed.stdout)}
    assert origins[session_id] == "serve"
    table = served.co("sessions", "list")
    assert any(session_id in line and "via serve" in line for line in table.stdout.splitlines()), table.stdout
    assert "started via serve" in served.co("sessions", "show", session_id).stdout
    resumed = served.co("chat", "--resume", session_id[:10], "-p", "and one more flamingo fact")
    assert resumed.returncode == 0, resumed.stderr
    assert "echo: and one more flamingo fact" in resumed.stdout
    assert "a flamingo fact" in _request_with(model, "and one more flamingo fact")


def test_a_session_open_in_a_terminal_is_not_written(served: ServeProcess) -> None:
    client = served.client()
    raw = client.chat.completions.with_raw_response.create(
        model="scripted", messages=[{"role": "user", "content": "a crane question"}]
    )
    session_id = raw.headers["x-co-session"]
    # A whole `co -p` turn (its start-up included: seconds on a busy machine); the lock is free again after.
    holder = served.co("chat", "--resume", session_id, "-p", "hold", timeout=60)
    assert holder.returncode == 0
    script = (
        "import sys, time\nfrom co_cli.store import Store\n"
        f"s = Store.open({str(_db(served))!r})\ns.locks.acquire({session_id!r})\nprint('held', flush=True)\n"
        "sys.stdin.readline()\n"
    )
    import subprocess
    import sys

    lock = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert lock.stdout is not None and lock.stdout.readline().strip() == "held"
        with pytest.raises(openai.ConflictError) as busy:
            client.chat.completions.create(
                model="scripted",
                messages=[{"role": "user", "content": "write now"}],
                extra_headers={"X-Co-Session": session_id},
            )
        assert busy.value.body["code"] == "session_busy"
    finally:
        lock.communicate("\n", timeout=10)
    with Store.open(_db(served), reads_only=True) as store:
        assert store.sessions.get(session_id).message_count == 4  # nothing of the refused request
    after = client.chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "now?"}], extra_headers={"X-Co-Session": session_id}
    )
    assert after.choices[0].message.content == "echo: now?"


@pytest.mark.parametrize("stream", [False, True])
def test_a_terminal_taking_a_session_over_mid_turn_wins(
    served: ServeProcess, model: ScriptedServer, stream: bool
) -> None:
    """`co chat --resume <id> --force` while the server is answering in that session: the server's commit is
    refused, so its answer never lands after the terminal's turn, and its client gets 409 (or, streamed, an error
    event after what arrived) instead of a 200. The server's prompt stays, closed as cut off by the terminal."""
    client = served.client()
    first = f"une question sur le héron ({'stream' if stream else 'whole'})"
    raw = client.chat.completions.with_raw_response.create(
        model="scripted", messages=[{"role": "user", "content": first}]
    )
    session_id = raw.headers["x-co-session"]
    slow = f"サギについて詳しく ({'stream' if stream else 'whole'})"
    answer = f"the server's answer about herons ({stream})"
    asked, release = threading.Event(), threading.Event()

    def hold_the_answer(request: dict[str, Any]) -> Text | None:
        if last_user_text(request) != slow:
            return None
        asked.set()  # the server's turn is under way: its prompt is saved, the model is thinking
        release.wait(90)
        return Text(answer)

    model.responder = hold_the_answer
    body = {"model": "scripted", "stream": stream, "messages": [{"role": "user", "content": slow}]}
    got: dict[str, Any] = {}

    def ask() -> None:
        headers = {"Authorization": f"Bearer {served.token}", "X-Co-Session": session_id}
        with httpx.stream(
            "POST", f"{served.url}/v1/chat/completions", json=body, headers=headers, timeout=120
        ) as response:
            got["status"] = response.status_code
            got["body"] = "".join(response.iter_text())

    asking = threading.Thread(target=ask)
    asking.start()
    try:
        assert asked.wait(60), "the server never asked the model"
        taken = served.co("chat", "--resume", session_id, "--force", "-p", "Пока сервер думает: вопрос из терминала")
        assert taken.returncode == 0, taken.stderr
        assert taken.stdout.strip() == "echo: Пока сервер думает: вопрос из терминала"
    finally:
        release.set()
        asking.join(120)
        model.responder = None
    if stream:
        assert got["status"] == 200  # sent before the turn ran; the end of the stream says what happened
        events = [line.removeprefix("data: ") for line in got["body"].splitlines() if line.startswith("data: ")]
        error = json.loads(events[-1])["error"]
        assert error["code"] == "session_taken_over" and "[DONE]" not in events
    else:
        assert got["status"] == 409
        error = json.loads(got["body"])["error"]
        assert error["code"] == "session_taken_over" and error["type"] == "conflict_error"
    assert f"session {session_id} was taken over" in error["message"] and "not saved" in error["message"]
    with Store.open(_db(served), reads_only=True) as store:
        saved = [(m.kind, m.status, m.text) for m in store.messages.transcript(session_id)]
    assert saved == [
        ("user", "ok", first),
        ("assistant", "ok", f"echo: {first}"),
        ("user", "cancelled", slow),  # the server's prompt stays, closed as cut off
        ("assistant", "cancelled", "[interrupted by the user]"),
        ("user", "ok", "Пока сервер думает: вопрос из терминала"),
        ("assistant", "ok", "echo: Пока сервер думает: вопрос из терминала"),
    ]
    after = client.chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "and now?"}], extra_headers={"X-Co-Session": session_id}
    )
    assert after.choices[0].message.content == "echo: and now?"
    sent = _request_with(model, "and now?")
    assert slow in sent and answer not in sent  # the server's conversation was rebuilt from what was saved


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{not json", 400, "invalid_json"),
        (b"[" * 100_000 + b"]" * 100_000, 400, "invalid_json"),
        (b"\xff\xfe", 400, "invalid_json"),
        (b"[1, 2]", 400, "invalid_request"),
        (json.dumps({"messages": "hello"}).encode(), 400, "invalid_value"),
        (json.dumps({"messages": [{"role": "user", "content": 5}]}).encode(), 400, "invalid_value"),
        (json.dumps({"messages": []}).encode(), 400, "invalid_value"),
        (json.dumps({"messages": [{"role": "assistant", "content": "hi"}]}).encode(), 400, "invalid_value"),
        (json.dumps({"messages": [{"role": "user", "content": "x"}], "stream": "yes"}).encode(), 400, "invalid_value"),
        (
            json.dumps({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}).encode(),
            400,
            "unsupported_parameter",
        ),
        (
            json.dumps({"model": "anthropic:claude-nope", "messages": [{"role": "user", "content": "x"}]}).encode(),
            404,
            "model_not_found",
        ),
    ],
)
def test_bad_requests_get_openai_errors(served: ServeProcess, body: bytes, status: int, code: str) -> None:
    answer = httpx.post(
        f"{served.url}/v1/chat/completions",
        content=body,
        headers={"Authorization": f"Bearer {served.token}", "Content-Type": "application/json"},
    )
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["code"] == code and error["message"] and error["type"]
    assert "Traceback" not in answer.text


def test_unknown_routes_methods_and_oversized_bodies(served: ServeProcess) -> None:
    headers = {"Authorization": f"Bearer {served.token}"}
    assert httpx.get(f"{served.url}/v1/nothing", headers=headers).json()["error"]["code"] == "not_found"
    wrong_method = httpx.get(f"{served.url}/v1/chat/completions", headers=headers)
    assert wrong_method.status_code == 405 and wrong_method.json()["error"]["code"] == "method_not_allowed"
    huge = b'{"messages": [{"role": "user", "content": "' + b"x" * 9_000_000 + b'"}]}'
    too_big = httpx.post(f"{served.url}/v1/chat/completions", content=huge, headers=headers)
    assert too_big.status_code == 413 and too_big.json()["error"]["code"] == "request_too_large"


def test_a_client_gone_mid_stream_leaves_the_turn_saved_cut_off(served: ServeProcess, model: ScriptedServer) -> None:
    model.script(Text("slow words " * 40, chunk_size=6, delay=0.05))
    body = {"model": "scripted", "stream": True, "messages": [{"role": "user", "content": "a slow answer please"}]}
    with httpx.stream(
        "POST",
        f"{served.url}/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {served.token}"},
    ) as response:
        session_id = response.headers["x-co-session"]
        for line in response.iter_lines():
            if "slow" in line:
                break  # one piece of the answer, then the client goes away
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with Store.open(_db(served), reads_only=True) as store:
            saved = store.messages.transcript(session_id)
        if len(saved) == 2:
            break
        time.sleep(0.1)
    assert [m.kind for m in saved] == ["user", "assistant"]
    assert saved[1].status == "cancelled" and "slow" in saved[1].text
    assert len(saved[1].text) < len("slow words " * 40)
    after = served.client().chat.completions.create(
        model="scripted",
        messages=[{"role": "user", "content": "still there?"}],
        extra_headers={"X-Co-Session": session_id},
    )
    assert after.choices[0].message.content == "echo: still there?"


def test_tools_that_change_nothing_run_and_the_others_are_refused(served: ServeProcess, model: ScriptedServer) -> None:
    (served.cwd / "notes.txt").write_text("the grebe nests on water\n")
    # a command rule the user keeps lets `touch` run without the question in the terminal, not through the server
    allow_command(Path(served.env["CO_CLI_CONFIG_DIR"]), served.cwd, "touch")
    model.script(
        ToolCalls(
            [
                ("read_file", {"path": "notes.txt"}),
                ("run_shell", {"command": "touch made-by-the-model"}),
                ("write_file", {"path": "written-by-the-model", "content": "x"}),
                ("edit_file", {"path": "notes.txt", "old_string": "grebe", "new_string": "duck"}),
            ]
        ),
        Text("read it; the command was not run"),
    )
    answer = served.client().chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "read my notes and touch a file"}]
    )
    assert answer.choices[0].message.content == "read it; the command was not run"
    after_tools = _request_with(model, "read my notes and touch a file")
    assert any("the grebe nests on water" in text for text in after_tools)
    assert sum("co serve cannot ask for it" in text for text in after_tools) == 3
    assert not (served.cwd / "made-by-the-model").exists()
    assert not (served.cwd / "written-by-the-model").exists()
    assert (served.cwd / "notes.txt").read_text() == "the grebe nests on water\n"


def test_a_failing_model_is_a_502_and_a_failed_turn(served: ServeProcess, model: ScriptedServer) -> None:
    client = served.client(max_retries=0)
    model.script(Error(500, "the upstream broke", should_retry=False))
    with pytest.raises(openai.APIStatusError) as failed:
        client.chat.completions.create(model="co", messages=[{"role": "user", "content": "will this fail"}])
    assert failed.value.status_code == 502 and failed.value.body["code"] == "upstream_error"
    message = failed.value.body["message"]  # a client cannot type /retry: it is told what works for it
    assert message.endswith("the upstream broke); send the request again") and "/" not in message.split(")")[-1]
    model.script(Error(500, "the upstream broke again", should_retry=False))
    stream = client.chat.completions.create(
        model="co", messages=[{"role": "user", "content": "will this fail, streamed"}], stream=True
    )
    with pytest.raises(openai.APIError, match="the upstream broke again"):
        list(stream)
    session_id = failed.value.response.headers["x-co-session"]
    with Store.open(_db(served), reads_only=True) as store:
        assert [m.status for m in store.messages.transcript(session_id)] == ["failed"]


def test_a_conversation_begun_elsewhere_becomes_a_new_session_whole(
    served: ServeProcess, model: ScriptedServer
) -> None:
    history = [
        {"role": "user", "content": "begun elsewhere: what eats krill?"},
        {"role": "assistant", "content": "Whales and penguins, mostly."},
        {"role": "user", "content": "and which penguins?"},
    ]
    client = served.client()
    raw = client.chat.completions.with_raw_response.create(model="scripted", messages=history)
    session_id = raw.headers["x-co-session"]
    sent = _request_with(model, "and which penguins?")
    assert "begun elsewhere: what eats krill?" in sent and "Whales and penguins, mostly." in sent
    with Store.open(_db(served), reads_only=True) as store:
        info = store.sessions.get(session_id)
        assert info.message_count == 4 and info.title == "begun elsewhere: what eats krill?"
    history += [{"role": "assistant", "content": raw.parse().choices[0].message.content}]
    history += [{"role": "user", "content": "and where?"}]
    again = client.chat.completions.with_raw_response.create(model="scripted", messages=history)
    assert again.headers["x-co-session"] == session_id


def test_context_governance_trims_what_is_sent_upstream(served: ServeProcess, model: ScriptedServer) -> None:
    (served.cwd / "big.txt").write_text("".join(f"line {i} of the heron census\n" for i in range(400)))
    model.script(ToolCalls([("read_file", {"path": "big.txt"})]), Text("read the census"))
    client = served.client()
    raw = client.chat.completions.with_raw_response.create(
        model="scripted", messages=[{"role": "user", "content": "read the census file"}]
    )
    session_id = raw.headers["x-co-session"]
    client.chat.completions.create(
        model="scripted",
        messages=[{"role": "user", "content": "and now a later question"}],
        extra_headers={"X-Co-Session": session_id},
    )

    def census(prompt: str) -> str:
        """The tool output as the last request answering ``prompt`` carried it."""
        request = next(r for r in reversed(model.chat_requests) if r.texts("user")[-1:] == [prompt])
        return next(text for text in request.texts("tool") if "of the heron census" in text)

    in_its_turn = census("read the census file")
    later = census("and now a later question")
    assert "line 399 of the heron census" in in_its_turn
    assert len(later) < len(in_its_turn) and len(later) <= 2200  # tool_output_trim_chars (2000) and its note


def test_an_answer_at_the_output_limit_says_length_and_its_conversation_continues(
    served: ServeProcess, model: ScriptedServer
) -> None:
    model.script(Text("an answer that stops at the lim", finish_reason="length"))
    client = served.client()
    history = [{"role": "user", "content": "a long answer about albatrosses"}]
    raw = client.chat.completions.with_raw_response.create(model="scripted", messages=history)
    answer = raw.parse().choices[0]
    assert (answer.message.content, answer.finish_reason) == ("an answer that stops at the lim", "length")
    history += [{"role": "assistant", "content": answer.message.content}, {"role": "user", "content": "go on"}]
    again = client.chat.completions.with_raw_response.create(model="scripted", messages=history)
    assert again.headers["x-co-session"] == raw.headers["x-co-session"]


def test_a_client_s_retries_of_a_failed_request_continue_the_session_it_made(
    served: ServeProcess, model: ScriptedServer
) -> None:
    client = served.client()  # the SDK's default: a 502 is tried twice more
    model.script(Error(500, "overloaded"), Error(500, "still overloaded"), Text("Egrets nest in colonies."))
    first = [{"role": "user", "content": "where do egrets nest, retried?"}]
    raw = client.chat.completions.with_raw_response.create(model="scripted", messages=first)
    assert raw.parse().choices[0].message.content == "Egrets nest in colonies."
    session_id = raw.headers["x-co-session"]
    with Store.open(_db(served), reads_only=True) as store:
        assert store.search.sessions_with_prompt("where do egrets nest, retried?") == [session_id], "one session"
        saved = store.messages.transcript(session_id)
        assert [(m.kind, m.status) for m in saved] == [("user", "failed")] * 2 + [("user", "ok"), ("assistant", "ok")]
        assert "overloaded" in (failure_of(saved[0].message) or "")
    # The conversation as the client has it (the prompt once, the answer it got) continues that session, and a
    # retried request of a conversation in progress stays in it too.
    later = [*first, {"role": "assistant", "content": "Egrets nest in colonies."}]
    later.append({"role": "user", "content": "and herons, retried?"})
    model.script(Error(500, "overloaded"), Text("Herons too."))
    again = client.chat.completions.with_raw_response.create(model="scripted", messages=later)
    assert again.headers["x-co-session"] == session_id and again.parse().choices[0].message.content == "Herons too."
    with Store.open(_db(served), reads_only=True) as store:
        assert store.sessions.get(session_id).message_count == 7
    # A request that fails every time it is tried leaves one session, each try a failed turn of it.
    model.script(*[Error(500, "down")] * 3)
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "never answered"}])
    with Store.open(_db(served), reads_only=True) as store:
        (failed,) = store.search.sessions_with_prompt("never answered")
        assert [m.status for m in store.messages.transcript(failed)] == ["failed"] * 3


def test_a_streaming_answer_stops_as_esc_stops_it_in_the_terminal(served: ServeProcess, model: ScriptedServer) -> None:
    model.script(Text("long words " * 60, chunk_size=6, delay=0.05))
    auth = {"Authorization": f"Bearer {served.token}"}
    body = {"model": "scripted", "stream": True, "messages": [{"role": "user", "content": "a long answer to stop"}]}
    events: list[str] = []
    with httpx.stream("POST", f"{served.url}/v1/chat/completions", json=body, headers=auth, timeout=30) as response:
        session_id = response.headers["x-co-session"]
        lines = response.iter_lines()
        for line in lines:
            if "long" in line:
                break  # part of the answer has arrived
        stopped = httpx.post(f"{served.url}/api/sessions/{session_id[:10]}/stop", headers=auth, timeout=30)
        assert stopped.status_code == 200 and stopped.json() == {"stopped": True}
        events = [line for line in lines if line.startswith("data:")]
    # The stop answers once the turn is saved: cancelled, the answer so far kept and marked interrupted.
    with Store.open(_db(served), reads_only=True) as store:
        saved = store.messages.transcript(session_id)
    assert [(m.kind, m.status) for m in saved] == [("user", "cancelled"), ("assistant", "cancelled")]
    assert saved[1].text.startswith("long") and saved[1].text.endswith("[interrupted by the user]")
    assert json.loads(events[-1].removeprefix("data: "))["error"]["code"] == "cancelled"
    again = httpx.post(f"{served.url}/api/sessions/{session_id}/stop", headers=auth)
    assert again.json() == {"stopped": False}, "nothing runs there any more"
    assert httpx.post(f"{served.url}/api/sessions/ffffffffff/stop", headers=auth).status_code == 404
    assert httpx.post(f"{served.url}/api/sessions/{session_id}/stop").status_code == 401


def test_sessions_are_renamed_moved_to_the_trash_and_restored(served: ServeProcess) -> None:
    client = httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {served.token}"})
    raw = served.client().chat.completions.with_raw_response.create(
        model="scripted", messages=[{"role": "user", "content": "a session to tidy away"}]
    )
    session_id = raw.headers["x-co-session"]
    renamed = client.patch(f"/api/sessions/{session_id[:10]}", json={"title": "  Tidy\nme  "})
    assert renamed.status_code == 200 and renamed.json()["title"] == "Tidy me"
    assert client.patch(f"/api/sessions/{session_id}", json={"title": " "}).status_code == 400
    assert client.patch(f"/api/sessions/{session_id}", json={"title": 3}).status_code == 400
    with Store.open(_db(served)) as store:
        store.locks.acquire(session_id)  # open in a terminal
        try:
            busy = client.delete(f"/api/sessions/{session_id}")
            assert busy.status_code == 409 and "is open in another co process" in busy.json()["error"]["message"]
        finally:
            store.locks.release(session_id)
    trashed = client.delete(f"/api/sessions/{session_id}")
    assert trashed.status_code == 200 and trashed.json()["id"] == session_id
    assert session_id not in [s["id"] for s in client.get("/api/sessions").json()["sessions"]]
    assert client.get(f"/api/sessions/{session_id}").status_code == 404
    in_trash = client.get("/api/trash").json()["sessions"]
    assert in_trash[0]["id"] == session_id and in_trash[0]["title"] == "Tidy me" and in_trash[0]["deleted_at"] > 0
    assert session_id[:8] in served.co("sessions", "trash").stdout, "the same trash as the terminal's"
    restored = client.post(f"/api/trash/{session_id[:10]}/restore")
    assert restored.status_code == 200 and restored.json()["message_count"] == 2
    assert session_id in [s["id"] for s in client.get("/api/sessions").json()["sessions"]]
    assert client.post(f"/api/trash/{session_id}/restore").status_code == 404, "no longer in the trash"
    assert client.delete("/api/sessions/ffffffffff").status_code == 404
