"""The session's task list: the model keeps it with one tool that sets the whole list (``set_tasks``), the user
with ``/tasks``; every request's instructions carry it verbatim, so no summary can lose it.

The rules of a list are shared by the tool, ``/tasks`` and an imported session (``store.tasks.checked_items``):
plain one-line text, no empty or repeated items, at most ``MAX_TASKS`` of ``MAX_TASK_CHARS`` each, a known
status; the tool and ``/tasks`` also keep a list within the ``tasks_budget_tokens`` setting. Done tasks older
than ``tasks_keep_done_hours`` leave the list (``in_force``); the saved history keeps them.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field
from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.toolsets import FunctionToolset

from co_cli.deps import CoDeps, Task
from co_cli.errors import CoError
from co_cli.store import tasks as task_rows
from co_cli.text_tokens import estimate_text_tokens
from co_cli.vocabulary import TaskStatus

SET_TASKS_RETRIES = 3
"""How many corrected calls the model gets after a refused list before the turn fails."""

_MARKS: dict[str, str] = {"pending": "[ ]", "in_progress": "[~]", "done": "[x]"}
_WORDS: dict[str, str] = {"pending": "pending", "in_progress": "in progress", "done": "done"}
SECTION_HEADING = "## Task list"


def status_word(status: str) -> str:
    return _WORDS.get(status, status)


def in_force(tasks: Sequence[Task], now: float, keep_done_hours: float) -> list[Task]:
    """The list without the done tasks that have been done for longer than ``keep_done_hours``."""
    cutoff = now - keep_done_hours * 3600
    return [task for task in tasks if task.status != "done" or task.updated_at >= cutoff]


def open_count(tasks: Sequence[Task]) -> int:
    return sum(task.status != "done" for task in tasks)


def task_lines(tasks: Sequence[Task]) -> list[str]:
    """``1. [x] text`` lines, numbered as ``/tasks`` numbers them."""
    return [f"{n}. {_MARKS.get(task.status, '[ ]')} {task.text}" for n, task in enumerate(tasks, 1)]


def _section(lines: Sequence[str], left_out: int) -> str:
    tail = f"\n({left_out} more tasks not shown: the list is over its token budget)" if left_out else ""
    return (
        f"{SECTION_HEADING}\nThe session's task list, kept outside the conversation (no summary drops it); "
        "[ ] pending, [~] in progress, [x] done. Work from it, and keep it current with set_tasks (the whole "
        "list each time) when you start, finish, add or drop a task.\n" + "\n".join(lines) + tail
    )


def tasks_section(tasks: Sequence[Task], budget_tokens: int) -> str:
    """The list for the instructions ('' when empty). A list over ``budget_tokens`` (the budget was lowered
    after it was made) is cut: done tasks go first, then the last ones, and a line says how many are left out."""
    if not tasks:
        return ""
    kept = list(tasks)
    text = _section(task_lines(kept), 0)
    while kept and estimate_text_tokens(text) > budget_tokens:
        done = [i for i, task in enumerate(kept) if task.status == "done"]
        kept.pop(done[0] if done else -1)
        text = _section(task_lines(kept), len(tasks) - len(kept))
    return text


def section_tokens(tasks: Sequence[Task]) -> int:
    """Tokens the whole list takes in every request's instructions."""
    return estimate_text_tokens(_section(task_lines(tasks), 0)) if tasks else 0


def over_budget(tasks: Sequence[Task], budget_tokens: int) -> str | None:
    """A warning when the list takes more than ``budget_tokens`` (then part of it is not sent), else None."""
    tokens = section_tokens(tasks)
    if tokens <= budget_tokens:
        return None
    return (
        f"the task list takes ~{tokens:,} tokens, over its budget of {budget_tokens:,} (tasks_budget_tokens): "
        "some tasks are not sent to the model"
    )


def checked_items(items: Sequence[tuple[str, TaskStatus]], budget_tokens: int) -> list[tuple[str, TaskStatus]]:
    """The items with their text cleaned, or CoError saying what is wrong with the list (one line, numbered as
    the list is): the rules every list keeps (``store.tasks.checked_items``), and ``budget_tokens``."""
    cleaned = task_rows.checked_items(items)
    tokens = section_tokens([Task(text, status, 0.0, 0.0) for text, status in cleaned])
    if tokens > budget_tokens:
        raise CoError(
            f"the task list would take ~{tokens:,} tokens of every request, over its budget of {budget_tokens:,}; "
            "shorten or drop tasks"
        )
    return cleaned


def updated_list(
    old: Sequence[Task], items: Sequence[tuple[str, TaskStatus]], now: float, budget_tokens: int
) -> list[Task]:
    """The list ``items`` make, checked (CoError), each task that was already on ``old`` keeping when it was
    created, and when its status changed unless it changed now."""
    before = {task.text.casefold(): task for task in old}
    tasks: list[Task] = []
    for text, status in checked_items(items, budget_tokens):
        previous = before.get(text.casefold())
        created = previous.created_at if previous else now
        changed = previous.updated_at if previous and previous.status == status else now
        tasks.append(Task(text, status, created, changed))
    return tasks


def describe_list(tasks: Sequence[Task]) -> str:
    """'3 tasks: 1 done, 1 in progress, 1 pending' (or 'the list is empty')."""
    if not tasks:
        return "the list is empty"
    counts = [(word, sum(task.status == status for task in tasks)) for status, word in _WORDS.items()]
    shown = ", ".join(f"{count} {word}" for word, count in counts if count)
    return f"{len(tasks)} task{'s' if len(tasks) != 1 else ''}: {shown}"


# --- the tool ----------------------------------------------------------------------------------------------


class TaskItem(BaseModel):
    text: str = Field(description="The task, one short line of plain text.")
    status: TaskStatus = Field("pending", description="pending, in_progress or done.")


def set_tasks(ctx: RunContext[CoDeps], tasks: list[TaskItem]) -> str:
    """Set the session's task list: the WHOLE list, in order (a task left out is removed; [] clears it). Keep
    one for work of several steps, mark a task in_progress when you start it and done when it is finished. The
    list is shown to you in every request, and to the user.

    Args:
        tasks: every task of the list, in order.
    """
    deps = ctx.deps
    state = deps.state
    current = in_force(state.tasks, deps.clock(), deps.settings.tasks_keep_done_hours)
    try:
        new = updated_list(
            current, [(item.text, item.status) for item in tasks], deps.clock(), deps.settings.tasks_budget_tokens
        )
    except CoError as exc:
        raise ModelRetry(f"task list not saved: {exc.message}") from None
    state.tasks = new
    return f"Task list saved ({describe_list(new)})."


TASK_TOOL_NAMES = ("set_tasks",)


def build_tasks_toolset() -> FunctionToolset[CoDeps]:
    toolset = FunctionToolset[CoDeps](id="co-tasks")
    toolset.add_function(set_tasks, retries=SET_TASKS_RETRIES)
    return toolset
