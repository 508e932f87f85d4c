"""ledger.command, the verbs as a library: the notebook example of docs/python-api.md run
as written, and the CLI's shells held to calling it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ledger import command
from ledger.errors import LedgerError
from ledger.storage.revisions import HEAD

from .conftest import CORPUS, CORPUS_STATES, query

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "python-api.md"


def _example() -> str:
    (block,) = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    return block


@pytest.mark.jax
@pytest.mark.slow
def test_the_notebook_example_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = _example().replace('"/tmp/jax-cache"', repr(str(tmp_path / "jax-cache")))
    first, second = {}, {}
    exec(code, first)  # noqa: S102 - the documented example, on purpose
    exec(code, second)  # noqa: S102
    assert [r["cache_state"] for r in first["run"].rows] == ["cold", "cold"]
    assert [r["cache_state"] for r in second["run"].rows] == ["warm", "warm"]
    assert second["result"].summary().startswith("check run 2 (tolerance 1.5x): ")
    assert second["columns"] == ["transform", "cache_state", "compile_s"] and len(second["rows"]) == 4
    assert query(tmp_path / "lens-ledger.db", "SELECT count(*) FROM check_runs") == [(2,)]


def test_each_verb_returns_what_the_cli_prints(tmp_path):
    db = tmp_path / "ledger.db"
    summary = command.import_json([CORPUS], db)
    assert (summary.added_compile, summary.by_state) == (sum(CORPUS_STATES.values()), CORPUS_STATES)
    assert command.current(db) == (HEAD, "head")
    plan = command.pins_update(db)
    assert plan.summary() == "25 pins: 25 new, 0 repinned, 0 unchanged"
    columns, rows = command.pins_list(db, filters={"hostname": "DESKTOP-H143S82"})
    assert columns[:3] == ["id", "hardware", "hostname"] and rows
    assert command.check(db).exit_code in (0, 1)
    assert command.report(db).startswith("### what to do\n\nFrom check run 1 (")
    assert "\nCompile times in seconds. Each table is one comparability key" in command.report(db)
    assert command.export(db, "csv").splitlines()[0].startswith("transform,")
    assert command.sql("SELECT count(*) AS n FROM compile_records", db) == (["n"], [(89,)])


def test_a_reading_verb_never_creates_a_ledger(tmp_path):
    db = tmp_path / "nothing.db"
    for verb in (lambda: command.export(db), lambda: command.pins_list(db), lambda: command.explain(1, db),
                 lambda: command.report(db), lambda: command.check(db)):
        with pytest.raises(LedgerError):
            verb()
    assert not db.exists()


def test_the_cli_shells_open_no_ledger_themselves():
    """Who opens the ledger is ledger.command (and the read-only `ledger sql`, the
    sweep's own directory): a shell parses, calls, prints."""
    allowed = {"sql.py", "sweep.py"}
    opening = [p.name for p in (REPO / "ledger" / "cli").glob("*.py")
               if p.name not in allowed and "open_ledger" in p.read_text()]
    assert opening == []
