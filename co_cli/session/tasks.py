"""The session's task list as the user keeps it (``/tasks``): list, add, mark done, drop, clear. Numbered from 1
as ``/tasks`` lists them. The model keeps the same list with its ``set_tasks`` tool (saved with its turn);
each change the user makes is saved at once."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from co_cli.config import Settings
from co_cli.deps import SessionState, Task
from co_cli.errors import CoError
from co_cli.session.recorder import Recorder
from co_cli.store.tasks import StoredTask, clean_task_text
from co_cli.tools.tasks import in_force, open_count, over_budget, updated_list
from co_cli.vocabulary import TASK_STATUSES, TaskStatus


def from_stored(items: Sequence[StoredTask]) -> list[Task]:
    """Saved items as tasks (an unknown status reads as pending)."""
    return [
        Task(item.text, item.status if item.status in TASK_STATUSES else "pending", item.created_at, item.updated_at)  # type: ignore[arg-type]
        for item in items
    ]


class Tasks:
    def __init__(
        self,
        state: SessionState,
        recorder: Recorder,
        settings: Settings,
        clock: Callable[[], float],
        on_change: Callable[[], None],
    ) -> None:
        self.state = state
        self.recorder = recorder
        self.settings = settings
        self.clock = clock
        self.on_change = on_change
        """Called when the list changes (the instructions every request carries changed)."""

    def all(self) -> list[Task]:
        """The list in force: done tasks older than ``tasks_keep_done_hours`` have left it."""
        return in_force(self.state.tasks, self.clock(), self.settings.tasks_keep_done_hours)

    def __len__(self) -> int:
        return len(self.all())

    @property
    def open_count(self) -> int:
        return open_count(self.all())

    def warning(self) -> str | None:
        """Why part of the list is not sent to the model (it is over its token budget), else None."""
        return over_budget(self.all(), self.settings.tasks_budget_tokens)

    def add(self, text: str) -> Task:
        """Add a pending task at the end of the list."""
        text = clean_task_text(text)
        for number, task in enumerate(self.all(), 1):
            if task.text.casefold() == text.casefold():
                raise CoError(f"already on the list as task {number}: {task.text}")
        tasks = self._change([*self._items(), (text, "pending")])
        return tasks[-1]

    def done(self, number: int) -> Task:
        """Mark task ``number`` done."""
        self._task(number)
        items = self._items()
        items[number - 1] = (items[number - 1][0], "done")
        return self._change(items)[number - 1]

    def drop(self, number: int) -> Task:
        """Remove task ``number`` from the list."""
        task = self._task(number)
        items = self._items()
        del items[number - 1]
        self._change(items)
        return task

    def clear(self) -> int:
        """Empty the list; how many tasks it held."""
        count = len(self.all())
        if count:
            self._change([])
        return count

    def set(self, tasks: list[Task], *, notify: bool = True) -> None:
        self.state.tasks = tasks
        if notify:
            self.on_change()

    def _task(self, number: int) -> Task:
        tasks = self.all()
        if not 1 <= number <= len(tasks):
            raise CoError(f"no task {number}: /tasks lists {len(tasks)}")
        return tasks[number - 1]

    def _items(self) -> list[tuple[str, TaskStatus]]:
        return [(task.text, task.status) for task in self.all()]

    def _change(self, items: list[tuple[str, TaskStatus]]) -> list[Task]:
        tasks = updated_list(self.all(), items, self.clock(), self.settings.tasks_budget_tokens)
        self.recorder.save_tasks(tasks)
        self.set(tasks)
        return tasks
