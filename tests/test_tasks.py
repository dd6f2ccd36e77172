"""The session's task list, in process: the model's set_tasks tool (saved with its turn, refused lists sent back
for correction), /tasks, the list in every request's instructions (through compaction), resume, fork, fork-at
and rewind, pruning of old done tasks with a fake clock, and how the list is shown (co sessions show, exports)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, RetryPromptPart
from pydantic_ai.models.function import AgentInfo
from typer.testing import CliRunner

from co_cli.config import load_settings
from co_cli.context.repair import repair_orphans
from co_cli.deps import Task
from co_cli.errors import CoError
from co_cli.session.branches import fork_at
from co_cli.store import Store
from co_cli.store.export import export_document, export_json, export_json_line, export_markdown, import_json
from co_cli.store.merge import merge_import
from co_cli.store.tasks import MAX_TASK_CHARS, MAX_TASKS, StoredTask
from co_cli.terminal.sessions_cli import app
from co_cli.tools.tasks import SECTION_HEADING, tasks_section
from tests.support.chat_app import ChatRun
from tests.support.summariser import scripted_summariser, typed_summary
from tests.support.turn_core import Core, core, run, streaming_model

__all__ = ["core"]

pytestmark = pytest.mark.allow_model_requests

HOUR = 3600.0


class Script:
    """A model that answers each prompt with the next planned task list (a set_tasks call), then "ok"; it keeps
    the instructions of every request it was sent."""

    def __init__(self, *plans: list[dict[str, Any]] | str) -> None:
        self.plans = list(plans)
        self.instructions: list[str] = []
        self.retries: list[str] = []

    def step(self, messages: list[ModelMessage]) -> str | tuple[str, dict[str, Any]]:
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        self.instructions.append(last.instructions or "")
        refused = [str(p.content) for p in last.parts if _refused(p)]
        self.retries += refused
        prompted = any(p.part_kind == "user-prompt" for p in last.parts)
        if self.plans and (prompted or refused):
            plan = self.plans.pop(0)
            return ("set_tasks", json.loads(plan)) if isinstance(plan, str) else ("set_tasks", {"tasks": plan})
        return "ok"

    def model(self) -> Any:
        return streaming_model(self.step)


def _refused(part: Any) -> bool:
    """A tool call sent back to the model for correction (its result is the error)."""
    return isinstance(part, RetryPromptPart) or getattr(part, "outcome", "success") not in ("success", None)


def plan(*items: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"text": text, "status": status} for text, status in items]


def section(instructions: str) -> str:
    return instructions[instructions.index(SECTION_HEADING) :] if SECTION_HEADING in instructions else ""


def listed(core: Core, session_id: str) -> list[tuple[str, str]]:
    latest = core.store.tasks.latest(session_id)
    return [(t.text, t.status) for t in latest.items] if latest else []


def test_the_model_sets_the_list_it_is_saved_with_the_turn_and_rides_in_every_request(core: Core) -> None:
    script = Script(plan(("read the code", "in_progress"), ("fix the bug", "pending")))
    conv = core.conversation(script.model())
    assert run(conv, "fix it").status == "ok"
    assert conv.session is not None
    # Saved with the turn: the snapshot stands after the turn's last message, set by the model.
    snapshot = core.store.tasks.latest(conv.session.id)
    assert snapshot is not None and snapshot.source == "model"
    assert snapshot.seq == core.store.sessions.get(conv.session.id).message_count - 1
    assert listed(core, conv.session.id) == [("read the code", "in_progress"), ("fix the bug", "pending")]
    # The request after the tool call already carries it, and so does every later request.
    assert section(script.instructions[0]) == ""
    assert "1. [~] read the code\n2. [ ] fix the bug" in section(script.instructions[1])
    run(conv, "and now?")
    assert "1. [~] read the code\n2. [ ] fix the bug" in section(script.instructions[-1])


def test_a_turn_that_does_not_change_the_list_saves_no_snapshot(core: Core) -> None:
    conv = core.conversation(Script(plan(("one", "pending"))).model())
    run(conv, "plan")
    run(conv, "chat")
    assert conv.session is not None
    assert len(core.store.tasks.history(conv.session.id)) == 1


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (plan(("same", "pending"), ("Same", "done")), "task 2 repeats task 1: Same"),
        (plan(("  ", "pending")), "task 1 is empty"),
        (plan(("x" * (MAX_TASK_CHARS + 1), "pending")), f"more than {MAX_TASK_CHARS}"),
        (plan(*[(f"t{i}", "pending") for i in range(MAX_TASKS + 1)]), f"at most {MAX_TASKS} tasks"),
        ('{"tasks": [{"text": "a", "status": "someday"}]}', "status"),
        ('{"tasks": "not a list"}', "tasks"),
    ],
)
def test_a_refused_list_is_a_tool_error_the_model_corrects(core: Core, bad: Any, error: str) -> None:
    script = Script(bad, plan(("fixed", "pending")))
    conv = core.conversation(script.model())
    assert run(conv, "plan").status == "ok"
    assert script.retries and error in script.retries[0], script.retries
    assert conv.session is not None
    assert listed(core, conv.session.id) == [("fixed", "pending")]
    stats = core.store.tool_calls.by_tool(conv.session.id)["set_tasks"]
    assert (stats.calls, stats.failed, stats.denied) == (2, 1, 0)


def test_a_list_over_the_token_budget_is_refused(core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CO_CLI_TASKS_BUDGET_TOKENS", "100")
    core.loaded = load_settings(cwd=core.cwd)
    script = Script(plan(*[(f"task number {i} " + "words " * 10, "pending") for i in range(5)]), plan(("a", "pending")))
    conv = core.conversation(script.model())
    run(conv, "plan")
    assert "over its budget of 100" in script.retries[0]
    assert [t.text for t in conv.tasks.all()] == ["a"]


def test_a_list_over_a_lowered_budget_is_cut_with_a_warning(core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    chat = ChatRun(core, Script().model())
    for i in range(6):
        chat.send(f"/tasks add task number {i} " + "words " * 12)
    monkeypatch.setattr(chat.conv.deps.settings, "tasks_budget_tokens", 150)  # lowered after the list was made
    printed = chat.send("/tasks")
    assert "Warning: the task list takes ~" in printed.err and "over its budget of 150" in printed.err
    cut = tasks_section(chat.conv.tasks.all(), 150)
    assert "more tasks not shown: the list is over its token budget" in cut
    assert "1. [ ] task number 0" in cut and "task number 5" not in cut


def test_slash_tasks_add_done_drop_clear_and_bad_input(core: Core) -> None:
    chat = ChatRun(core, Script().model())
    printed = chat.send(
        "/tasks",
        "/tasks add write the \x1b[2J\x1b]0;pwned\x07docs\t\x00now",
        "/tasks add ship it",
        "/tasks add SHIP IT",
        "/tasks done 1",
        "/tasks done 7",
        "/tasks drop x",
        "/tasks frobnicate",
        "/tasks",
    )
    assert printed.lines[:4] == [
        "No tasks. /tasks add <text> adds one; the model keeps the list too, for work of several steps.",
        "Added task 1: write the docs now",
        "Added task 2: ship it",
        "Done: write the docs now",
    ]
    assert printed.lines[4:] == [
        "Tasks (2 tasks: 1 pending, 1 done; [ ] pending, [~] in progress, [x] done):",
        "  1. [x] write the docs now",
        "  2. [ ] ship it",
    ]
    assert printed.err.splitlines() == [
        "error: already on the list as task 2: ship it",
        "error: no task 7: /tasks lists 2",
        "error: usage: /tasks [add <text> | done <n> | drop <n> | clear]",
        "error: usage: /tasks [add <text> | done <n> | drop <n> | clear]",
    ]
    # Each change is saved at once, by the user, as the session stands.
    assert chat.conv.session is not None
    history = core.store.tasks.history(chat.conv.session.id)
    assert [s.source for s in history] == ["user"] * 3 and history[-1].seq == -1
    cleared = chat.send("/tasks drop 2", "/tasks clear", "/tasks clear")
    assert cleared.lines == ["Dropped: ship it", "Cleared 1 task.", "The task list is empty already."]
    assert listed(core, chat.conv.session.id) == []


def test_compaction_never_drops_the_list(core: Core) -> None:
    script = Script(plan(("migrate the schema", "in_progress"), ("update the docs", "pending")))
    prompts: list[str] = []

    def summary_step(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompts.append(str(messages[-1].parts[-1].content))  # type: ignore[union-attr]
        return typed_summary(info, "SUMMARY: the user asked for a migration.")

    chat = ChatRun(core, script.model(), summarizer=scripted_summariser(summary_step, model_name="summariser"))
    chat.send("plan the migration " + "padding words " * 30, *[f"turn {i} " + "padding words " * 30 for i in range(3)])
    printed = chat.send("/compact", "what next?")
    assert printed.code == 0, printed.err
    assert any("kept outside the conversation" in p and "do not copy the list" in p for p in prompts)
    assert "1. [~] migrate the schema\n2. [ ] update the docs" in section(script.instructions[-1])
    context = chat.send("/context").out
    assert "tasks " in context and ", tasks 0," not in context


def test_resume_restores_the_list(core: Core) -> None:
    conv = core.conversation(Script(plan(("alpha", "done"), ("beta", "pending"))).model())
    run(conv, "plan")
    assert conv.session is not None
    conv.release()
    resumed = core.conversation(Script().model())
    resumed.load(core.store.sessions.get(conv.session.id))
    assert [(t.text, t.status) for t in resumed.tasks.all()] == [("alpha", "done"), ("beta", "pending")]
    assert resumed.tasks.all() == conv.tasks.all()  # the same times too


def test_fork_and_fork_at_copy_the_list_as_it_stood(core: Core) -> None:
    script = Script(plan(("first", "in_progress")), plan(("first", "done"), ("second", "in_progress")))
    conv = core.conversation(script.model())
    run(conv, "one")
    assert conv.session is not None
    end_of_first = core.store.sessions.get(conv.session.id).message_count - 1
    run(conv, "two")
    source = conv.session.id
    whole = fork_at(core.store, source, files_root=None)
    assert listed(core, whole.id) == [("first", "done"), ("second", "in_progress")]
    earlier = fork_at(core.store, source, end_of_first, files_root=None)
    assert listed(core, earlier.id) == [("first", "in_progress")]
    before_any = fork_at(core.store, source, -1, files_root=None)  # an empty conversation: no list yet
    assert core.store.tasks.latest(before_any.id) is None
    # The live conversation continues in the fork with that list.
    conv.branches.fork(end_of_first)
    assert [(t.text, t.status) for t in conv.tasks.all()] == [("first", "in_progress")]
    assert listed(core, source) == [("first", "done"), ("second", "in_progress")]  # the original is untouched


def test_rewind_goes_back_to_the_list_before_the_last_prompt(core: Core) -> None:
    chat = ChatRun(core, Script(plan(("first", "pending")), plan(("first", "done"))).model())
    chat.send("one", "/tasks add by hand", "two")
    assert [(t.text, t.status) for t in chat.conv.tasks.all()] == [("first", "done")]
    printed = chat.send("/rewind")
    assert printed.code == 0, printed.err
    assert [(t.text, t.status) for t in chat.conv.tasks.all()] == [("first", "pending"), ("by hand", "pending")]


def test_done_tasks_leave_the_list_after_the_keep_time_but_stay_in_the_history(core: Core) -> None:
    now = [1_000_000.0]
    script = Script(plan(("old work", "done"), ("current work", "in_progress")))
    conv = core.conversation(script.model())
    conv.deps.clock = lambda: now[0]
    run(conv, "plan")
    assert "old work" in section(script.instructions[-1])
    now[0] += 23 * HOUR
    run(conv, "later")
    assert "1. [x] old work" in section(script.instructions[-1])
    now[0] += 2 * HOUR
    run(conv, "much later")
    assert "old work" not in section(script.instructions[-1])
    assert "1. [~] current work" in section(script.instructions[-1])
    assert [t.text for t in conv.tasks.all()] == ["current work"]
    # /tasks numbers the list in force; a change saves it without the pruned task.
    conv.tasks.done(1)
    assert conv.session is not None
    assert listed(core, conv.session.id) == [("current work", "done")]
    every = [task.text for snapshot in core.store.tasks.history(conv.session.id) for task in snapshot.items]
    assert "old work" in every


def test_sessions_show_and_exports_show_the_list_and_its_history(core: Core) -> None:
    script = Script(plan(("gone soon", "pending"), ("*bold* [link](x)", "in_progress")))
    conv = core.conversation(script.model())
    run(conv, "plan")
    conv.tasks.drop(1)
    conv.tasks.add("later \x1b[31mred")
    assert conv.session is not None
    session_id = conv.session.id
    conv.release()
    shown = CliRunner().invoke(app, ["show", session_id])
    assert shown.exit_code == 0, shown.output
    out = shown.output
    assert "tasks 2 tasks: 2 pending · set by the user" not in out  # one in progress
    assert "tasks 2 tasks: 1 pending, 1 in progress · set by the user" in out
    assert "  1. [~] *bold* [link](x)\n" in out and "  2. [ ] later red\n" in out
    assert "earlier tasks (no longer on the list):\n  gone soon (pending, " in out
    assert "\x1b" not in out
    assert "tools set_tasks 1 (" in out
    markdown = export_markdown(core.store, session_id)
    assert "## Tasks\n\nSet by the user at " in markdown
    assert "- [ ] \\*bold\\* \\[link\\](x) (in progress)\n- [ ] later red" in markdown
    assert "Earlier tasks (no longer on the list):\n\n- [ ] gone soon" in markdown
    document = export_document(core.store, session_id)
    lists = document["task_lists"]
    assert isinstance(lists, list) and [s["source"] for s in lists] == ["model", "user", "user"]
    assert lists[-1]["items"][1]["text"] == "later red"


def _item(text: str, status: str = "pending") -> dict[str, Any]:
    return {"text": text, "status": status, "created_at": 1.0, "updated_at": 2.0}


@pytest.mark.parametrize(
    "items",
    [
        [_item(f"step {i}") for i in range(3000)],
        [_item(f"шаг {i}") for i in range(MAX_TASKS + 1)],
        [_item("a", "someday")],
        [_item("a"), _item("b", "DONE")],
        [_item("écrire la doc"), _item("relire", "blocked")],
        [_item("  \n\t ")],
        [_item("\x1b[31m\x07")],
        [_item("Ünïcode Straße"), _item("ünïcode STRASSE")],
        [_item("日本語のタスク"), _item("別のタスク"), _item("日本語のタスク")],
        [_item("я" * (MAX_TASK_CHARS + 1))],
        [_item("字" * (MAX_TASK_CHARS + 50))],
    ],
)
def test_an_import_refuses_a_list_the_task_tools_would_refuse(core: Core, items: list[dict[str, Any]]) -> None:
    """The same rules as set_tasks and /tasks (one check, ``store.tasks.checked_items``): the import names the
    list and says what the tool would have said, in one line, and nothing is imported."""
    from co_cli.tools.tasks import checked_items

    conv = core.conversation(Script(plan(("one", "pending"))).model())
    run(conv, "first")
    assert conv.session is not None
    with pytest.raises(CoError) as refused_by_the_tool:
        checked_items([(item["text"], item["status"]) for item in items], 10**9)
    document = export_document(core.store, conv.session.id)
    document["task_lists"] = [{"seq": 0, "created_at": 1.0, "source": "model", "items": items}]
    text = json.dumps(document)
    before = core.store.sessions.count()
    with pytest.raises(CoError) as refused:
        import_json(core.store, text, repair_orphans)
    assert refused.value.message == f"not a co session export: task_lists[0]: {refused_by_the_tool.value.message}"
    assert "\n" not in refused.value.message
    core.store.sessions.delete(conv.session.id)
    with pytest.raises(CoError, match=r"task_lists\[0\]: "):
        merge_import(core.store, text, repair_orphans)
    assert core.store.sessions.count() == before - 1


def test_an_imported_list_over_this_cos_budget_is_kept_with_a_warning(
    core: Core, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The budget is a setting (larger, maybe, where the session was made): the list is imported and the import
    says that part of it is not sent, as /tasks says of a list over a lowered budget."""
    conv = core.conversation(Script(plan(("one", "pending"))).model())
    run(conv, "first")
    assert conv.session is not None
    document = export_document(core.store, conv.session.id)
    long = [_item(f"tâche {i} " + "mot " * 60) for i in range(MAX_TASKS)]
    document["task_lists"] = [{"seq": 0, "created_at": 1.0, "source": "model", "items": long}]
    path = tmp_path / "over.json"
    path.write_text(json.dumps(document))
    monkeypatch.setenv("CO_CLI_DATA_DIR", str(tmp_path / "elsewhere"))
    result = CliRunner().invoke(app, ["import", str(path)])
    assert result.exit_code == 0, result.output
    assert f"warning: {conv.session.id}: the task list takes ~" in result.output
    assert "over its budget of 1,000 (tasks_budget_tokens)" in result.output
    with Store.open(tmp_path / "elsewhere" / core.loaded.paths.db.name) as other:
        assert len(other.tasks.latest(conv.session.id).items) == MAX_TASKS  # type: ignore[union-attr]


FORGING_TASKS = [
    # (text as an older co, a damaged row or a hand-edited database may hold it, what must not be printed)
    ("pay the invoice \u202egnp.exe\u202c today", "\u202e"),
    ("\u2066מסמך\u2069 review \u2067right\u2069 \u2068first\u2069", "\u2066"),
    ("write the notes\n2. [x] deploy to production", "\n2. [x]"),
    ("ship it\r\n  3. [x] audit done", "\n  3. [x]"),
    ("split\u2028line\u2029here", "\u2028"),
    ("tab\tand \x1b[2Jclear\x0bvertical", "\x1b"),
]


def _forged_session(core: Core) -> str:
    conv = core.conversation(Script().model())
    run(conv, "first")
    assert conv.session is not None
    items = [StoredTask(text, "pending", 1.0, 1.0) for text, _ in FORGING_TASKS]
    core.store.tasks.save(conv.session.id, 1, items, "user")
    conv.release()
    return conv.session.id


def test_sessions_show_prints_each_task_on_one_line_without_bidi_or_controls(core: Core) -> None:
    session_id = _forged_session(core)
    shown = CliRunner().invoke(app, ["show", session_id])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    task_lines = [line for line in lines if line.startswith("  ") and ". [ ] " in line]
    assert [line.split(".")[0].strip() for line in task_lines] == [str(n) for n in range(1, len(FORGING_TASKS) + 1)]
    assert not any(line.lstrip().startswith(("2. [x]", "3. [x]", "line", "here")) for line in lines)
    for _, hidden in FORGING_TASKS:
        assert hidden not in shown.output
    for control in ("\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069"):
        assert control not in shown.output
    assert "  1. [ ] pay the invoice gnp.exe today" in lines


def test_slash_tasks_prints_each_task_on_one_line_without_bidi_or_controls(core: Core) -> None:
    session_id = _forged_session(core)
    chat = ChatRun(core, Script().model())
    chat.conv.load(core.store.sessions.get(session_id))
    printed = chat.send("/tasks", "/tasks done 1", "/tasks drop 3")
    listed_lines = [line for line in printed.lines if line.startswith("  ")]
    assert len(listed_lines) == len(FORGING_TASKS)
    assert [line.split(".")[0].strip() for line in listed_lines] == [str(n) for n in range(1, len(FORGING_TASKS) + 1)]
    for _, hidden in FORGING_TASKS:
        assert hidden not in printed.out
    assert "  2. [ ] מסמך review right first" in printed.lines
    assert "Done: pay the invoice gnp.exe today" in printed.lines
    assert "Dropped: write the notes 2. [x] deploy to production" in printed.lines


def test_a_new_conversation_starts_with_no_tasks(core: Core) -> None:
    chat = ChatRun(core, Script(plan(("a", "pending"))).model())
    chat.send("plan")
    assert len(chat.conv.tasks) == 1
    chat.send("/new")
    assert chat.conv.tasks.all() == [] and "open task" not in chat.app.toolbar()


def test_toolbar_counts_open_tasks(core: Core) -> None:
    chat = ChatRun(core, Script(plan(("a", "done"), ("b", "pending"), ("c", "in_progress"))).model())
    assert "open task" not in chat.app.toolbar()
    chat.send("plan")
    assert chat.app.toolbar().endswith("│ 2 open tasks ")
    chat.send("/tasks done 3")
    assert chat.app.toolbar().endswith("│ 1 open task ")


def test_tasks_section_marks_each_status() -> None:
    tasks = [Task("a", "pending", 0, 0), Task("b", "in_progress", 0, 0), Task("c", "done", 0, 0)]
    text = tasks_section(tasks, 1000)
    assert text.startswith(SECTION_HEADING) and text.endswith("1. [ ] a\n2. [~] b\n3. [x] c")
    assert tasks_section([], 1000) == ""


def test_an_exported_list_comes_back_on_import_and_merge(core: Core, tmp_path: Path) -> None:
    script = Script(plan(("one", "in_progress")), plan(("one", "done"), ("two", "pending")))
    conv = core.conversation(script.model())
    run(conv, "first")
    assert conv.session is not None
    session_id = conv.session.id
    first_half = export_json_line(core.store, session_id)
    run(conv, "second")
    whole = export_json(core.store, session_id)
    with Store.open(tmp_path / "other.db") as other:
        imported = import_json(other, whole, repair_orphans)
        assert [s.source for s in other.tasks.history(imported.id)] == ["model", "model"]
        assert [(t.text, t.status) for t in other.tasks.latest(imported.id).items] == [  # type: ignore[union-attr]
            ("one", "done"),
            ("two", "pending"),
        ]
    with Store.open(tmp_path / "third.db") as third:
        merge_import(third, first_half, repair_orphans)
        assert [(t.text, t.status) for t in third.tasks.latest(session_id).items] == [("one", "in_progress")]  # type: ignore[union-attr]
        report = merge_import(third, whole, repair_orphans)
        assert report.appended and report.appended[0][0].id == session_id
        assert len(third.tasks.history(session_id)) == 2  # the version it had is not added twice
        assert third.tasks.latest(session_id).items[-1].text == "two"  # type: ignore[union-attr]


def test_an_export_with_a_bad_task_list_is_refused_in_one_line(core: Core) -> None:
    conv = core.conversation(Script(plan(("one", "pending"))).model())
    run(conv, "first")
    assert conv.session is not None
    document = export_document(core.store, conv.session.id)
    document["task_lists"][0]["items"][0]["status"] = "someday"  # type: ignore[index]
    with pytest.raises(CoError, match=r"task_lists\[0\]: task 1 has unknown status 'someday'"):
        import_json(core.store, json.dumps(document), repair_orphans)
    document["task_lists"] = [{"seq": 99, "created_at": 1.0, "source": "user", "items": []}]
    with pytest.raises(CoError, match=r"task_lists\[0\]\.seq is out of range \(99\)"):
        import_json(core.store, json.dumps(document), repair_orphans)
