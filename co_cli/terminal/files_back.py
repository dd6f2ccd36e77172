"""The question a rewind or a fork asks about the files co changed: take them back too (files and
conversation) or leave them (conversation only); and, for each file someone changed since co's edit, its own
question before it is overwritten. Used by /rewind, the picker's fork, `co chat --fork-at` and
`co sessions undo-files`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from co_cli.session.checkpoints import FileBack, files_at, take_back
from co_cli.store import Store
from co_cli.terminal_text import counted, one_line
from co_cli.tools.paths import display_path

Ask = Callable[[str], Awaitable[str | None]]
"""One line of answer from the user (None: nobody to ask, or the question was cancelled)."""


def shown(path: Path) -> str:
    return one_line(display_path(Path.cwd().resolve(), path))


def _where(upto_seq: int | None) -> str:
    if upto_seq is None:
        return "as the session left them"
    return "as they were at the start" if upto_seq < 0 else f"as they were after message #{upto_seq}"


async def confirmed(files: list[FileBack], ask: Ask | None, say: Callable[[str], None]) -> list[FileBack]:
    """The files to write: those nobody changed since co's edit, and those someone did when the user says so
    (never without a question)."""
    chosen = []
    for back in files:
        if back.changed:
            if ask is None:
                say(f"{shown(back.path)} was changed since co's edit: left as it is")
                continue
            answer = await ask(f"{shown(back.path)} was changed since co's edit; {back.action()} it anyway? [y/N] ")
            if (answer or "").strip().lower() not in ("y", "yes"):
                say(f"{shown(back.path)}: left as it is")
                continue
        chosen.append(back)
    return chosen


async def offer_files_back(
    store: Store, session_id: str, upto_seq: int | None, *, ask: Ask | None, say: Callable[[str], None]
) -> None:
    """After the conversation went back (or forked) to message ``upto_seq`` of ``session_id``: offer to take the
    files co changed back to that point too. Without anyone to ask, only the conversation goes back, and the
    command that takes the files back is named."""
    files = files_at(store, session_id, upto_seq)
    if not files:
        return
    short = store.sessions.short_id(session_id)
    to = f" --to {upto_seq}" if upto_seq is not None else ""
    later = "after that point" if upto_seq is not None else "in that session"
    listed = ", ".join(f"{shown(back.path)} ({back.action()})" for back in files)
    say(f"co changed {counted(len(files), 'file')} {later} that differ now: {listed}")
    answer = None
    if ask is not None:
        answer = await ask("Take the files back too? f: files and conversation · c: conversation only [f/C] ")
    if (answer or "").strip().lower() not in ("f", "files"):
        if upto_seq is not None:
            say(f"The files stay as they are; `co sessions undo-files {short}{to}` takes them back.")
        else:
            say("The files stay as they are.")
        return
    for line in take_back(await confirmed(files, ask, say)):
        say(line)
    say(f"Files {_where(upto_seq)}.")
