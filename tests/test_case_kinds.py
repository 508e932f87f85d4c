"""The suite's own rules (conftest.py, case_kinds.py), run on tiny test trees in a
pytest of their own: a case that cannot run skips saying why, or fails under
LEDGER_REQUIRE_ALL; the summary line counts the cases by kind; a collection
error shows as itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .case_kinds import KINDS, REQUIRE_ALL, REQUIRE_ONE

REPO = Path(__file__).resolve().parent.parent
ZEROS = ", ".join(f"0 {kind}" for kind in KINDS)

KINDS_TREE = '''\
import pytest


def test_plain():
    pass


def test_skips_itself():
    pytest.skip("not today")


@pytest.mark.postgresql
def test_on_a_server():
    pass


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_on_both(backend):
    pass
'''


def _pytest(tree: Path, **env) -> subprocess.CompletedProcess:
    """pytest on `tree` with this suite's conftest as a plugin, no PostgreSQL server,
    and only the switches in `env`."""
    switches = {REQUIRE_ALL, *REQUIRE_ONE.values(), "LEDGER_TEST_PG_URL"}
    base = {k: v for k, v in os.environ.items() if k not in switches}
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "tests.conftest", str(tree)]
    return subprocess.run(command, cwd=tree, env={**base, "PYTHONPATH": str(REPO), **env}, capture_output=True,
                          text=True, timeout=300, check=False)


def _summary(run: subprocess.CompletedProcess) -> str:
    (line,) = [ln for ln in run.stdout.splitlines() if ln.startswith("cases: ")]
    return line


@pytest.mark.slow
def test_a_collection_error_shows_as_itself(tmp_path):
    """A module that cannot be imported (hypothesis missing, say): pytest's own report
    of it, and the summary line, not an AttributeError from the summary hook."""
    (tmp_path / "test_broken.py").write_text("import hypothesis_is_not_installed_here  # noqa: F401\n")
    (tmp_path / "test_fine.py").write_text("def test_fine():\n    pass\n")
    run = _pytest(tmp_path)
    out = run.stdout + run.stderr
    assert run.returncode == 2, out  # interrupted: 1 error during collection
    assert "ModuleNotFoundError: No module named 'hypothesis_is_not_installed_here'" in out
    assert "AttributeError" not in out and "INTERNALERROR" not in out, out
    assert _summary(run) == f"cases: 0 local, {ZEROS} ran; 0 skipped; 1 collection error"


@pytest.mark.slow
def test_without_a_switch_a_case_that_cannot_run_skips_saying_why(tmp_path):
    (tmp_path / "test_kinds.py").write_text(KINDS_TREE)
    run = _pytest(tmp_path)
    assert run.returncode == 0, run.stdout
    assert _summary(run) == f"cases: 2 local, {ZEROS} ran; 3 skipped (1 local, 2 postgresql)"
    why = "postgresql: no PostgreSQL server: set LEDGER_TEST_PG_URL (ci/postgres.sh start prints it)"
    assert run.stdout.splitlines()[-5:-1] == [  # each at its own case's line, as a skipif's is
        "=========================== short test summary info ============================",
        "SKIPPED [1] test_kinds.py:9: not today", f"SKIPPED [1] test_kinds.py:12: {why}",
        f"SKIPPED [1] test_kinds.py:17: {why}"]


@pytest.mark.slow
def test_under_require_all_every_case_runs_or_fails(tmp_path):
    (tmp_path / "test_kinds.py").write_text(KINDS_TREE)
    run = _pytest(tmp_path, **{REQUIRE_ALL: "1"})
    assert run.returncode == 1, run.stdout
    assert _summary(run) == f"cases: 2 local, {ZEROS} ran; 0 skipped; 3 did not run (1 local, 2 postgresql)"
    assert "skipped, but LEDGER_REQUIRE_ALL is set and every case must run: not today" in run.stdout
    assert run.stdout.count("a postgresql case cannot run here and LEDGER_REQUIRE_ALL is set: no PostgreSQL"
                            " server") == 2


@pytest.mark.slow
def test_require_pg_requires_only_postgresql(tmp_path):
    (tmp_path / "test_kinds.py").write_text(KINDS_TREE)
    run = _pytest(tmp_path, LEDGER_REQUIRE_PG="1")
    assert run.returncode == 1, run.stdout
    assert _summary(run) == f"cases: 2 local, {ZEROS} ran; 1 skipped (1 local); 2 did not run (2 postgresql)"
    assert run.stdout.count("a postgresql case cannot run here and LEDGER_REQUIRE_PG is set") == 2
