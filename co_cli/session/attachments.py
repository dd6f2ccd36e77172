"""What the user hands the next prompt besides their words: the files they name as ``@path`` and the commands
they run themselves with ``!command``.

Both become part of the prompt's message, so the transcript keeps what the model was sent and a resumed
session has it: a command's output waits here for the next prompt, before the user's words; a file named in
the prompt follows them. Reading a file goes through ``read_file``'s own rules (``tools.files``), running a
command through ``run_shell``'s (``tools.shell``) without the question: the user typed it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from co_cli.deps import CoDeps
from co_cli.tools.files import read_for_prompt
from co_cli.tools.paths import own_files, resolve_path, working_dir
from co_cli.tools.shell import execute_command

MENTION = re.compile(r"(?<!\S)@((?:[^\s\\]|\\ )+)")
"""An ``@path`` starting a word; a space in the path is written ``\\ `` (as completion inserts it)."""
TRAILING = ".,;:!?)]}'\""
"""Punctuation after a path ends the sentence, not the path ("see @notes.txt.")."""
COMMAND_BLOCK = "[I ran this command myself: $ {command}]\n{output}"
FILE_BLOCK = "[The file @{path}, as read_file returns it]\n{text}"


@dataclass
class Composed:
    """A prompt as the model gets it (``text``), the user's own words in it, and what was attached."""

    text: str
    words: str
    files: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    """``@names`` that name no file (an e-mail, a handle): left in the words as typed."""


class Attachments:
    def __init__(self, deps: CoDeps) -> None:
        self.deps = deps
        self.commands: list[str] = []
        """The blocks of the commands run since the last prompt (each command with its output)."""

    def clear(self) -> None:
        self.commands.clear()

    async def run_command(self, command: str) -> str:
        """Run ``command`` as ``run_shell`` would (working directory, timeout, output cap, everything it starts
        killed with it); its output waits for the next prompt. Returns the output."""
        settings = self.deps.settings
        output = await execute_command(
            command,
            cwd=str(working_dir(self.deps)),
            timeout=settings.shell_timeout,
            output_limit=settings.shell_output_limit,
        )
        self.commands.append(COMMAND_BLOCK.format(command=command, output=output))
        return output

    def compose(self, prompt: str) -> Composed:
        """``prompt`` with the commands run since the last one before it and the files it names after it.
        Raises ``PathError`` (nothing is taken) when a named file may not or cannot be read."""
        cwd, own = working_dir(self.deps), own_files(self.deps)
        files: list[str] = []
        unknown: list[str] = []
        blocks: list[str] = []
        for match in MENTION.finditer(prompt):
            path = match.group(1).replace("\\ ", " ").rstrip(TRAILING)
            if not path or path in files:
                continue
            if not resolve_path(cwd, path).exists():
                unknown.append(path)
                continue
            blocks.append(FILE_BLOCK.format(path=path, text=read_for_prompt(cwd, own, path)))
            files.append(path)
        text = "\n\n".join([*self.commands, prompt, *blocks])
        self.commands.clear()
        return Composed(text, prompt, files, unknown)
