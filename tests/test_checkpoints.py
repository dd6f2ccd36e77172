"""Checkpoints of the files co's edit tools change: kept before the write (a kill -9 between the two leaves the
old file and a harmless change), taken back to any point, copied by forks, kept in the trash until it is
emptied, exported as diffs, and taken back from the shell (`co sessions undo-files`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from co_cli.deps import CoDeps
from co_cli.session.checkpoints import files_at, take_back
from co_cli.session.recorder import Recorder
from co_cli.store.export import export_document, export_markdown
from co_cli.tools.edits import apply_plan, plan_edit, plan_write, write_atomically
from tests.support.co_process import REPO_ROOT, run_co
from tests.support.deps import ctx_for, make_deps


@pytest.fixture
def deps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CoDeps:
    for name in list(os.environ):
        if name.startswith("CO_CLI_"):
            monkeypatch.delenv(name)
    return make_deps(tmp_path)


def start_turn(deps: CoDeps, prompt: str, recorder: Recorder | None = None) -> Recorder:
    """A turn of a live session: its prompt saved, its changes kept by the recorder."""
    recorder = recorder or Recorder(deps.store, deps.state, deps.cwd, model_label=lambda: "test")
    deps.state.turn_seq = recorder.begin(prompt)
    deps.keep_file_change = recorder.file_change
    return recorder


def write(deps: CoDeps, path: str, content: str) -> None:
    assert apply_plan(ctx_for(deps, approved=True), plan_write(ctx_for(deps), path, content), "write_file")


def edit(deps: CoDeps, path: str, old: str, new: str) -> None:
    assert apply_plan(ctx_for(deps, approved=True), plan_edit(ctx_for(deps), path, old, new), "edit_file")


def three_turns(deps: CoDeps) -> str:
    """#0: new.txt created, a.txt edited; #1: a.txt edited, gone.txt replaced; #2: new.txt edited."""
    (deps.cwd / "a.txt").write_bytes(b"A0\r\n")
    (deps.cwd / "gone.txt").write_bytes(b"bye\n")
    recorder = start_turn(deps, "one")
    write(deps, "new.txt", "created\n")
    edit(deps, "a.txt", "A0", "A1")
    start_turn(deps, "two", recorder)
    edit(deps, "a.txt", "A1", "A2")
    write(deps, "gone.txt", "replaced\n")
    start_turn(deps, "three", recorder)
    edit(deps, "new.txt", "created", "changed")
    assert deps.state.session_id is not None
    return deps.state.session_id


def test_files_are_taken_back_to_each_point_byte_for_byte(deps: CoDeps) -> None:
    session_id = three_turns(deps)
    store, cwd = deps.store, deps.cwd
    assert [(f.path.name, f.action(), f.changed) for f in files_at(store, session_id, 1)] == [
        ("new.txt", "restore", False)
    ]
    take_back(files_at(store, session_id, 0))
    assert (cwd / "a.txt").read_bytes() == b"A1\r\n" and (cwd / "gone.txt").read_bytes() == b"bye\n"
    assert (cwd / "new.txt").read_bytes() == b"created\n"
    take_back(files_at(store, session_id, -1))
    assert (cwd / "a.txt").read_bytes() == b"A0\r\n" and not (cwd / "new.txt").exists()
    assert files_at(store, session_id, -1) == []
    # Back to the session's end (a fork of all of it), from a point co itself left: no question.
    ahead = files_at(store, session_id, None)
    assert {f.path.name: f.action() for f in ahead} == {
        "a.txt": "restore",
        "gone.txt": "restore",
        "new.txt": "recreate",
    }
    assert not any(f.changed for f in ahead)
    take_back(ahead)
    assert (cwd / "new.txt").read_bytes() == b"changed\n" and (cwd / "a.txt").read_bytes() == b"A2\r\n"


def test_a_file_the_user_changed_is_marked(deps: CoDeps) -> None:
    session_id = three_turns(deps)
    (deps.cwd / "a.txt").write_bytes(b"mine\n")
    (found,) = [f for f in files_at(deps.store, session_id, 0) if f.path.name == "a.txt"]
    assert found.changed and found.content == b"A1\r\n"


def test_forks_copy_the_changes_up_to_their_point_and_the_trash_keeps_them(deps: CoDeps) -> None:
    session_id = three_turns(deps)
    store = deps.store
    deps.store.locks.release(session_id)
    fork = store.fork(session_id, 0)
    assert [c.seq for c in store.file_changes.of_session(fork.id)] == [0, 0]
    store.trash.put(session_id)
    assert len(store.file_changes.of_session(session_id)) == 5
    store.trash.purge([session_id])
    assert store.file_changes.of_session(session_id) == []
    rows = store.file_changes.of_session(fork.id)
    assert [store.file_changes.content(row.after_hash) for row in rows] == [b"created\n", b"A1\r\n"]
    left = store.db.read("SELECT count(*) AS n FROM file_contents")[0]["n"]
    assert left == 3  # created, A0, A1: the contents only the purged session named are gone


def test_export_carries_the_diffs(deps: CoDeps) -> None:
    session_id = three_turns(deps)
    document = export_document(deps.store, session_id)
    changes = document["file_changes"]
    assert isinstance(changes, list) and len(changes) == 5
    assert changes[0]["tool"] == "write_file" and "+created" in changes[0]["diff"]
    assert "-A0" in changes[1]["diff"] and "+A1" in changes[1]["diff"]
    markdown = export_markdown(deps.store, session_id)
    assert "## Files changed" in markdown and "```diff" in markdown and "+replaced" in markdown


KILLED_MID_EDIT = """
import os, signal, sys
from pathlib import Path
from co_cli.session.recorder import Recorder
from co_cli.tools import edits
from tests.support.deps import ctx_for, make_deps

deps = make_deps(Path(sys.argv[1]))
(deps.cwd / "f.txt").write_bytes(b"old\\n")
recorder = Recorder(deps.store, deps.state, deps.cwd, model_label=lambda: "test")
deps.state.turn_seq = recorder.begin("change f")
deps.keep_file_change = recorder.file_change
plan = edits.plan_write(ctx_for(deps), "f.txt", "new\\n")
edits.os.replace = lambda *a: os.kill(os.getpid(), signal.SIGKILL)  # killed between the commit and the write
edits.apply_plan(ctx_for(deps, approved=True), plan, "write_file")
"""


def test_kill_between_the_checkpoint_and_the_write_leaves_the_old_file_and_a_harmless_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith("CO_CLI_"):
            monkeypatch.delenv(name)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    killed = subprocess.run([sys.executable, "-c", textwrap.dedent(KILLED_MID_EDIT), str(tmp_path)], env=env)
    assert killed.returncode == -signal.SIGKILL
    deps = make_deps(tmp_path)
    assert (deps.cwd / "f.txt").read_bytes() == b"old\n"
    (session,) = deps.store.sessions.list()
    (change,) = deps.store.file_changes.of_session(session.id)
    assert deps.store.file_changes.content(change.before_hash) == b"old\n"
    # Taking the turn back finds the file already where it is going; nothing is asked or written.
    assert files_at(deps.store, session.id, -1) == []
    # The next write of the file removes the temporary file the kill left beside it.
    (left,) = [p for p in deps.cwd.iterdir() if p.name != "f.txt"]
    os.utime(left, (0, 0))
    write_atomically(deps.cwd / "f.txt", b"later\n")
    assert [p.name for p in deps.cwd.iterdir()] == ["f.txt"]


def test_undo_files_from_the_shell(deps: CoDeps, co_env: dict[str, str]) -> None:
    session_id = three_turns(deps)
    deps.store.locks.release(session_id)
    (deps.cwd / "gone.txt").write_bytes(b"edited by hand\n")
    env = {**co_env, "CO_CLI_DATA_DIR": str(deps.paths.data_dir), "CO_CLI_CONFIG_DIR": str(deps.paths.config_dir)}
    result = run_co(["sessions", "undo-files", session_id, "--to", "0"], env=env, cwd=deps.cwd)
    assert result.returncode == 0, result.stderr
    assert "gone.txt was changed since co's edit: left as it is" in result.stdout
    assert (deps.cwd / "a.txt").read_bytes() == b"A1\r\n"
    assert (deps.cwd / "new.txt").read_bytes() == b"created\n"
    assert (deps.cwd / "gone.txt").read_bytes() == b"edited by hand\n"
    again = run_co(["sessions", "undo-files", session_id[:6], "--to", "2"], env=env, cwd=deps.cwd)
    assert "new.txt" not in again.stdout or "restored" in again.stdout
    shown = run_co(["sessions", "show", session_id], env=env, cwd=deps.cwd)
    assert "new.txt (created): #0 write_file, #2 edit_file" in shown.stdout
    exported = json.loads(run_co(["sessions", "export", session_id, "-f", "json"], env=env, cwd=deps.cwd).stdout)
    assert len(exported["file_changes"]) == 5
