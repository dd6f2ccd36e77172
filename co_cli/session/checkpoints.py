"""The files co's edit tools changed, as they stood at a point of the conversation, and taking them back there.

A session's changes (``store.file_changes``) say, for each file, what it held before each change and what the
change wrote. At message ``n`` a file held what the first change after ``n`` found before it (or, when nothing
changed it after ``n``, what the last change wrote). A file that now holds none of the contents co saw or wrote
for it was changed by someone else since co's edit: ``changed`` says so, and the front end asks before such a
file is overwritten. A change whose file was never written (co was killed between its commit and the write)
left the file holding the change's ``before``: a content co saw, so taking it back is plain, and nothing at
all when that is where the file is going.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from co_cli.store import Store
from co_cli.store.file_changes import ChangeRow, content_hash
from co_cli.tools.edits import write_atomically


@dataclass(frozen=True)
class FileBack:
    """One file to take back: where, what it is to hold (None: it is to be absent), whether someone else
    changed it since co's edit."""

    path: Path
    content: bytes | None
    changed: bool
    existed: bool
    """Whether the file exists now."""

    def action(self) -> str:
        if self.content is None:
            return "remove"
        return "restore" if self.existed else "recreate"


def _current(path: Path) -> tuple[str | None, bool]:
    """The file's content hash now (None: absent), and whether it could be read (a directory or an unreadable
    file counts as changed by someone else)."""
    try:
        return content_hash(path.read_bytes()), True
    except FileNotFoundError:
        return None, True
    except OSError:
        return None, False


def _by_path(changes: list[ChangeRow]) -> dict[str, list[ChangeRow]]:
    grouped: dict[str, list[ChangeRow]] = {}
    for change in changes:
        grouped.setdefault(change.path, []).append(change)
    return grouped


def files_at(store: Store, session_id: str, upto_seq: int | None) -> list[FileBack]:
    """The files that differ from how the session's changes left them at message ``upto_seq`` (None: at the
    session's end), each with the content it held there; files no change after ``upto_seq`` touched are left
    out (a later change by someone else is theirs)."""
    found: list[FileBack] = []
    for path, changes in _by_path(store.file_changes.of_session(session_id)).items():
        later = [change for change in changes if upto_seq is not None and change.seq > upto_seq]
        if upto_seq is not None and not later:
            continue
        target = later[0].before_hash if later else changes[-1].after_hash
        current, readable = _current(Path(path))
        if readable and current == target:
            continue
        known = {change.before_hash for change in changes} | {change.after_hash for change in changes}
        found.append(
            FileBack(
                Path(path),
                store.file_changes.content(target),
                changed=not readable or current not in known,
                existed=current is not None or not readable,
            )
        )
    return found


def take_back(files: list[FileBack]) -> list[str]:
    """Write each file as it is to be (atomically), or remove it; one line per file saying what was done."""
    lines = []
    for back in files:
        try:
            write_atomically(back.path, back.content)
        except OSError as exc:
            lines.append(f"could not {back.action()} {back.path}: {exc.strerror or exc}")
            continue
        done = {"remove": "removed", "restore": "restored", "recreate": "recreated"}[back.action()]
        lines.append(f"{done} {back.path}")
    return lines
