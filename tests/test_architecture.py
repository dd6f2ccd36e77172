"""The house rules, read from the code with ``ast``: which room may import which, where SQL and terminal
libraries live, no import cycles, a small package root, no class that takes every feature, and word cues in one module.

The direction (docs/architecture.md): the front ends (terminal, serve) -> session -> tools -> deps -> context /
memory / models -> store / local -> the package root. A module may import its own room, a room on its floor, or any
room below.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "co_cli"
"""The package the rules are read from."""
TESTS = Path(__file__).resolve().parent
DOC = TESTS.parent / "docs" / "architecture.md"
"""Where the module tree is drawn: every module of the package, under its package, and none that is gone."""
"""The test suite: each test module stands alone; what several of them share lives in ``tests/support/``."""

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
MAX_METHODS = 20
"""A class holds one concern: past 20 methods it holds several, and the next feature belongs in a class of its own
(the terminal's chat loop is split by what it does: its output, its questions and keys, and the loop itself)."""
MAX_FUNCTION_LINES = 60
"""A function reads top-down in named steps: past 60 lines of body (from its first statement, the docstring
included, to its last; a typer command's option declarations are its signature, not its steps) it holds steps
that want names of their own."""
TERMINAL_LIBRARIES = ("rich", "prompt_toolkit", "typer")
"""The libraries that draw, read keys or parse argv: a front end's business, the terminal's alone."""
SERVER_LIBRARIES = ("starlette", "uvicorn")
"""The web framework and server of ``co serve``: only ``serve/`` pays for importing them."""
FRONT_ENDS = ("terminal", "serve")
"""The rooms a user talks to; each opens conversations through ``session/`` and uses nothing of the other."""

STORE_FACADE = "co_cli.store"
"""The store's one door: ``Store`` and the names its ``__all__`` offers."""
STORE_USERS = ("terminal", "serve", "memory")
"""The rooms that reach the store only through its door (the front ends draw what it holds, ``memory/`` decides
what goes in it); the session and its tools write turns and so use the tables' statement-level functions."""
STORE_INSIDES = ("co_cli.store.db", "co_cli.store.lockfiles", "co_cli.store.recover", "co_cli.store.schema")
"""What the door never offers a class or function of: the connection, the lock files, recovery and the migrations
(``Store`` has methods for what a front end does with them)."""

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
"""The one module of word cues: what reads the user's words by list lives here, so it is found, measured and
kept to suggesting in one place."""
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
"""The ``re`` calls whose first argument is a pattern the probe reads for ordinary words."""
MAX_LIST_WORD_CHARS = 30
"""A collection of strings this short each reads as a list of words (a phrase list included); longer strings
are sentences or messages, not cues."""


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


def _takes_the_database(thing: object) -> bool:
    """Whether a function (a class: its ``__init__``) takes the open database or a transaction of it."""
    function = thing.__init__ if isinstance(thing, type) else thing  # type: ignore[misc]
    try:
        parameters = inspect.signature(function).parameters.values()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return any(word in str(p.annotation) for p in parameters for word in ("Database", "Transaction", "Reader"))


def _is_record(thing: object) -> bool:
    """A dataclass, a named tuple or an error: data the store hands out, with nothing that reaches the file."""
    return isinstance(thing, type) and (
        dataclasses.is_dataclass(thing)
        or (issubclass(thing, tuple) and hasattr(thing, "_fields"))
        or issubclass(thing, Exception)
    )


def store_door() -> tuple[frozenset[str], frozenset[str]]:
    """The names the store's door offers, and those of them that are tables (built by ``Store`` alone)."""
    import co_cli.store as facade

    offered = frozenset(facade.__all__)
    tables = frozenset(
        name
        for name in offered
        if isinstance(getattr(facade, name), type) and _takes_the_database(getattr(facade, name))
    )
    return offered, tables


def _reaches_a_database(node: ast.Attribute) -> bool:
    """``store.db``, ``self.store.db``: the database of something named a store (``paths.db`` is a file name)."""
    owner = node.value
    named = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
    return node.attr == "db" and named == "store"


def store_side_doors(trees: dict[str, ast.Module], offered: frozenset[str], tables: frozenset[str]) -> list[str]:
    """Where a module of ``STORE_USERS`` reaches the store past its door: importing a module under it or a name it
    does not offer, building a table, or reading a store's ``db``."""
    found: list[str] = []
    for name, tree in sorted(trees.items()):
        if room(name) not in STORE_USERS:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.startswith(f"{STORE_FACADE}."):
                    found.append(f"{name} imports {node.module}")
                elif node.module == STORE_FACADE:
                    found += [f"{name} imports {a.name} from the store" for a in node.names if a.name not in offered]
            elif isinstance(node, ast.Import):
                found += [f"{name} imports {a.name}" for a in node.names if a.name.startswith(f"{STORE_FACADE}.")]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in tables:
                found.append(f"{name}:{node.lineno} builds {node.func.id}")
            elif isinstance(node, ast.Attribute) and _reaches_a_database(node):
                found.append(f"{name}:{node.lineno} reads the store's database")
    return found


def test_front_ends_and_memory_use_the_store_door() -> None:
    """The front ends and ``memory/`` import ``co_cli.store`` alone, and only what its ``__all__`` offers."""
    offered, tables = store_door()
    assert store_side_doors(sources(), offered, tables) == []


def test_the_store_door_offers_no_insides() -> None:
    """The door offers ``Store``, the tables it hands out (as types), records, and the pure helpers and words of
    records: never a class or function of the connection, lock files, recovery or schema, nor a function that
    takes the database."""
    import co_cli.store as facade

    offered, tables = store_door()
    wrong = []
    for name in sorted(offered):
        thing = getattr(facade, name)
        if getattr(thing, "__module__", None) in STORE_INSIDES:
            wrong.append(f"{name} is one of the store's insides")
        elif isinstance(thing, type) and name != "Store" and name not in tables and not _is_record(thing):
            wrong.append(f"{name} is neither a table nor a record")
        elif inspect.isfunction(thing) and _takes_the_database(thing):
            wrong.append(f"{name} takes the database")
    assert wrong == []
    assert {"Memories", "ExtractionQueue"} <= tables


def test_the_store_door_guard_can_fail() -> None:
    """Each way past the door (and the insides at the door) is caught; a session module may use the tables."""
    trees = {
        "co_cli.terminal.memory_cli": ast.parse(
            "from co_cli.store.db import Database\nfrom co_cli.store import Store, Database\n"
            "import co_cli.store.lockfiles\nMemories(store.db)\n"
        ),
        "co_cli.memory.review": ast.parse("from co_cli.store import Memories\nx = self.store.db\npaths.db\n"),
        "co_cli.session.recorder": ast.parse("from co_cli.store.db import Transaction\nSessions(store.db)\n"),
    }
    assert store_side_doors(trees, frozenset({"Store", "Memories"}), frozenset({"Memories"})) == [
        "co_cli.memory.review:2 reads the store's database",
        "co_cli.terminal.memory_cli imports co_cli.store.db",
        "co_cli.terminal.memory_cli imports Database from the store",
        "co_cli.terminal.memory_cli imports co_cli.store.lockfiles",
        "co_cli.terminal.memory_cli:4 builds Memories",
        "co_cli.terminal.memory_cli:4 reads the store's database",
    ]
    from co_cli.store.db import Database, connect
    from co_cli.store.memories import Memories
    from co_cli.store.recover import Recovery

    assert _takes_the_database(Memories) and not _takes_the_database(connect)
    assert not _is_record(Database) and _is_record(Recovery)


def modules_importing_tests(trees: dict[str, ast.Module]) -> list[str]:
    """Which modules of the suite import a test module (``tests.test_*``), at any depth."""
    return sorted(
        f"{name} imports {target}"
        for name, tree in trees.items()
        for target in imported_modules(tree)
        if target.startswith("tests.test_")
    )


def test_no_test_module_imports_another() -> None:
    """A fixture or helper two test files share is in ``tests/support/``: running or changing one test file never
    runs or breaks another's module."""
    trees = {
        ".".join(path.relative_to(TESTS.parent).with_suffix("").parts): ast.parse(path.read_text(), str(path))
        for path in sorted(TESTS.rglob("*.py"))
    }
    assert modules_importing_tests(trees) == []
    guard = {"tests.test_a": ast.parse("def f():\n    from tests.test_b import core\nimport tests.support.x\n")}
    assert modules_importing_tests(guard) == ["tests.test_a imports tests.test_b"]


def tree_modules(doc: str) -> set[str]:
    """The modules the module tree of ``docs/architecture.md`` names, as paths under ``co_cli/``.

    A line whose first word ends in ``/`` opens a package, indented under the one it is in; every ``name.py``
    on that line and on the lines indented deeper below it belongs to the package (a description's next line
    is indented to the description's column)."""
    block = doc.split("```\nco_cli/\n", 1)[1].split("```", 1)[0]
    named: set[str] = set()
    packages: list[tuple[int, str]] = [(0, "")]
    for line in block.splitlines():
        words = line.split()
        if not words:
            continue
        indent = len(line) - len(line.lstrip())
        while len(packages) > 1 and packages[-1][0] >= indent:
            packages.pop()
        if words[0].endswith("/"):
            packages.append((indent, f"{packages[-1][1]}{words[0]}"))
        named.update(f"{packages[-1][1]}{name}" for name in re.findall(r"\b(\w+\.py)\b", line))
    return named


def test_the_module_tree_names_every_module() -> None:
    """``docs/architecture.md`` draws the package module by module: a new module is added to it in the same
    change, and a module that is gone leaves it."""
    modules = {path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py") if path.name != "__init__.py"}
    named = tree_modules(DOC.read_text()) - {"store/__init__.py"}
    assert sorted(modules - named) == [], "missing from the module tree"
    assert sorted(named - modules) == [], "gone from the package"
    sample = (
        "```\nco_cli/\n  a.py b.py   words\n  room/   x.py\n    y.py   about c.py\n                 z.py\n  d.py\n```\n"
    )
    assert tree_modules(sample) == {"a.py", "b.py", "room/x.py", "room/y.py", "room/c.py", "room/z.py", "d.py"}


def test_the_package_root_stays_small() -> None:
    loose = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(loose) <= MAX_ROOT_MODULES, loose


def large_classes(trees: dict[str, ast.Module]) -> list[str]:
    """Classes with more methods than ``MAX_METHODS``."""
    large = []
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                methods = [n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
                if len(methods) > MAX_METHODS:
                    large.append(f"{name}.{node.name}: {len(methods)} methods")
    return large


def test_no_class_takes_every_feature() -> None:
    assert large_classes(sources()) == []
    many = "class Wide:\n" + "".join(f"    def m{i}(self): pass\n" for i in range(MAX_METHODS + 1))
    assert large_classes({"co_cli.x": ast.parse(many)}) == ["co_cli.x.Wide: 21 methods"]


def long_functions(trees: dict[str, ast.Module]) -> list[str]:
    """Functions (methods and nested functions too) whose body runs past ``MAX_FUNCTION_LINES``."""
    found = []
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.body[0].lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    found.append(f"{name}.{node.name}: {lines} lines")
    return sorted(found)


def test_functions_read_in_named_steps() -> None:
    """No function runs past 60 lines of body: a longer one is split into named steps that read top-down."""
    assert long_functions(sources()) == []
    long = "def f(\n    a,\n):\n" + "    x = 1\n" * (MAX_FUNCTION_LINES + 1)
    assert long_functions({"co_cli.x": ast.parse(long)}) == ["co_cli.x.f: 61 lines"]
    assert long_functions({"co_cli.x": ast.parse("def f(\n    a,\n):\n" + "    x = 1\n" * MAX_FUNCTION_LINES)}) == []


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
