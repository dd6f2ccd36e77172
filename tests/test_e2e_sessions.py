"""End to end: session management through the real `co` program against the scripted server.

Sessions are seeded directly through ``Store`` where only their content matters (starting `co` costs
seconds); everything under test — resume, fork, list, search, delete, export, import, locking — goes through
the `co` binary. Runs that do not depend on each other are started at the same time.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.support.co_process import (
    CO_COMMAND,
    co_environment,
    ctrl_d,
    expect_prompt,
    run_co,
    send_line,
    spawn_co,
    transcript,
)
from tests.support.saved_sessions import (
    append_turn,
    assert_ok,
    assert_one_line_error,
    conversation,
    db_path,
    query,
    seed_session,
    session_row,
    stored_texts,
    tool_turn,
    turn,
)
from tests.support.scripted_server import JSON, RecordedRequest, ScriptedServer, Text, ToolCalls

pytestmark = pytest.mark.e2e

SECRET_KEY = "sk-canary-5e1f0a9c7d3b42e8"
Job = tuple[list[str], str | None]


# ----- helpers ---------------------------------------------------------------------------------------


def add_summary(db: Path, session_id: str, upto_seq: int, summary: str) -> None:
    """Record a compaction that replaced messages 0..upto_seq by ``summary`` (as /compact would)."""
    from co_cli.store import CompactionRecord, Store
    from co_cli.synthetic import ack_response, summary_request, summary_text

    text = summary_text(upto_seq + 1, summary, None)
    record = CompactionRecord(
        from_seq=0,
        upto_seq=upto_seq,
        summary=text,
        focus="",
        trigger="manual",
        tokens_before=100,
        tokens_after=20,
        model="scripted",
        replacement=[summary_request(upto_seq + 1, summary), ack_response()],
    )
    with Store.open(db) as store:
        store.compactions.add(session_id, record)


def run_all(jobs: Sequence[Job], env: dict[str, str], cwd: Path, timeout: float = 60) -> list[Any]:
    """Run several ``co`` commands at the same time; their results in the order given."""
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = [pool.submit(run_co, args, env, cwd, stdin, timeout) for args, stdin in jobs]
        return [future.result() for future in futures]


def popen_co(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CO_COMMAND, *args],
        env=co_environment(env),
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def assert_well_formed(messages: list[JSON]) -> None:
    """User and assistant alternate, and every tool call is answered by its result before anything else."""
    body = [m for m in messages if m.get("role") != "system"]
    assert body and body[0]["role"] == "user", body
    i = 0
    while i < len(body):
        role = body[i]["role"]
        if role == "user":
            assert i + 1 == len(body) or body[i + 1]["role"] == "assistant", f"user not answered at {i}: {body}"
            i += 1
            continue
        assert role == "assistant", f"unexpected {role} at {i}: {body}"
        call_ids = [c["id"] for c in body[i].get("tool_calls") or []]
        i += 1
        if call_ids:
            results = []
            while i < len(body) and body[i]["role"] == "tool":
                results.append(body[i]["tool_call_id"])
                i += 1
            assert sorted(results) == sorted(call_ids), f"tool calls {call_ids} answered by {results}: {body}"
            assert i == len(body) or body[i]["role"] == "assistant", f"tool results not followed up: {body}"
        else:
            assert i == len(body) or body[i]["role"] == "user", f"assistant followed by {body[i]}: {body}"


def without_times(text: str) -> str:
    return re.sub(r"just now|\d+ min ago", "<time>", text)


# ----- 1. resume ------------------------------------------------------------------------------------


def test_continue_resumes_most_recently_updated(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    db = db_path(co_server_env)
    alpha = seed_session(db, turn("alpha opening question", "alpha first answer"))
    beta = seed_session(db, turn("beta opening question", "beta first answer"))
    append_turn(db, alpha, turn("alpha second question", "alpha second answer"))  # alpha: older but updated last

    result = run_co(["chat", "-c"], co_server_env, workdir, input="alpha follow-up\n")
    assert_ok(result)
    out, notes = result.stdout, result.stderr  # piped: the resume preview goes to stderr, answers to stdout
    assert f"Resumed {alpha} · alpha opening question · 4 messages · model scripted" in notes
    assert "you: alpha second question" in notes and "co: alpha second answer" in notes
    assert out == "echo: alpha follow-up\n"
    assert conversation(scripted_server.chat_requests[-1]) == [
        ("user", "alpha opening question"),
        ("assistant", "alpha first answer"),
        ("user", "alpha second question"),
        ("assistant", "alpha second answer"),
        ("user", "alpha follow-up"),
    ]
    assert [t[3] for t in stored_texts(db, alpha)][-2:] == ["alpha follow-up", "echo: alpha follow-up"]
    assert query(db, "SELECT count(*) FROM sessions") == [(2,)]

    # beta gets a turn and a compaction: now it is the latest, and bare --resume continues it from its summary
    append_turn(db, beta, turn("beta second question", "beta second answer"))
    add_summary(db, beta, upto_seq=1, summary="The user opened with a beta question.")
    result = run_co(["chat", "--resume"], co_server_env, workdir, input="beta follow-up\n")
    assert_ok(result)
    assert f"Resumed {beta} · beta opening question · 4 messages · 1 compaction · model scripted" in result.stderr
    sent = conversation(scripted_server.chat_requests[-1])
    assert sent[0][0] == "user" and sent[0][1].startswith("[Summary of 2 earlier messages]")
    assert "The user opened with a beta question." in sent[0][1]
    assert sent[2:] == [
        ("user", "beta second question"),
        ("assistant", "beta second answer"),
        ("user", "beta follow-up"),
    ]
    assert "beta first answer" not in str(sent)
    assert_well_formed(scripted_server.chat_requests[-1].messages)
    assert session_row(db, beta)["message_count"] == 6
    assert session_row(db, alpha)["message_count"] == 6


# ----- 2. fork --------------------------------------------------------------------------------------


def test_fork_keeps_the_original_and_both_continue(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    db = db_path(co_server_env)
    original = seed_session(db, turn("plan the garden", "plant tulips"), turn("and the pond?", "add koi"))
    show_before, list_before = run_all(
        [(["sessions", "show", original], None), (["sessions", "list", "--json"], None)], co_server_env, workdir
    )
    assert_ok(show_before)
    assert "plan the garden" in show_before.stdout and "add koi" in show_before.stdout

    by_flag, by_command = run_all(
        [
            (["chat", "--resume", original, "--fork", "-p", "fork by flag"], None),
            (["chat", "--lines", "--resume", original[:10]], "/fork\nfork by command\n"),
        ],
        co_server_env,
        workdir,
    )
    assert_ok(by_flag)
    assert_ok(by_command)
    assert "echo: fork by flag" in by_flag.stdout
    match = re.search(rf"Forked {original[:8]} -> ([0-9a-f]{{20}}); you are now in the fork\.", by_command.stdout)
    assert match, by_command.stdout
    fork_by_command = match.group(1)
    forks = {r[0]: r[1] for r in query(db, "SELECT id, title FROM sessions WHERE parent_id = ?", (original,))}
    assert len(forks) == 2 and fork_by_command in forks and original not in forks
    fork_by_flag = next(f for f in forks if f != fork_by_command)
    assert forks[fork_by_flag] == "plan the garden (fork)"
    for fork, prompt in ((fork_by_flag, "fork by flag"), (fork_by_command, "fork by command")):
        texts = [t[3] for t in stored_texts(db, fork)]
        assert texts == ["plan the garden", "plant tulips", "and the pond?", "add koi", prompt, f"echo: {prompt}"]
    for request in scripted_server.chat_requests:
        assert conversation(request)[:4] == [
            ("user", "plan the garden"),
            ("assistant", "plant tulips"),
            ("user", "and the pond?"),
            ("assistant", "add koi"),
        ]

    show_after, list_after = run_all(
        [(["sessions", "show", original], None), (["sessions", "list", "--json"], None)], co_server_env, workdir
    )
    assert_ok(show_after)
    assert without_times(show_after.stdout) == without_times(show_before.stdout)
    before = next(s for s in json.loads(list_before.stdout) if s["id"] == original)
    assert next(s for s in json.loads(list_after.stdout) if s["id"] == original) == before

    result = run_co(["chat", "--resume", original, "-p", "original goes on"], co_server_env, workdir)
    assert_ok(result)
    sent = conversation(scripted_server.chat_requests[-1])
    assert sent[4:] == [("user", "original goes on")]
    assert "fork by" not in str(sent)
    assert [t[3] for t in stored_texts(db, original)][4:] == ["original goes on", "echo: original goes on"]
    assert [t[3] for t in stored_texts(db, fork_by_flag)][-1] == "echo: fork by flag"


# ----- 3. list and search ---------------------------------------------------------------------------


def test_list_and_search_in_repl_and_cli(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    db = db_path(co_server_env)
    walrus = seed_session(db, turn("walruses gather on the ice floe", "they haul out in herds"))
    penguin = seed_session(db, turn("where do penguins breed", "on Antarctic coasts"))
    repl, listed, found, stemmed, no_hit, shown = run_all(
        [
            (["chat", "--lines"], "/sessions\n/sessions ice floe\n/sessions walrus penguins\n"),
            (["sessions", "list", "--json"], None),
            (["sessions", "search", "floe"], None),
            (["sessions", "search", "gathering"], None),
            (["sessions", "search", "floe penguins"], None),
            (["sessions", "show", penguin[:12]], None),
        ],
        co_server_env,
        workdir,
    )
    for result in (repl, listed, found, stemmed, no_hit, shown):
        assert_ok(result)

    # /sessions: one row per session (id, messages, model, title), the latest first
    listing, _, searched = repl.stdout.partition("Match")
    rows = [line.split() for line in listing.splitlines() if re.match(r"^[0-9a-f]{20} ", line)]
    assert [r[0] for r in rows] == [penguin, walrus]
    penguin_row = next(line for line in listing.splitlines() if line.startswith(penguin))
    assert re.search(r"\b2\s+scripted\s+where do penguins breed", penguin_row), penguin_row
    # /sessions <query>: the full-text hits (every term must match)
    assert walrus in searched and penguin not in searched and "ice floe" in searched
    assert "No sessions match 'walrus penguins'." in searched
    assert scripted_server.chat_requests == []
    assert query(db, "SELECT count(*) FROM sessions") == [(2,)]  # slash commands create no session

    data = json.loads(listed.stdout)
    assert [s["id"] for s in data] == [penguin, walrus]
    assert data[1]["title"] == "walruses gather on the ice floe" and data[1]["message_count"] == 2
    assert data[1]["model"] == "scripted" and data[1]["parent_id"] is None

    assert walrus in found.stdout and penguin not in found.stdout and "floe" in found.stdout
    assert walrus in stemmed.stdout and penguin not in stemmed.stdout  # stemming: "gathering" finds "gather"
    assert "No messages match 'floe penguins'." in no_hit.stdout

    assert shown.stdout.startswith("where do penguins breed")
    assert f"id {penguin}" in shown.stdout and "2 messages" in shown.stdout
    assert "You #0" in shown.stdout and "Assistant #1" in shown.stdout and "on Antarctic coasts" in shown.stdout


# ----- 4. delete ------------------------------------------------------------------------------------


def test_delete_in_repl_asks_and_moves_to_the_trash_cli_purges(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    db = db_path(co_server_env)
    active = seed_session(db, turn("active session talk", "active answer"))
    other = seed_session(db, turn("other session about otters", "otters answer"))
    doomed = seed_session(db, turn("doomed session mentions quokkas", "quokkas answer"))

    child = spawn_co(["chat", "--resume", active], env=co_server_env, cwd=workdir)
    try:
        out = expect_prompt(child)
        assert f"Resumed {active} · active session talk · 2 messages · model scripted" in out
        assert "you: active session talk" in out
        send_line(child, f"/delete {other[:14]}")
        child.expect(r"\[y/N\]")
        assert f"Move {other} (other session about otters) to the trash?" in transcript(child)
        send_line(child, "n")
        assert "Not deleted." in expect_prompt(child)
        assert query(db, "SELECT count(*) FROM sessions WHERE id = ?", (other,)) == [(1,)]

        send_line(child, f"/delete {other}")
        child.expect(r"\[y/N\]")
        send_line(child, "y")
        assert f"Moved {other} to the trash." in expect_prompt(child)
        assert query(db, "SELECT count(*) FROM messages WHERE session_id = ?", (other,)) == [(2,)]  # kept
        assert session_row(db, other)["deleted_at"] is not None

        send_line(child, f"/delete {active}")
        child.expect(r"\[y/N\]")
        send_line(child, "yes")
        assert f"Moved {active} to the trash. Started a new conversation." in expect_prompt(child)
        send_line(child, "a fresh start")
        assert "echo: a fresh start" in expect_prompt(child)
        ctrl_d(child)
        child.expect(pexpect.EOF, timeout=15)
    finally:
        if child.isalive():
            child.terminate(force=True)
    assert conversation(scripted_server.chat_requests[-1]) == [("user", "a fresh start")]
    titles = {r[0]: r[1] for r in query(db, "SELECT id, title FROM sessions WHERE deleted_at IS NULL")}
    assert active not in titles and other not in titles and doomed in titles
    assert "a fresh start" in titles.values()

    deleted = run_co(["sessions", "delete", doomed[:12], "--yes"], co_server_env, workdir)
    assert_ok(deleted)
    assert deleted.stdout.strip().startswith(f"moved {doomed} to the trash")
    assert_ok(run_co(["sessions", "purge", "--all", "--yes"], co_server_env, workdir))
    search, listed = run_all(
        [(["sessions", "search", "quokkas"], None), (["sessions", "list", "--json"], None)], co_server_env, workdir
    )
    assert_ok(search)
    assert "No messages match 'quokkas'." in search.stdout
    assert doomed not in listed.stdout and len(json.loads(listed.stdout)) == 1
    assert query(db, "SELECT count(*) FROM messages WHERE session_id IN (?, ?, ?)", (active, other, doomed)) == [(0,)]
    assert query(db, "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'quokkas OR otters'") == [(0,)]


# ----- 5. errors ------------------------------------------------------------------------------------


def test_ambiguous_prefix_unknown_id_and_corrupt_database(
    co_server_env: dict[str, str],
    workdir: Path,
    scripted_server: ScriptedServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = db_path(co_server_env)
    twins = iter(["0123456789ab00000001", "0123456789ab00000002"])
    monkeypatch.setattr("co_cli.store.sessions.new_session_id", lambda now=None: next(twins))
    first = seed_session(db, turn("twin one", "a"))
    second = seed_session(db, turn("twin two", "b"))
    monkeypatch.undo()
    prefix = os.path.commonprefix([first, second])

    corrupt_env = {**co_server_env, "CO_CLI_DATA_DIR": str(tmp_path / "corrupt-data")}
    corrupt = db_path(corrupt_env)
    corrupt.parent.mkdir()
    garbage = b"this is not an SQLite database\n" * 64 + bytes(range(256)) * 8
    corrupt.write_bytes(garbage)

    with ThreadPoolExecutor(2) as pool:
        on_good = pool.submit(
            run_all,
            [
                (["chat", "--resume", prefix, "-p", "hello"], None),
                (["sessions", "show", prefix], None),
                (["sessions", "delete", prefix, "--yes"], None),
                (["chat", "--resume", "0123456789abcdef", "-p", "hello"], None),
                (["sessions", "export", "fedcba"], None),
            ],
            co_server_env,
            workdir,
        )
        on_corrupt = pool.submit(
            run_all,
            [(["chat", "-p", "hello"], None), (["sessions", "list"], None), (["chat", "-c"], "hi\n")],
            corrupt_env,
            workdir,
        )
        results, broken = on_good.result(), on_corrupt.result()
    for result in results[:3]:
        assert_one_line_error(result, 4, "ambiguous", first, second, "twin one", "twin two")
    for result in results[3:]:
        assert_one_line_error(result, 4, "no session matches")
    for result in broken:
        assert_one_line_error(result, 3, str(corrupt), "corrupt")
    assert corrupt.read_bytes() == garbage
    assert sorted(p.name for p in corrupt.parent.iterdir()) == ["co-cli.db"]
    assert query(db, "SELECT count(*) FROM sessions") == [(2,)]
    assert query(db, "SELECT count(*) FROM messages") == [(4,)]
    assert scripted_server.chat_requests == []


# ----- 6. a session open in another co --------------------------------------------------------------


def test_session_open_elsewhere_is_refused_but_forkable(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    db = db_path(co_server_env)
    shared = seed_session(db, turn("shared session start", "shared answer"))
    holder = popen_co(["chat", "--resume", shared], co_server_env, workdir)
    try:
        deadline = time.monotonic() + 30
        while session_row(db, shared)["owner_pid"] != holder.pid:
            assert holder.poll() is None, holder.communicate()
            assert time.monotonic() < deadline, "the first co never opened the session"
            time.sleep(0.05)
        refused, forked, delete = run_all(
            [
                (["chat", "--resume", shared[:10], "-p", "second writer"], None),
                (["chat", "--resume", shared, "--fork", "-p", "in a copy"], None),
                (["sessions", "delete", shared, "--yes"], None),
            ],
            co_server_env,
            workdir,
        )
        out, err = holder.communicate("still here\n", timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert holder.returncode == 0, err
    assert "echo: still here" in out
    assert_one_line_error(refused, 5, shared, "open in another co process", f"pid {holder.pid}", "--fork")
    assert_one_line_error(delete, 5, "open in another co process")
    assert_ok(forked)
    assert forked.stdout.strip() == "echo: in a copy"
    assert "second writer" not in str([r.messages for r in scripted_server.chat_requests])
    assert [t[3] for t in stored_texts(db, shared)] == [
        "shared session start",
        "shared answer",
        "still here",
        "echo: still here",
    ]
    assert session_row(db, shared)["owner_pid"] is None
    assert query(db, "SELECT count(*) FROM sessions WHERE parent_id = ?", (shared,)) == [(1,)]


# ----- 7. concurrent writers ------------------------------------------------------------------------


def test_concurrent_writers_never_see_database_locked(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    db = db_path(co_server_env)
    lines = 4
    # three pairs at once; they also create and migrate the new database together
    jobs: list[Job] = [
        (["chat", "--lines"], "".join(f"writer {pair}-{w} line {n}\n" for n in range(lines)))
        for pair in range(3)
        for w in range(2)
    ]
    for result in run_all(jobs, co_server_env, workdir):
        assert_ok(result)
        assert "locked" not in (result.stdout + result.stderr).lower()
    sessions = query(db, "SELECT title, message_count FROM sessions ORDER BY title")
    assert sessions == [(f"writer {p}-{w} line 0", 2 * lines) for p in range(3) for w in range(2)]
    assert query(db, "SELECT count(*) FROM messages") == [(6 * 2 * lines,)]
    assert query(db, "PRAGMA integrity_check") == [("ok",)]
    assert len(scripted_server.chat_requests) == 6 * lines


# ----- 8. kill -9 during a turn ---------------------------------------------------------------------


@dataclass
class KilledTurn:
    db: Path
    session_id: str
    rows_after_kill: list[tuple[int, str, str, str]]
    integrity_after_kill: list[tuple[Any, ...]]
    resumed: Any
    killed_request: RecordedRequest
    next_request: RecordedRequest


def hermetic_env(root: Path, server: ScriptedServer) -> dict[str, str]:
    """Like the ``co_server_env`` fixture, for a module-scoped fixture."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith("CO_CLI_") or k.endswith("_API_KEY") or k in ("OPENAI_BASE_URL", "OLLAMA_BASE_URL"))
    }
    for name, sub in (("HOME", "home"), ("CO_CLI_DATA_DIR", "co-data"), ("CO_CLI_CONFIG_DIR", "co-config")):
        (root / sub).mkdir(parents=True, exist_ok=True)
        env[name] = str(root / sub)
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        env[name] = str(root / "home" / name.lower())
    env.update({"CO_CLI_BASE_URL": server.base_url, "CO_CLI_MODEL": "scripted", "CO_CLI_API_KEY": "test-key"})
    return env


AFTER_CRASH = ("user", "after the crash")


@pytest.fixture(scope="module")
def killed_turn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KilledTurn]:
    """A turn (a tool call, then a slowly streamed answer) killed with SIGKILL mid-stream, then resumed."""
    root = tmp_path_factory.mktemp("killed")
    workdir = root / "work"
    workdir.mkdir()
    (workdir / "notes.txt").write_text("some notes\n")
    with ScriptedServer() as server:
        env = hermetic_env(root, server)
        db = db_path(env)
        session_id = seed_session(db, tool_turn("what files are here?", "just notes.txt"))
        server.script(
            ToolCalls([("list_dir", {"path": "."})]),
            Text("a very slow answer " * 200, chunk_size=4, delay=0.02),
        )
        victim = popen_co(["chat", "--resume", session_id, "-p", "the killed prompt"], env, workdir)
        try:
            server.wait_for_requests(2, timeout=30)
            time.sleep(0.3)  # the answer is streaming now
            assert victim.poll() is None, victim.communicate()
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait(timeout=10)
        finally:
            if victim.poll() is None:
                victim.kill()
                victim.wait()
        assert victim.returncode == -signal.SIGKILL
        rows = stored_texts(db, session_id)
        integrity = query(db, "PRAGMA integrity_check")
        resumed = run_co(["chat", "-c", "-p", "after the crash"], env, workdir)
        killed_request = server.chat_requests[1]
        # The resumed turn's request (memory extraction may ask the model about the prompt after it).
        next_request = next(r for r in reversed(server.chat_requests) if conversation(r)[-1:] == [AFTER_CRASH])
        yield KilledTurn(db, session_id, rows, integrity, resumed, killed_request, next_request)


def test_kill_9_keeps_the_prompt_and_the_database(killed_turn: KilledTurn) -> None:
    assert killed_turn.integrity_after_kill == [("ok",)]
    seqs, kinds, statuses, texts = zip(*killed_turn.rows_after_kill, strict=True)
    assert texts[-1] == "the killed prompt" and kinds[-1] == "user"  # committed before the model was called
    assert seqs == tuple(range(len(seqs))) and len(seqs) == 5
    assert "a very slow answer" not in str(texts)
    assert_ok(killed_turn.resumed)
    assert killed_turn.resumed.stdout.strip() == "echo: after the crash"
    assert_well_formed(killed_turn.killed_request.messages)  # the seeded tool call and the new one, answered
    sent = killed_turn.next_request.messages
    assert [m for m in sent if m.get("role") == "tool"] and [m for m in sent if m.get("tool_calls")]
    tool_calls = [c["id"] for m in sent for c in m.get("tool_calls") or []]
    tool_results = [m["tool_call_id"] for m in sent if m.get("role") == "tool"]
    assert sorted(tool_calls) == sorted(tool_results)
    assert conversation(killed_turn.next_request)[-1] == AFTER_CRASH
    assert query(killed_turn.db, "PRAGMA integrity_check") == [("ok",)]
    final = [t[3] for t in stored_texts(killed_turn.db, killed_turn.session_id)]
    # The crash-closed turn's note is saved on resume, so every later reader sees the same transcript.
    assert final[4:] == ["the killed prompt", "[interrupted by the user]", "after the crash", "echo: after the crash"]


def test_kill_9_next_request_alternates_roles(killed_turn: KilledTurn) -> None:
    assert_well_formed(killed_turn.next_request.messages)


# ----- 9. export and import -------------------------------------------------------------------------


def test_export_delete_import_round_trip_without_the_key(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    env = {**co_server_env, "CO_CLI_API_KEY": SECRET_KEY}
    data_dir = Path(env["CO_CLI_DATA_DIR"])
    db = db_path(env)
    as_json, as_md = workdir / "session.json", workdir / "session.md"
    child = spawn_co(["chat"], env=env, cwd=workdir)
    try:
        expect_prompt(child)
        send_line(child, "remember the walrus named Wally")
        assert "echo: remember the walrus named Wally" in expect_prompt(child)
        send_line(child, "/new")  # leaves the session, so that it can be deleted
        assert "New conversation." in expect_prompt(child)
        ((sid,),) = query(db, "SELECT id FROM sessions")
        saved = session_row(db, sid)

        exported = run_all(
            [
                (["sessions", "export", sid, "--format", "json", "-o", str(as_json)], None),
                (["sessions", "export", sid[:10], "-o", str(as_md)], None),
            ],
            env,
            workdir,
        )
        for result in exported:
            assert_ok(result)
        assert_ok(run_co(["sessions", "delete", sid, "--yes"], env, workdir))
        assert_ok(run_co(["sessions", "purge", sid, "--yes"], env, workdir))
        assert query(db, "SELECT count(*) FROM sessions") == [(0,)]
        imported = run_co(["sessions", "import", str(as_json)], env, workdir)
        assert_ok(imported)
        assert imported.stdout.splitlines()[0] == f"imported {sid} (remember the walrus named Wally, 2 messages)"
        assert {k: v for k, v in session_row(db, sid).items() if k != "owner_since"} == {
            k: v for k, v in saved.items() if k != "owner_since"
        }

        send_line(child, f"/resume {sid[:8]}")
        assert f"Resumed {sid} · remember the walrus named Wally · 2 messages" in expect_prompt(child)
        send_line(child, "what was its name?")
        assert "echo: what was its name?" in expect_prompt(child)
        ctrl_d(child)
        child.expect(pexpect.EOF, timeout=15)
    finally:
        if child.isalive():
            child.terminate(force=True)
    assert scripted_server.chat_requests[-1].headers["authorization"] == f"Bearer {SECRET_KEY}"
    assert conversation(scripted_server.chat_requests[-1]) == [
        ("user", "remember the walrus named Wally"),
        ("assistant", "echo: remember the walrus named Wally"),
        ("user", "what was its name?"),
    ]
    assert [t[3] for t in stored_texts(db, sid)][2:] == ["what was its name?", "echo: what was its name?"]

    assert as_json.stat().st_mode & 0o777 == 0o600
    markdown = as_md.read_text()
    assert markdown.startswith("# remember the walrus named Wally")
    assert "### User · #0" in markdown and "### Assistant · #1" in markdown
    assert "\nremember the walrus named Wally\n" in markdown
    assert "\necho: remember the walrus named Wally\n" in markdown

    history = data_dir / "input_history"
    assert "remember the walrus named Wally" in history.read_text()
    checked = [as_json, as_md, *(p for p in data_dir.rglob("*") if p.is_file())]
    assert {db, history} <= set(checked)
    leaks = [str(p) for p in checked if SECRET_KEY.encode() in p.read_bytes()]
    assert leaks == []


# ----- 10. --no-save --------------------------------------------------------------------------------


def test_no_save_writes_nothing(co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer) -> None:
    data_dir = Path(co_server_env["CO_CLI_DATA_DIR"])
    result = run_co(
        ["chat", "--lines", "--no-save"], co_server_env, workdir, input="keep this private\nand this\n/sessions\n"
    )
    assert result.returncode == 1, result.stderr  # the /sessions line failed
    assert "echo: keep this private" in result.stdout and "echo: and this" in result.stdout
    assert "sessions are not being saved (--no-save)" in result.stderr
    assert ("user", "keep this private") in conversation(scripted_server.chat_requests[-1])
    assert list(data_dir.rglob("*")) == []
