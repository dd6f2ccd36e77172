"""The house rules, read from the code with ``ast``: which room may import which, where SQL and terminal
libraries live, no import cycles, a small package root, no class that takes every feature, and word cues in one module.

The direction (docs/architecture.md): the front ends (terminal, serve) -> session -> tools -> deps -> context /
memory / models -> store / local -> the package root. A module may import its own room, a room on its floor, or any
room below.
"""

from __future__ import annotations

import ast
import re
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

ORDINARY_WORDS = frozenset(
    [
        "the",
        "a",
        "an",
        "and",
        "or",
        "to",
        "of",
        "in",
        "on",
        "that",
        "this",
        "is",
        "are",
        "i",
        "i'm",
        "my",
        "me",
        "we",
        "our",
        "you",
        "your",
        "it",
        "do",
        "don't",
        "not",
        "no",
        "please",
        "always",
        "never",
        "now",
        "today",
        "next",
        "what",
        "how",
        "why",
        "when",
        "where",
        "who",
        "which",
        "can",
        "could",
        "should",
        "would",
        "will",
    ]
)
"""Words of ordinary English speech. A regex, or a list of short words, naming three or more of them reads
people's words: a word cue (the probe only finds them; it is not a cue itself)."""
CUE_MODULE = "co_cli.cues"
WORD_LISTS_ALLOWED = {
    "co_cli.context.ledger": "which words are not identifiers (names, packages, dates): it only adds what a "
    "summary must keep verbatim and decides nothing about what the user means",
    "co_cli.memory.retrieval": "stop words a memory search leaves out of its query: a word of any other language "
    "is searched",
    "co_cli.context.user_content": "stop words left out when checking that a summary holds the user's own terms",
}
"""Modules with word lists that are not cues, and why. Everything that reads what the user means (a rule, a
change, the next step, whose fact, a passing state, a question) lives in ``cues.py`` and only suggests."""
RE_FUNCTIONS = frozenset({"compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"})
MAX_LIST_WORD_CHARS = 30


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


def _strings(node: ast.AST, constants: dict[str, str]) -> list[str]:
    """The string constants in ``node``, with module-level string constants it names."""
    found = []
    for inner in ast.walk(node):
        if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
            found.append(inner.value)
        elif isinstance(inner, ast.Name) and inner.id in constants:
            found.append(constants[inner.id])
    return found


def _word_lists(tree: ast.Module) -> list[tuple[int, list[str]]]:
    """The regexes (a ``re`` call's pattern), short-word collections and ``"...".split()`` lists of a module."""
    constants = {}
    for statement in tree.body:
        target = statement.targets[0] if isinstance(statement, ast.Assign) else getattr(statement, "target", None)
        value = getattr(statement, "value", None)
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant | ast.JoinedStr | ast.BinOp):
            constants[target.id] = "".join(_strings(value, {}))
    lists = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call | ast.Set | ast.List | ast.Tuple):
            continue
        if isinstance(node, ast.Call):
            function = node.func
            if not isinstance(function, ast.Attribute):
                continue
            is_re = isinstance(function.value, ast.Name) and function.value.id == "re"
            if is_re and function.attr in RE_FUNCTIONS and node.args:
                lists.append((node.lineno, _strings(node.args[0], constants)))
            elif function.attr == "split" and not node.args and not is_re:
                lists.append((node.lineno, _strings(function.value, constants)))
        elif len(node.elts) >= 3 and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) and len(e.value) <= MAX_LIST_WORD_CHARS
            for e in node.elts
        ):
            lists.append((node.lineno, [e.value for e in node.elts if isinstance(e, ast.Constant)]))
    return lists


def word_cues(tree: ast.Module) -> list[int]:
    """The lines of a module's word lists that name three or more ordinary words."""
    cues = []
    for line, texts in _word_lists(tree):
        words = set(re.findall(r"[a-z]+(?:['’][a-z]+)?", " ".join(texts).lower()))
        if len(words & ORDINARY_WORDS) >= 3:
            cues.append(line)
    return sorted(cues)


def test_word_cues_live_only_in_the_cue_module() -> None:
    found = sorted(
        f"{name}:{line}"
        for name, tree in sources().items()
        if name != CUE_MODULE and name not in WORD_LISTS_ALLOWED
        for line in word_cues(tree)
    )
    assert found == []
    assert word_cues(sources()[CUE_MODULE])


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
    cued = ast.parse(
        'import re\nRULE = re.compile(r"\\b(?:always|never|from now on)\\b")\n'
        'WORDS = frozenset({"my", "our", "we", "us"})\nSTOP = "the of and".split()\nOK = re.compile(r"[a-z]+")\n'
    )
    assert word_cues(cued) == [2, 3, 4]
