"""Query expansion for recall: a question names a kind of thing ("which shell do I use?") where a memory names
the thing itself ("The user writes fish functions"), or the other way round.

``TOPICS`` maps a topic word to the words of its members; ``expand`` adds, for each query term, the members of
its topic (or, for a member, its topic word and its siblings). The expanded terms are searched apart and rank
below every direct match (``EXPANDED_WEIGHT``), so recall grows without pushing a direct match out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from co_cli.store import Candidate, Memories

EXPANDED_WEIGHT = 0.5
MAX_EXPANSION = 24

_TOPIC_TEXT = {
    "shell": "bash zsh fish nushell powershell pwsh tcsh ksh",
    "editor": "vim neovim nvim emacs helix vscode nano sublime zed intellij pycharm kakoune",
    "ide": "vscode intellij pycharm eclipse xcode",
    "terminal": "kitty alacritty iterm iterm2 wezterm ghostty konsole tmux",
    "language": "python rust golang java javascript typescript ruby kotlin swift haskell elixir scala php",
    "os": "linux macos windows ubuntu debian fedora nixos freebsd",
    "database": "postgres postgresql mysql sqlite redis mongodb mariadb cassandra",
    "browser": "firefox chrome chromium safari brave",
    "indentation": "tabs spaces",
    "formatter": "black ruff prettier gofmt rustfmt",
    "deadline": "due ship release launch",
    "city": "lives moved based",
    "live": "lives moved based city",
    "pet": "cat dog cats dogs",
}
TOPICS: dict[str, tuple[str, ...]] = {topic: tuple(members.split()) for topic, members in _TOPIC_TEXT.items()}


def expand(terms: Sequence[str]) -> list[str]:
    """The words to search besides ``terms`` (never one of them), at most MAX_EXPANSION."""
    extra: dict[str, None] = {}
    given = set(terms)
    for term in terms:
        for topic, members in TOPICS.items():
            if term == topic:
                related: Sequence[str] = members
            elif term in members:
                related = (topic, *members)
            else:
                continue
            for word in related:
                if word not in given:
                    extra.setdefault(word, None)
    return list(extra)[:MAX_EXPANSION]


def search_with_topics(
    store: Memories, terms: Sequence[str], project: str | None, limit: int
) -> tuple[list[Candidate], list[Candidate]]:
    """The memories matching ``terms`` (best first), and apart those only the topic's words find."""
    direct = store.search(terms, project=project, limit=limit) if terms else []
    extra = expand(terms)
    if not extra:
        return direct, []
    found = {c.memory.id for c in direct}
    return direct, [c for c in store.search(extra, project=project, limit=limit) if c.memory.id not in found]
