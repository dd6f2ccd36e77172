"""The session's task list as the user keeps it: ``/tasks`` lists it; ``add``, ``done``, ``drop`` and ``clear``
change it (the model keeps the same list with its set_tasks tool; every request carries it)."""

from __future__ import annotations

from co_cli.terminal.commands.registry import CommandHost, command
from co_cli.terminal_text import printable_line

USAGE = "usage: /tasks [add <text> | done <n> | drop <n> | clear]"


@command("tasks", "[add <text> | done <n> | drop <n> | clear]", "the session's task list (every request carries it)")
async def _tasks(host: CommandHost, arg: str) -> None:
    word, _, rest = arg.strip().partition(" ")
    rest = rest.strip()
    tasks = host.conv.tasks
    if not word:
        _list(host)
    elif word == "add" and rest:
        task = tasks.add(rest)
        host.info(f"Added task {len(tasks)}: {printable_line(task.text)}")
    elif word in ("done", "drop") and rest.isdigit():
        if word == "done":
            host.info(f"Done: {printable_line(tasks.done(int(rest)).text)}")
        else:
            host.info(f"Dropped: {printable_line(tasks.drop(int(rest)).text)}")
    elif word == "clear" and not rest:
        count = tasks.clear()
        host.info(f"Cleared {count} task{'s' if count != 1 else ''}." if count else "The task list is empty already.")
    else:
        host.error(USAGE)


def _list(host: CommandHost) -> None:
    from co_cli.tools.tasks import describe_list, task_lines

    tasks = host.conv.tasks
    listed = tasks.all()
    if not listed:
        host.info("No tasks. /tasks add <text> adds one; the model keeps the list too, for work of several steps.")
        return
    host.info(f"Tasks ({describe_list(listed)}; [ ] pending, [~] in progress, [x] done):")
    for line in task_lines(listed):  # each on one line: a task's text cannot start a line of its own
        host.info(f"  {printable_line(line)}")
    warning = tasks.warning()
    if warning is not None:
        host.note(f"Warning: {warning}")
