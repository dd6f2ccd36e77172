"""Only ``co_cli/terminal/`` draws, reads keys or parses argv, and its modules import each other one way."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "co_cli"
UI_LIBRARIES = ("rich", "prompt_toolkit", "typer")


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top, in a function or for type checking alone."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_only_the_terminal_imports_rich_prompt_toolkit_or_typer() -> None:
    outside = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).parts[0] != "terminal"
        and any(name.split(".")[0] in UI_LIBRARIES for name in imported(path))
    }
    assert outside == set()


def test_terminal_modules_import_each_other_without_a_cycle() -> None:
    modules = {module_name(path): path for path in (PACKAGE / "terminal").rglob("*.py")}
    graph = {
        name: {other for other in modules if other != name and other in imported(path)}
        for name, path in modules.items()
    }
    done: set[str] = set()

    def visit(name: str, trail: tuple[str, ...]) -> None:
        assert name not in trail, " -> ".join((*trail[trail.index(name) :], name))
        if name in done:
            return
        for other in sorted(graph[name]):
            visit(other, (*trail, name))
        done.add(name)

    for name in sorted(graph):
        visit(name, ())
