"""Project instructions files: ``AGENTS.md`` (the cross-tool convention) and ``CO.md``.

Found in the user's config dir, then in the repository root and each directory down to the working
directory; they go into the agent's instructions in that order, so the nearest comes last. The whole
section is capped in tokens: past the cap the farthest files are cut first, each with a one-line notice.

A file is read only when it is a regular file whose real path stays inside the project (the user-level one:
inside co's config dir), away from co's own settings and data (``config.OwnFiles``) and from ``/proc``,
``/dev`` and ``/sys``: a symlink or hard link named ``AGENTS.md`` must not carry the environment, an SSH key
or co's API key into every request. A skipped file is reported with the reason.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from co_cli.config import OwnFiles, Paths, Settings
from co_cli.text_tokens import estimate_text_tokens

FILE_NAMES = ("AGENTS.md", "CO.md")
READ_MAX_BYTES = 1024 * 1024
HEADING = "## Project instructions"
SYSTEM_ROOTS = (Path("/proc"), Path("/dev"), Path("/sys"))
TEXT_SUFFIXES = (".md", ".markdown", ".txt")
"""What a symlinked instructions file may lead to (never e.g. ``.env``, a key file or ``settings.json``)."""
CONFIG_DIR_NAME = "co's config dir"


def project_root(cwd: Path) -> Path:
    """The repository root (the nearest directory holding ``.git``) of ``cwd``, or ``cwd`` itself."""
    cwd = cwd.resolve()
    for directory in (cwd, *cwd.parents):
        if (directory / ".git").exists():
            return directory
    return cwd


@dataclass(frozen=True)
class InstructionsFile:
    path: Path
    text: str
    tokens: int
    shown_tokens: int
    """Tokens of it that go into the instructions (less than ``tokens`` when cut, 0 when left out)."""

    @property
    def cut(self) -> bool:
        return self.shown_tokens < self.tokens


@dataclass(frozen=True)
class SkippedFile:
    path: Path
    reason: str
    """Why it was not read, e.g. "it leads outside the project (to /proc/self/environ)"."""


@dataclass(frozen=True)
class InstructionsFiles:
    files: tuple[InstructionsFile, ...]
    section: str
    """The instructions section (empty when no file was found)."""
    skipped: tuple[SkippedFile, ...] = field(default=())
    """Files found under an instructions file's name but not read, and why."""

    @property
    def tokens(self) -> int:
        return estimate_text_tokens(self.section)


@dataclass(frozen=True)
class Candidate:
    path: Path
    bound: Path
    """The directory its real path must stay in: co's config dir for the user-level file, else the project."""
    user_level: bool


def candidate_paths(cwd: Path, config_dir: Path) -> list[Candidate]:
    """Where instructions files may be, farthest first: the config dir, the repository root, ..., ``cwd``."""
    cwd = cwd.resolve()
    root = project_root(cwd)
    chain = [cwd]
    if root != cwd:
        for parent in cwd.parents:
            chain.append(parent)
            if parent == root:
                break
    found = [Candidate(config_dir / name, config_dir, True) for name in FILE_NAMES]
    return found + [Candidate(d / name, root, False) for d in reversed(chain) for name in FILE_NAMES]


def refusal(candidate: Candidate, own: OwnFiles) -> str | None:
    """Why the (existing) candidate must not be read as an instructions file, or None when it may be."""
    path = candidate.path
    try:
        real = path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop
        return "it cannot be read"
    linked = real != path.absolute()
    where = f" (to {real})" if linked else ""
    if any(real == system or real.is_relative_to(system) for system in SYSTEM_ROOTS):
        return f"it leads to a system file{where}"
    try:
        mode = real.stat().st_mode
        bound = candidate.bound.resolve()
    except (OSError, RuntimeError):
        return f"it cannot be read{where}"
    if not stat.S_ISREG(mode):
        return f"it is not a regular file{where}"
    if not real.is_relative_to(bound):
        return f"it leads outside {CONFIG_DIR_NAME if candidate.user_level else 'the project'}{where}"
    if ".git" in real.relative_to(bound).parts:
        return f"it leads into the repository's .git directory{where}"
    if linked and real.suffix.lower() not in TEXT_SUFFIXES:
        return f"it leads to a file that is not Markdown or text{where}"
    hard_linked = own.linked_to(real)
    if hard_linked is not None:
        return f"it is a hard link to co's own file {hard_linked}"
    if not candidate.user_level and own.contains(real):
        return f"it lies in co's own settings or data{where}"
    return None


def _read(real: Path) -> str | None:
    """The text of the regular file at ``real`` (a path with no symlinks), or None when it cannot be read."""
    try:
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        try:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # swapped for a FIFO or device meanwhile
                return None
            data = handle.read(READ_MAX_BYTES)
        except OSError:
            return None
    return data.decode("utf-8", "replace").strip()


def _cut_text(text: str, tokens: int) -> str:
    """About the first ``tokens`` tokens of ``text``, ending at a line break when there is one."""
    if tokens <= 0:
        return ""
    chars = tokens * 4
    head = text[:chars]
    while estimate_text_tokens(head) > tokens and head:
        head = head[: int(len(head) * 0.9)]
    cut = head.rfind("\n")
    return head[:cut] if cut > len(head) // 2 else head


def instructions_files_for(cwd: Path, settings: Settings, paths: Paths) -> InstructionsFiles:
    """The instructions files a conversation in ``cwd`` reads, with the settings' cap and co's own files."""
    return load_instructions_files(
        cwd, settings.config_dir, settings.instructions_files_max_tokens, OwnFiles.of(paths, settings)
    )


def load_instructions_files(cwd: Path, config_dir: Path, max_tokens: int, own: OwnFiles) -> InstructionsFiles:
    """The instructions files of ``cwd`` and the section they make; ``own`` (co's own files) are never read."""
    found: list[tuple[Path, str]] = []
    skipped: list[SkippedFile] = []
    seen: set[Path] = set()
    for candidate in candidate_paths(cwd, config_dir):
        path = candidate.path
        if not (path.exists() or path.is_symlink()):
            continue
        reason = refusal(candidate, own)
        if reason is not None:
            skipped.append(SkippedFile(path, reason))
            continue
        key = Path(os.path.realpath(path))
        if key in seen:
            continue
        text = _read(key)
        if text:
            seen.add(key)
            found.append((path, text))
    # The budget goes to the nearest files first; the farthest are cut.
    budget = max_tokens
    shown: dict[Path, str] = {}
    files: dict[Path, InstructionsFile] = {}
    for path, text in reversed(found):
        tokens = estimate_text_tokens(text)
        part = text if tokens <= budget else _cut_text(text, budget)
        used = estimate_text_tokens(part)
        budget = max(0, budget - used)
        shown[path] = part
        files[path] = InstructionsFile(path=path, text=text, tokens=tokens, shown_tokens=used)
    ordered = [files[path] for path, _ in found]
    return InstructionsFiles(
        files=tuple(ordered), section=render_section(ordered, shown, max_tokens), skipped=tuple(skipped)
    )


def render_section(files: list[InstructionsFile], shown: dict[Path, str], max_tokens: int) -> str:
    if not files or max_tokens <= 0:
        return ""
    lines = [
        HEADING,
        "Instructions from the user's and the project's instruction files, the nearest last (it wins when they "
        "disagree). Follow them.",
    ]
    for file in files:
        lines.append(f"\n### {file.path}")
        if shown[file.path]:
            lines.append(shown[file.path])
        if file.cut:
            lines.append(
                f"[cut: {file.shown_tokens:,} of {file.tokens:,} tokens shown; the instructions files are capped "
                f"at {max_tokens:,} tokens (setting instructions_files_max_tokens)]"
            )
    return "\n".join(lines)
