"""The suite's own rules (conftest.py, case_kinds.py, alone.py, fast_budget.py), run on
tiny test trees in a pytest of their own: a case that cannot run skips saying why, or
fails under LEDGER_REQUIRE_ALL; the summary line counts the cases by kind, on both
cores too; a collection error shows as itself; the alone cases run last and by
themselves; the fast tier fails a case over its budget."""

from __future__ import annotations

import os
import subprocess
import sys
from itertools import pairwise
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


def _pytest(tree: Path, *args: str, **env) -> subprocess.CompletedProcess:
    """pytest on `tree` with this suite's conftest as a plugin, no PostgreSQL server,
    and only the switches in `env`."""
    switches = {REQUIRE_ALL, *REQUIRE_ONE.values(), "LEDGER_TEST_PG_URL", "LEDGER_TEST_TIER"}
    base = {k: v for k, v in os.environ.items() if k not in switches}
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "tests.conftest", *args,
               str(tree)]
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


@pytest.mark.slow
def test_on_both_cores_the_summary_line_and_require_all_say_the_same(tmp_path):
    (tmp_path / "test_kinds.py").write_text(KINDS_TREE)
    run = _pytest(tmp_path, "-n", "2", **{REQUIRE_ALL: "1"})
    assert run.returncode == 1, run.stdout
    assert _summary(run) == f"cases: 2 local, {ZEROS} ran; 0 skipped; 3 did not run (1 local, 2 postgresql)"
    plain = _pytest(tmp_path, "-n", "2")
    assert _summary(plain) == f"cases: 2 local, {ZEROS} ran; 3 skipped (1 local, 2 postgresql)"


ALONE_TREE = '''\
import json, os, time
import pytest


def _log(name):
    start = time.monotonic()
    time.sleep(0.3)
    with open(os.environ["ALONE_LOG"], "a") as f:
        f.write(json.dumps([name, os.environ.get("PYTEST_XDIST_WORKER"), start, time.monotonic()]) + "\\n")


@pytest.mark.parametrize("i", range(8))
def test_plain(i):
    _log(f"plain{i}")


@pytest.mark.alone
@pytest.mark.parametrize("i", range(3))
def test_alone(i):
    _log(f"alone{i}")


@pytest.mark.serial
@pytest.mark.parametrize("i", range(3))
def test_serial(i):
    _log(f"serial{i}")
'''


@pytest.mark.slow
@pytest.mark.parametrize("select", [[], ["-k", "alone"], ["-k", "serial or alone"]], ids=["all", "alone only", "no plain"])
def test_on_both_cores_alone_cases_run_last_alone_and_serial_ones_first_one_at_a_time(tmp_path, select):
    import json

    (tmp_path / "test_tree.py").write_text(ALONE_TREE)
    run = _pytest(tmp_path, "-n", "2", *select, ALONE_LOG=str(tmp_path / "log.jsonl"))
    assert run.returncode == 0, run.stdout + run.stderr
    rows = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    kind = {name: sorted((r for r in rows if r[0].startswith(name)), key=lambda r: r[2])
            for name in ("plain", "alone", "serial")}
    plain, alone, serial = kind["plain"], kind["alone"], kind["serial"]
    assert len(alone) == 3 and len(plain) == (0 if select else 8) and len(serial) == (3 if select != ["-k", "alone"] else 0)
    assert len({r[1] for r in plain}) == (0 if select else 2)  # the rest did run on both
    assert len({r[1] for r in alone}) == 1
    assert all(a[2] >= p[3] for a in alone for p in plain + serial)  # after every other case ended
    assert all(b[2] >= a[3] for a, b in pairwise(alone))  # one at a time
    assert len({r[1] for r in serial}) <= 1
    assert all(b[2] >= a[3] for a, b in pairwise(serial))  # one at a time...
    if not select:  # ...from the start, beside the plain ones on the other worker
        assert serial[0][2] <= min(p[2] for p in plain if p[1] == serial[0][1]), rows
        assert any(p[1] != s[1] and p[2] < s[3] and s[2] < p[3] for p in plain for s in serial), rows


BUDGET_TREE = '''\
import time


def test_cheap():
    pass


def test_works_too_long():
    end = time.process_time() + 0.7
    while time.process_time() < end:
        pass


def test_waits_too_long():
    time.sleep(3.5)
'''


@pytest.mark.slow
def test_the_fast_tier_fails_a_case_over_its_cpu_or_wall_budget(tmp_path):
    (tmp_path / "test_budget.py").write_text(BUDGET_TREE)
    run = _pytest(tmp_path, LEDGER_TEST_TIER="fast")
    assert run.returncode == 1, run.stdout
    assert "3 passed, 2 errors" in run.stdout
    errors = run.stdout.split("= ERRORS =")[1]
    over = "over the fast tier's budget: "
    assert errors.count(over) == 2, errors
    works, waits = (errors.split(f"ERROR at teardown of {name}")[1].split(over)[1] for name in
                    ("test_works_too_long", "test_waits_too_long"))
    assert works.startswith("0.7") and waits.startswith("0.0"), errors
    assert _pytest(tmp_path).returncode == 0  # outside the tier, no budget


def test_the_budget_stretches_for_a_busy_or_slow_machine_and_never_past_twice():
    from .fast_budget import BUSY, REFERENCE_S, stretch

    quiet, busy = BUSY / 2, BUSY + 1
    assert [stretch(quiet, REFERENCE_S), stretch(quiet, REFERENCE_S / 2), stretch(quiet, REFERENCE_S * 1.5),
            stretch(busy, REFERENCE_S), stretch(busy, REFERENCE_S * 1.5), stretch(quiet, REFERENCE_S * 10)] == \
        [1.0, 1.0, 1.5, 2.0, 2.0, 2.0]
