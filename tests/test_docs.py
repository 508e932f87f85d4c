"""The README and docs/ are followed by people on other machines: every relative link
resolves, inside the repository; every repository path they name exists; the README stays
short. Code comments and docstrings name files that exist too."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 200
# A path in the docs that starts with one of these folders names a file of the repository.
REPO_DIRS = (".ci", "bench", "ci", "docs", "ledger", "migrations", "probes", "tests")
# Where code comments and docstrings are read for the files they name.
CODE_DIRS = ("bench", "ledger", "migrations", "probes", "tests")

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](target) and ![alt](target), with an optional "title"; [label]: target definitions
_INLINE_LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_LINK_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
_HTML_LINK = re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']+)["']""")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_DIRS = "|".join(re.escape(d) for d in REPO_DIRS)
_REPO_PATH = re.compile(rf"(?<![\w./-])((?:{_DIRS})/[\w./-]*)")
_UP_PATH = re.compile(r"(?<![\w./-])((?:\.\./)+[\w./-]*)")
_MD_NAME = re.compile(r"(?<![\w./-])([\w-]+\.md)\b")
# a file named in a comment: dir/…/name.ext, without globs or placeholders
_CODE_FILE = re.compile(r"(?<![\w./<*-])((?:[\w-]+/)+[\w-][\w.-]*\.(?:py|sh|md|toml|ini|mako|json))(?![\w/*<-])")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks (an indented fence in a list item counts too)."""
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            out.append(line)
    return out


def links(text: str) -> list[str]:
    """Every link target of the prose (not inside code spans or fenced blocks)."""
    found = []
    for line in prose_lines(text):
        line = _CODE_SPAN.sub("", line)
        found += _INLINE_LINK.findall(line) + _LINK_DEF.findall(line) + _HTML_LINK.findall(line)
    return found


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its rendered text, lower-cased, with everything
    but letters, digits, '_', '-' and spaces dropped, and each space made a '-'."""
    text = _CODE_SPAN.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link renders as its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML tags
    text = re.sub(r"(\*\*|__|\*)", "", text)  # emphasis markers
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(md: Path) -> set[str]:
    """The heading anchors of a markdown file; a repeated slug gets -1, -2, … as on GitHub."""
    seen: dict[str, int] = {}
    out = set()
    for line in prose_lines(md.read_text(encoding="utf-8")):
        m = _HEADING.match(line)
        if not m:
            continue
        slug = github_slug(m.group(2))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def inside(path: Path, root: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


def link_problems(doc: Path, root: Path) -> list[str]:
    """What is wrong with the relative links of one markdown file (web links are not fetched)."""
    problems = []
    for target in links(doc.read_text(encoding="utf-8")):
        if _SCHEME.match(target) or target.startswith("//"):
            continue
        where, _, anchor = target.partition("#")
        dest = (doc.parent / where) if where else doc
        if not inside(dest, root):
            problems.append(f"{target}: points outside the repository")
        elif not dest.exists():
            problems.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{target}: no heading #{anchor} in {dest.name}")
    return problems


def path_problems(doc: Path, root: Path) -> list[str]:
    """Repository paths the text names (in prose, code spans and code blocks) that do not exist,
    and any path that climbs out of the repository."""
    text = doc.read_text(encoding="utf-8")
    problems = []
    for name in sorted(set(_REPO_PATH.findall(text))):
        name = name.rstrip(".")
        if not (root / name).exists():
            problems.append(f"{name}: not in the repository")
    for name in sorted(set(_UP_PATH.findall(text))):
        dest = doc.parent / name.rstrip(".")
        if not inside(dest, root) or not dest.exists():
            problems.append(f"{name}: outside the repository, or missing")
    for name in sorted({n for line in prose_lines(text) for n in _MD_NAME.findall(line)}):
        if not any((d / name).exists() for d in (doc.parent, root, root / "docs")):
            problems.append(f"{name}: no such document in the repository")
    return problems


def test_the_docs_are_the_readme_and_one_file_per_subject():
    names = {p.name for p in DOCS[1:]}
    assert {"probe.md", "watching.md", "sql.md", "migrations.md", "clusters.md", "layout.md",
            "benchmarks.md"} <= names


def test_readme_is_read_in_minutes():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail to docs/"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_inside_the_repository(doc):
    assert link_problems(doc, ROOT) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_named_repository_path_exists(doc):
    assert path_problems(doc, ROOT) == []


def test_the_docs_link_to_each_other_from_the_readme():
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in links(README.read_text())}
    assert {p.resolve() for p in DOCS[1:]} <= linked


def _comments_and_docstrings(path: Path) -> list[tuple[int, str]]:
    source = path.read_text(encoding="utf-8")
    out = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
           if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                out.append((node.body[0].lineno, doc))
    return out


def comment_problems(root: Path) -> list[str]:
    """Files named in comments and docstrings that do not exist. A name is looked up from the
    repository root, then from the commenting file's top folder (a comment in ledger/ may
    name a module from below ledger/); a bare name ending in .md must be a document here."""
    problems = []
    for top in CODE_DIRS:
        for path in sorted((root / top).rglob("*.py")):
            if "fixtures" in path.relative_to(root).parts:
                continue
            for line, text in _comments_and_docstrings(path):
                for name in _CODE_FILE.findall(text):
                    if not any((base / name).exists() for base in (root, root / top)):
                        problems.append(f"{path.relative_to(root)}:{line}: {name}")
                for name in _MD_NAME.findall(text):
                    if not any((base / name).exists() for base in (root, root / "docs")):
                        problems.append(f"{path.relative_to(root)}:{line}: {name}")
    return problems


@pytest.mark.slow
def test_code_comments_name_files_that_exist():
    assert comment_problems(ROOT) == []


# The checks themselves, on a small repository of their own: each kind of fault is found.

def test_the_checks_find_a_broken_link_an_escape_a_bad_anchor_and_a_missing_path(tmp_path):
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "ledger").mkdir()
    (repo / "bench").mkdir()
    (repo / "ledger" / "record.py").write_text('"""See storage/gone.py and DESIGN.md."""\n# ledger/record.py\n')
    (repo / "docs" / "a.md").write_text("# Title\n\n## The `cache_state` rule: *why*\n\n## Title\n")
    readme = repo / "README.md"
    readme.write_text(
        "[ok](docs/a.md#the-cache_state-rule-why) [ok](docs/a.md#title-1) [web](https://example.org/x)\n"
        "[gone](docs/b.md) [up](../shared/corpus) [anchor](docs/a.md#nowhere) `[code](docs/a.md#x)`\n"
        "`ledger/record.py` `ledger/gone.py` `bench/<script>` see DESIGN.md\n"
        "```\n[in a block](nope.md) ../shared/corpus/legacy-results\n```\n")
    assert link_problems(readme, repo) == [
        "docs/b.md: no such file", "../shared/corpus: points outside the repository",
        "docs/a.md#nowhere: no heading #nowhere in a.md"]
    assert path_problems(readme, repo) == [
        "docs/b.md: not in the repository", "ledger/gone.py: not in the repository", "../shared/corpus: outside the repository, or missing",
        "../shared/corpus/legacy-results: outside the repository, or missing",
        "DESIGN.md: no such document in the repository"]
    assert comment_problems(repo) == ["ledger/record.py:1: storage/gone.py", "ledger/record.py:1: DESIGN.md"]


@pytest.mark.parametrize("heading, slug", [
    ("`bench/bench_probe_overhead.py`", "benchbench_probe_overheadpy"),
    ("Pins: `ledger pins update`, `ledger pins list`", "pins-ledger-pins-update-ledger-pins-list"),
    ("`ledger explain ROW_ID`", "ledger-explain-row_id"),
    ("Watching the cache: a real run", "watching-the-cache-a-real-run"),
    ("Running `ledger` after `make`", "running-ledger-after-make"),
    ("local_cpu · DESKTOP-H143S82 · jax 0.10.2", "local_cpu--desktop-h143s82--jax-0102"),
])
def test_github_slugs(heading, slug):
    assert github_slug(heading) == slug
