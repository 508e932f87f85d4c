"""The wheel is the product: what it carries, and the version written once.

ci/wheel_smoke.sh installs the wheel into a fresh venv and runs every command from
outside the tree; these tests hold the pieces that make that work to the checkout.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the declared floor
    import tomli as tomllib

from ledger.errors import LedgerError
from ledger.storage import migrate

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def tree_packages() -> set[str]:
    """Every package of the checkout, named as the wheel installs it."""
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "ledger").rglob("__init__.py")}
    # the revisions and the probe travel inside the ledger, never as a top-level
    # `migrations` or `probes`
    found |= {"ledger." + ".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "probes").rglob("__init__.py")}
    return found | {"ledger.migrations", "ledger.migrations.versions"}


def test_the_package_list_names_every_package_of_the_tree():
    assert set(PYPROJECT["tool"]["setuptools"]["packages"]) == tree_packages()


def test_version_is_written_once_and_the_cli_reports_it():
    declared = PYPROJECT["project"]["version"]
    assert version("jax-compile-ledger") == declared
    out = subprocess.run([str(Path(sys.executable).parent / "ledger"), "--version"],
                         capture_output=True, text=True, check=True)
    assert out.stdout == f"ledger {declared}\n"


def test_missing_migrations_are_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(migrate, "_INSTALLED", tmp_path / "a")
    monkeypatch.setattr(migrate, "_CHECKOUT", tmp_path / "b")
    with pytest.raises(LedgerError, match=r"^the ledger's migrations are missing \(looked in .*\): "
                                          r"reinstall jax-compile-ledger$"):
        migrate.migrations_dir()


@pytest.mark.slow
def test_the_wheel_carries_the_revisions_and_no_top_level_migrations(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", str(REPO), "-w", str(tmp_path)],
                   check=True, capture_output=True)
    (wheel,) = tmp_path.glob("jax_compile_ledger-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    revisions = {f"ledger/migrations/versions/{p.name}" for p in (REPO / "migrations/versions").glob("*.py")}
    assert revisions and revisions <= names
    assert {"ledger/migrations/env.py", "ledger/migrations/ledger_stash.py",
            "ledger/migrations/script.py.mako"} <= names
    assert not [n for n in names if n.startswith(("migrations/", "probes/"))]
    # every module of the tree is in the wheel
    modules = {str(p.relative_to(REPO)) for p in (REPO / "ledger").rglob("*.py")}
    modules |= {f"ledger/{p.relative_to(REPO)}" for p in (REPO / "probes").rglob("*.py")}
    assert modules <= names


def test_the_probe_is_imported_as_it_installs():
    """probes/ installs as ledger.probes: a plain `import probes` works in a checkout (its
    folder is on the path) and nowhere else, and would meet a user's own `probes` there."""
    plain = re.compile(r"^\s*(from probes\b|import probes\b)|-m\W+probes\.", re.MULTILINE)
    found = [str(p.relative_to(REPO)) for top in ("ledger", "probes", "tests", "bench")
             for p in (REPO / top).rglob("*.py") if plain.search(p.read_text(encoding="utf-8"))]
    assert found == []
