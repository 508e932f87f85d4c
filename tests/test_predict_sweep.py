"""`ledger sweep plan --predict`: the tasks that will compile cold on this node, before
anything is submitted; real JAX keys, a real cache dir and ledger."""

from __future__ import annotations

import pytest

from .conftest import query, run_cli

SPEC = '''objectives = ["toy"]
transforms = ["jit", "vag"]
cache = "{cache}"
[grid]
instrument = ["hst", "euclid"]
'''


@pytest.mark.jax
def test_plan_predict_names_the_cold_tasks_of_a_cache_dir_and_their_cost(tmp_path, db):
    cache = tmp_path / "jax-cache"
    probe = run_cli("probe", "--objective", "toy", "--transforms", "jit", "--instrument", "hst",
                    "--cache-dir", cache, "--db", db)
    assert probe.exit_code == 0, probe.output
    spec = tmp_path / "grid.toml"
    spec.write_text(SPEC.format(cache=cache))
    before = sorted(p.name for p in cache.iterdir())
    plan = run_cli("sweep", "plan", "--predict", spec, "--db", db)
    assert plan.exit_code == 0, plan.output
    lines = plan.output.splitlines()
    # the instrument is in the cell, not in the program: task 1's jit is task 0's entry
    assert [ln.split()[:4] for ln in lines[2:-1]] == [["0", "toy", "instrument=hst", "vag"],
                                                       ["1", "toy", "instrument=euclid", "vag"]]
    assert all(" no entry, and no warm row for this cell " in ln for ln in lines[2:-1])
    assert lines[-1] == "2 of 2 tasks will compile cold (2 cold compiles); warm them first: tasks 0, 1"
    assert sorted(p.name for p in cache.iterdir()) == before
    assert query(db, "SELECT COUNT(*) FROM predictions") == [(0,)]  # a plan stores nothing


@pytest.mark.jax
def test_plan_predict_on_the_sweeps_own_dirs_is_all_cold_and_needs_no_ledger(tmp_path, db):
    spec = tmp_path / "grid.toml"
    spec.write_text(SPEC.format(cache="per-task"))
    plan = run_cli("sweep", "plan", "--predict", spec, "--db", db)
    assert plan.exit_code == 0, plan.output
    assert plan.output.splitlines()[-1] == (
        "2 of 2 tasks will compile cold (4 cold compiles); warm them first: tasks 0, 1")
    assert plan.output.count("the sweep's fresh cache dir") == 4
    assert not db.exists()
    spec.write_text(SPEC.format(cache="none"))
    off = run_cli("sweep", "plan", "--predict", spec, "--db", db)
    assert (off.exit_code, off.output) == (
        2, 'error: cache = "none": nothing is cached, so there is nothing to predict\n')


@pytest.mark.jax
@pytest.mark.slow
def test_plan_predict_stops_a_task_whose_builder_never_returns(tmp_path, db):
    from ledger.errors import LedgerError
    from ledger.sweep.predict import predict_tasks
    from ledger.sweep.spec import from_dict

    (tmp_path / "stuck.py").write_text("import time\n\ndef build(cell):\n    time.sleep(3600)\n")
    spec = from_dict({"objectives": ["stuck:build"], "transforms": ["jit"], "cache": str(tmp_path / "c")},
                     "stuck")
    with pytest.raises(LedgerError) as err:
        predict_tasks(spec, str(db), timeout_s=2)
    assert str(err.value) == ("predict timed out after 2 s: objective stuck:build did not build and trace "
                              "in time (its process was killed)")
    assert err.value.exit_code == 2
