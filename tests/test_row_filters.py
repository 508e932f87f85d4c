"""Row filters (--hardware, --hostname, --dataset-class, --model-type, --instrument,
--transform) that match no row: every command that takes them refuses, one line, exit 2.

`ledger check --transform bogus` used to exit 0 with an empty check: a typo in a CI
filter gave a green check. Exit 2 is a usage error, kept apart from check's exit 1
for findings. One helper decides it for every command (ledger.watch.pins.refuse_unmatched).
"""

from __future__ import annotations

import pytest

from .conftest import query, run_cli
from .ledgers import add, rec

CHECK_CLEAN = "check run 1 (tolerance 1.5x): 1 ok, 0 regression, 0 inconclusive, 0 went-cold\n"


@pytest.fixture
def ledger_db(any_db, tmp_path):
    """A small ledger (SQLite and PostgreSQL): one pinned warm row and a newer warm row of the same key."""
    add(any_db, tmp_path, rec(compile_s=2.0))
    assert run_cli("pins", "update", "--db", any_db).exit_code == 0
    add(any_db, tmp_path, rec(compile_s=2.2, timestamp="2026-07-02T10:00:00"))
    return any_db


COMMANDS = {
    "check": (("check",), "nothing to check"),
    "pins update": (("pins", "update"), "nothing to pin"),
    "pins update --check": (("pins", "update", "--check"), "nothing to pin"),
    "pins list": (("pins", "list"), "no pins to list"),
    "report": (("report",), "nothing to report"),
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("filters, shown", [
    (["--transform", "bogus"], "--transform bogus"),
    (["--hostname", "nomatch"], "--hostname nomatch"),
    (["--model-type", "mge", "--hostname", "nomatch"], "--hostname nomatch --model-type mge"),
], ids=["transform", "hostname", "one-of-two"])
@pytest.mark.slow
def test_a_filter_that_matches_no_row_is_refused(ledger_db, command, filters, shown):
    args, consequence = COMMANDS[command]
    if command == "report" and filters[0] == "--transform":
        filters, shown = ["--model-type", "bogus"], "--model-type bogus"  # report filters by model type and host
    runs = query(ledger_db, "SELECT count(*) FROM check_runs")
    result = run_cli(*args, *filters, "--db", ledger_db)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"error: no compile row matches {shown}: {consequence}\n"
    assert query(ledger_db, "SELECT count(*) FROM check_runs") == runs  # nothing stored


def test_check_with_a_matching_filter_still_checks(ledger_db):
    result = run_cli("check", "--transform", "jit", "--hostname", "node1", "--db", ledger_db)
    assert (result.exit_code, result.output) == (0, CHECK_CLEAN)


def test_check_findings_still_exit_1_not_2(ledger_db, tmp_path):
    add(ledger_db, tmp_path, rec(compile_s=20.0, timestamp="2026-07-03T10:00:00"))
    result = run_cli("check", "--transform", "jit", "--db", ledger_db)
    assert result.exit_code == 1 and result.output.startswith("regression ")


@pytest.mark.slow
def test_pins_with_a_matching_filter_still_work(ledger_db):
    update = run_cli("pins", "update", "--model-type", "mge", "--db", ledger_db)
    assert (update.exit_code, update.output) == (0, "1 pins: 0 new, 0 repinned, 1 unchanged\n")
    listed = run_cli("pins", "list", "--json", "--transform", "jit", "--db", ledger_db)
    assert listed.exit_code == 0 and '"row_id": 1' in listed.stdout


def test_a_matching_filter_with_no_pin_lists_none(ledger_db, tmp_path):
    """A filter that matches rows but no pin is an empty answer, not an error."""
    add(ledger_db, tmp_path, rec(transform="grad", cache_state="cold"))
    listed = run_cli("pins", "list", "--json", "--transform", "grad", "--db", ledger_db)
    assert (listed.exit_code, listed.stdout.strip()) == (0, "[]")


def test_report_with_a_matching_filter_still_reports(ledger_db):
    result = run_cli("report", "--hostname", "node1", "--model-type", "mge", "--db", ledger_db)
    assert result.exit_code == 0
    assert result.stdout == run_cli("report", "--db", ledger_db).stdout
    assert "### local_cpu · node1 · jax 0.10.2" in result.stdout


def test_no_filter_on_an_empty_ledger_is_no_error(db):
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    assert run_cli("pins", "list", "--db", db).exit_code == 0
    assert run_cli("report", "--db", db).exit_code == 0
