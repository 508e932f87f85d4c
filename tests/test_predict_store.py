"""Predictions stored and scored against the compile rows after them, on SQLite and
PostgreSQL: `ledger predict`, then `ledger probe` of the same transform, then the
report's per-host score and its line for a prediction that did not hold. (Apart from
tests/test_predict.py, which the jax legs run without a PostgreSQL server.)"""

from __future__ import annotations

import os

import pytest

from .conftest import run_cli

CELL = "imaging / toy / synthetic"


@pytest.mark.jax
def test_predictions_are_stored_and_scored_on_both_backends(any_db, tmp_path):
    cache = tmp_path / "jax-cache"
    args = ["--objective", "toy", "--transforms", "jit", "--cache-dir", cache, "--db", any_db]
    assert run_cli("predict", *args).exit_code == 1
    assert run_cli("probe", *args).exit_code == 0
    assert run_cli("predict", *args).exit_code == 0
    report = run_cli("report", "--db", any_db)
    assert report.exit_code == 0, report.output
    host = os.uname().nodename
    assert f"| {host} | 1 | 1 | 100% |" in report.output.splitlines()
    # a warm prediction the next compile contradicts is a finding with its own line
    for entry in cache.iterdir():
        entry.unlink()
    assert run_cli("probe", *args).exit_code == 0
    lines = run_cli("report", "--db", any_db).output.splitlines()
    assert f"| {host} | 2 | 1 | 50% |" in lines
    failed = [ln for ln in lines if ln.startswith("- prediction 2 (")]
    assert len(failed) == 1 and failed[0].endswith(f"{CELL} jit predicted warm, row 2 measured cold")
