"""The ledger's words are spelled once: row order, the ok rule and a key's canonical values
in ledger/rows.py, "the same key or cell as this row" in ledger/watch/keys.py, the reading of
SQLite's lock message in ledger/storage/sqlite_file.py.
A second spelling is a bug waiting for the next column (two had drifted apart before
they were folded). And the house has no import cycle, imports inside functions counted."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CODE = sorted([*(REPO / "ledger").rglob("*.py"), *(REPO / "probes").rglob("*.py")])

# (what, the pattern of a spelling, the one file that may hold it)
WORDS = [
    ("row order", r"COALESCE\(\s*(\w+\.|\{[^}]*\})?timestamp\b", "ledger/rows.py"),
    ("the ok rule", r"COALESCE\(\s*(\w+\.|\{[^}]*\})?status\b", "ledger/rows.py"),
    ("a key's canonical values", r"""==\s*["']mixed_precision["']\s+and\b""", "ledger/rows.py"),
    ("same key or cell as a row", r"""join\(same_sql\(""", "ledger/watch/keys.py"),
    ("SQLite's lock message", r"""["'](database is )?(locked|busy)["']""", "ledger/storage/sqlite_file.py"),
    ("a cell's labels", r"""["']dataset_class["'],\s*["']model_type["'],\s*["']instrument["']""", "ledger/record.py"),
]


def _spellings(pattern: str, files=CODE, root=REPO) -> set[str]:
    return {str(p.relative_to(root)) for p in files if re.search(pattern, p.read_text(encoding="utf-8"))}


@pytest.mark.parametrize("what, pattern, home", WORDS, ids=[w[0] for w in WORDS])
def test_each_word_is_spelled_in_its_home_only(what, pattern, home):
    assert _spellings(pattern) == {home}


@pytest.mark.parametrize("what, pattern, home", WORDS, ids=[w[0] for w in WORDS])
def test_the_scan_finds_a_second_spelling(what, pattern, home, tmp_path):
    """The scan itself can fail: a module that spells the word again is found."""
    spelled = {"row order": "SQL = \"ORDER BY COALESCE(r.timestamp, '') DESC\"",
               "the ok rule": "SQL = \"COALESCE(status, 'ok') = 'ok'\"",
               "a key's canonical values": "v = [bool(r[n]) if n == 'mixed_precision' and r[n] else r[n] for n in ns]",
               "same key or cell as a row": "same = ' AND '.join(same_sql(f, f':{f}', d) for f in CELL)",
               "SQLite's lock message": "locked = 'locked' in str(exc)",
               "a cell's labels": "CELL = ('dataset_class', 'model_type', 'instrument')"}[what]
    (tmp_path / "stray.py").write_text(spelled + "\n", encoding="utf-8")
    (tmp_path / "clean.py").write_text("SQL = 'SELECT 1'\n", encoding="utf-8")
    assert _spellings(pattern, sorted(tmp_path.iterdir()), tmp_path) == {"stray.py"}


def _module_of(path: Path) -> str:
    """The module's name as installed (probes/ installs as ledger.probes)."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    parts = ["ledger", *parts] if parts[0] == "probes" else parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    modules = {_module_of(p): p for p in CODE}

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps |= {known(a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps |= {known(f"{node.module}.{a.name}") for a in node.names}
        graph[name] = deps - {None, name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.mark.slow
def test_no_import_cycle_in_the_house():
    assert _cycles(_import_graph()) == []


def test_the_cycle_test_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# The layers docs/layout.md draws, lowest first: storage (the database), the recorder over it,
# and the commands (ledger/command.py) and their CLI over both. A module imports from its own
# layer and those below, never from one above: opening a ledger once took in other runs'
# spool through an import of the recorder, and the recorder printed errors through the CLI's.
LAYERS = {"ledger.storage": 0, "ledger.recorder": 1, "ledger.command": 2, "ledger.cli": 2}


def _layer(module: str) -> int | None:
    return next((n for prefix, n in LAYERS.items() if module == prefix or module.startswith(f"{prefix}.")), None)


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a module from a layer above the importer's, as 'importer -> imported'."""
    return sorted(f"{m} -> {d}" for m, deps in graph.items() if (low := _layer(m)) is not None
                  for d in deps if (high := _layer(d)) is not None and high > low)


@pytest.mark.slow  # it parses every module of the ledger: over the fast tier's 0.3 s
def test_no_module_imports_from_a_layer_above_its_own():
    assert _upward(_import_graph()) == []


def test_the_layer_test_finds_an_import_from_above():
    graph = {"ledger.storage.open": {"ledger.recorder.ingest", "ledger.errors"},
             "ledger.recorder.argv": {"ledger.cli.errors", "ledger.storage.url"},
             "ledger.cli.group": {"ledger.storage.errors"}, "ledger.merge": {"ledger.command"}}
    assert _upward(graph) == ["ledger.recorder.argv -> ledger.cli.errors", "ledger.storage.open -> ledger.recorder.ingest"]


# -- tests share what they share through tests/ledgers.py and tests/helpers.py -------------
# A test module imported by another is collected twice over in effect: its fixtures and
# constants become an API no one meant, and running one file runs the other's imports.

TESTS = sorted((REPO / "tests").rglob("*.py"))


def _test_modules_imported(path: Path) -> list[str]:
    """The test_* modules that `path` imports, imports inside functions counted."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module] if node.module else []
            if node.module in (None, "tests"):  # from . import test_x, from tests import test_x
                names += [alias.name for alias in node.names]
        else:
            continue
        found += [name for name in names if any(part.startswith("test_") for part in name.split("."))]
    return found


@pytest.mark.slow
def test_no_test_module_imports_another():
    imports = {str(p.relative_to(REPO)): found for p in TESTS if (found := _test_modules_imported(p))}
    assert imports == {}, "move what is shared to tests/ledgers.py (ledgers) or tests/helpers.py (the rest)"


def test_the_test_import_scan_finds_one(tmp_path):
    path = tmp_path / "test_x.py"
    path.write_text("from .helpers import rec\nfrom .test_pins import add\n\n\ndef f():\n"
                    "    from . import test_sweep\n    import tests.test_report\n    from tests import ledgers\n")
    assert _test_modules_imported(path) == ["test_pins", "test_sweep", "tests.test_report"]


# -- a finding's facts are stored, never read back from its words (issue 33) ---------------
# The daily check once recovered what the previous check found by running regexes over its
# own messages; the facts are now verdicts.facts. What judges or reports findings
# (ledger/watch/, and the report's sections made from them) reads no text with a regex.

REPORTS_OF_FINDINGS = ("todo.py", "health.py", "diff.py", "diff_tests.py")
JUDGING = sorted([*(REPO / "ledger" / "watch").glob("*.py"),
                  *(REPO / "ledger" / "report" / name for name in REPORTS_OF_FINDINGS)])


def _regex_uses(path: Path, root: Path = REPO) -> list[str]:
    """`import re` / `from re import ...` in a module, imports inside functions counted."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) else []
        if "re" in names:
            found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_finding_is_read_back_from_its_words():
    assert len(JUDGING) > 10
    assert [u for p in JUDGING for u in _regex_uses(p)] == []


def test_the_words_scan_finds_a_regex(tmp_path):
    module = tmp_path / "judge.py"
    module.write_text("def f(line):\n    from re import search\n    import re\n    return search('row', line)\n")
    assert _regex_uses(module, tmp_path) == ["judge.py:2", "judge.py:3"]
