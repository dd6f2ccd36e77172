"""The house rules, read from the code with ``ast``: which room may import which, where SQL and terminal
libraries live, no import cycles, a small package root and no class that takes every feature.

The direction (docs/architecture.md): the front ends (terminal, serve) -> session -> tools -> deps -> context /
memory / models -> store / local -> the package root. A module may import its own room, a room on its floor, or any
room below.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "co_cli"

FLOORS = {
    "terminal": 7,
    "serve": 7,
    "__main__": 7,
    "session": 6,
    "tools": 5,
    "deps": 4,
    "context": 3,
    "memory": 3,
    "models": 3,
    "store": 2,
    "local": 2,
}
"""How high each room is; every other module at the package root is a shared word (floor 1)."""

MAX_ROOT_MODULES = 16
"""The words every room shares, and ``cues.py``: the one module of word cues (which only suggest)."""
MAX_METHODS = 25
TERMINAL_LIBRARIES = ("rich", "prompt_toolkit", "typer")
SERVER_LIBRARIES = ("starlette", "uvicorn")
FRONT_ENDS = ("terminal", "serve")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def sources() -> dict[str, ast.Module]:
    return {module_name(path): ast.parse(path.read_text(), str(path)) for path in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(tree: ast.Module, known: frozenset[str] = frozenset()) -> set[str]:
    """Every module an import statement names, at any depth (lazy and type-checking imports count too).
    ``from package import module`` names the module when it is one of ``known``."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in known else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "co_cli"


def floor(module: str) -> int:
    return FLOORS.get(room(module), 1)


def co_edges() -> dict[str, set[str]]:
    modules = sources()
    known = frozenset(modules)
    return {
        name: {target for target in imported_modules(tree, known) if target in known and target != name}
        for name, tree in modules.items()
    }


def against_direction(edges: dict[str, set[str]]) -> list[str]:
    return [
        f"{source} -> {target}"
        for source, targets in sorted(edges.items())
        for target in sorted(targets)
        if floor(target) > floor(source)
    ]


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(edges.get(module, ())):
            if state.get(target) == 1:
                found.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module)
    return found


def test_every_import_runs_down_the_house() -> None:
    assert against_direction(co_edges()) == []


def test_no_import_cycles() -> None:
    assert cycles(co_edges()) == []


def test_only_the_store_runs_sql() -> None:
    outside = []
    for name, tree in sources().items():
        if room(name) == "store":
            continue
        if "sqlite3" in imported_modules(tree):
            outside.append(f"{name} imports sqlite3")
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr in ("execute", "executemany", "executescript"):
                outside.append(f"{name}:{node.lineno} calls {node.func.attr}")
    assert outside == []


def test_only_the_terminal_draws() -> None:
    drawing = sorted(
        f"{name} imports {target}"
        for name, tree in sources().items()
        if room(name) != "terminal"
        for target in imported_modules(tree)
        if target.split(".")[0] in TERMINAL_LIBRARIES
    )
    assert drawing == []


def test_only_the_server_serves() -> None:
    """The web framework and server are imported in ``serve/`` alone (so nothing else pays for them)."""
    serving = sorted(
        f"{name} imports {target}"
        for name, tree in sources().items()
        if room(name) != "serve"
        for target in imported_modules(tree)
        if target.split(".")[0] in SERVER_LIBRARIES
    )
    assert serving == []


def test_front_ends_stand_apart() -> None:
    """The terminal starts the server (`co serve`) but uses none of its parts; the server uses nothing of the
    terminal's."""
    edges = co_edges()
    crossing = sorted(
        f"{source} -> {target}"
        for source, targets in edges.items()
        for target in targets
        if room(source) in FRONT_ENDS
        and room(target) in FRONT_ENDS
        and room(source) != room(target)
        and not (source == "co_cli.terminal.serve_cli" and target.startswith("co_cli.serve.server"))
    )
    assert crossing == []


def test_the_package_root_stays_small() -> None:
    loose = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(loose) <= MAX_ROOT_MODULES, loose


def test_no_class_takes_every_feature() -> None:
    large = []
    for name, tree in sources().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                methods = [n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
                if len(methods) > MAX_METHODS:
                    large.append(f"{name}.{node.name}: {len(methods)} methods")
    assert large == []


def test_the_guards_can_fail() -> None:
    """A store module importing the session, a cycle, and a package importing its own module are caught."""
    edges = {
        "co_cli.store.sessions": {"co_cli.session.conversation", "co_cli.errors"},
        "co_cli.session.conversation": {"co_cli.store.sessions"},
    }
    assert against_direction(edges) == ["co_cli.store.sessions -> co_cli.session.conversation"]
    assert cycles(edges) == [["co_cli.session.conversation", "co_cli.store.sessions", "co_cli.session.conversation"]]
    tree = ast.parse("from co_cli.store import copies\nimport sqlite3\n")
    assert imported_modules(tree, frozenset({"co_cli.store.copies"})) == {"co_cli.store.copies", "sqlite3"}
