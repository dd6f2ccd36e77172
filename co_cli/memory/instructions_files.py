"""Project instructions files: ``AGENTS.md`` (the cross-tool convention) and ``CO.md``.

Found in the user's config dir, then in the repository root and each directory down to the working
directory; they go into the agent's instructions in that order, so the nearest comes last. The whole
section is capped in tokens: past the cap the farthest files are cut first, each with a one-line notice.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from co_cli.text_tokens import estimate_text_tokens

FILE_NAMES = ("AGENTS.md", "CO.md")
READ_MAX_BYTES = 1024 * 1024
HEADING = "## Project instructions"


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
class InstructionsFiles:
    files: tuple[InstructionsFile, ...]
    section: str
    """The instructions section (empty when no file was found)."""

    @property
    def tokens(self) -> int:
        return estimate_text_tokens(self.section)


def candidate_paths(cwd: Path, config_dir: Path) -> list[Path]:
    """Where instructions files may be, farthest first: the config dir, the repository root, ..., ``cwd``."""
    cwd = cwd.resolve()
    root = project_root(cwd)
    chain = [cwd]
    if root != cwd:
        for parent in cwd.parents:
            chain.append(parent)
            if parent == root:
                break
    dirs = [config_dir, *reversed(chain)]
    return [d / name for d in dirs for name in FILE_NAMES]


def _read(path: Path) -> str | None:
    """The file's text, or None when it is not a readable regular file."""
    try:
        if not path.is_file():
            return None
        with path.open("rb") as handle:
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


def load_instructions_files(cwd: Path, config_dir: Path, max_tokens: int) -> InstructionsFiles:
    found: list[tuple[Path, str]] = []
    seen: set[Path] = set()
    for path in candidate_paths(cwd, config_dir):
        key = Path(os.path.realpath(path))
        if key in seen:
            continue
        text = _read(path)
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
    return InstructionsFiles(files=tuple(ordered), section=render_section(ordered, shown, max_tokens))


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
