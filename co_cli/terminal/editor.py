"""Edit a text in the user's editor ($VISUAL, $EDITOR, else a common one found on PATH)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from co_cli.errors import CoError

FALLBACK_EDITORS = ("nano", "vim", "vi")


def editor_command() -> list[str] | None:
    for name in ("VISUAL", "EDITOR"):
        value = os.environ.get(name, "").strip()
        if value:
            try:
                return shlex.split(value) or None
            except ValueError:  # unbalanced quotes: no command can be made of it
                return None
    for name in FALLBACK_EDITORS:
        found = shutil.which(name)
        if found:
            return [found]
    return None


def edit_text(text: str, suffix: str = ".md") -> str | None:
    """The text after the user edited it (in a private temporary file), or None when no editor ran; CoError
    when the editor left no file that can be read."""
    command = editor_command()
    if command is None:
        return None
    with tempfile.TemporaryDirectory(prefix="co-edit-") as directory:
        path = Path(directory) / f"summary{suffix}"
        path.write_text(text, encoding="utf-8")
        os.chmod(path, 0o600)
        try:
            completed = subprocess.run([*command, str(path)], check=False)
        except OSError:
            return None
        if completed.returncode != 0:
            return None
        try:
            return path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            raise CoError("the editor left no file to read; the summary is unchanged") from None
