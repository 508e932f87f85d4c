"""The kept cache cells (ledger/watch/cells.py, revision 0009) and the verdicts a check
takes from its previous run, against a from-scratch recompute, after any sequence of
imports, probe rows, merges, pin updates, deletes, updates and inserts into old ids,
on both backends; and the stale-state bugs they exist to stop, each as a real check."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.record import COLD, NONE, WARM
from ledger.rows import key_text
from ledger.storage.open import open_ledger
from ledger.watch import cells
from ledger.watch.check import judge, run_check

from .conftest import examples, query, run_cli
from .ledgers import add, every_finding_kind, rec
from .writes import BACKENDS, apply, fresh, operations

_PINNED = "SELECT pin_id, verdict, row_id, n_rows, compile_s, ratio, cause, rule, threshold_s FROM verdicts" \
    " WHERE check_run_id = :run AND pin_id IS NOT NULL AND verdict IN ('ok', 'regression', 'inconclusive')"


def _pinned_verdicts(conn, run_id: int) -> set:
    return {tuple(r) for r in conn.execute(sa.text(_PINNED), {"run": run_id})}


def assert_check_matches_a_recompute(engine) -> None:
    """A check (which folds the cells, and may take its previous run's verdicts and cache
    findings) against the same check judging every row from nothing, in a transaction rolled
    back: the same pinned verdicts, the same cache findings line for line, the same newest
    time in a run; and the kept cells as a recompute makes them."""
    stored = run_check(engine)
    with engine.connect() as conn:
        pinned = _pinned_verdicts(conn, stored.run_id)
    with engine.connect() as conn, conn.begin() as txn:
        fresh = judge(conn, rejudge=True)
        assert _pinned_verdicts(conn, fresh.run_id) == pinned
        assert _said(stored) == _said(fresh)
        # the newest time in a run (0022), carried from run to run, as reading every row finds it
        bound = "SELECT newest_run_time FROM check_runs WHERE id = :id"
        assert conn.execute(sa.text(bound), {"id": stored.run_id}).scalar() == \
            conn.execute(sa.text(bound), {"id": fresh.run_id}).scalar()
        txn.rollback()
    with engine.connect() as conn:
        assert cells.stored(conn) == cells.summarize(conn)
        assert _rows_of(cells.stored(conn)) == _rows_of_every_cell(conn)
        top = conn.execute(sa.text("SELECT COALESCE(MAX(id), 0) FROM compile_records")).scalar()
        assert conn.execute(sa.text("SELECT upto FROM cache_cells_state")).scalar() == top


def _rows_of(summaries: dict[str, tuple]) -> dict[str, tuple]:
    """Each cell's summary as the rows it names: (newest row, its state, last warm row,
    first cold row, cold count)."""
    out = {}
    for key, (newest, last_warm, first_cold, n_cold) in summaries.items():
        stamp, state = cells.split_newest(newest)
        out[key] = (cells.row_id(stamp), state, cells.row_id(last_warm), cells.row_id(first_cold), n_cold)
    return out


def _rows_of_every_cell(conn) -> dict[str, tuple]:
    """What _rows_of reads from the summaries, from the rows in Python, ordered as every
    reader orders them, by (time, id): the newest ok warm, cold or none row and its state,
    the last warm row, the first cold row, the cold count."""
    sql = "SELECT id, cell_id, cache_dir, cache_state, timestamp FROM compile_records" \
          f" WHERE COALESCE(status, 'ok') = 'ok' AND cache_state IN ('{WARM}', '{COLD}', '{NONE}')"
    by_cell: dict[tuple, list] = {}
    for row_id, cell, cache_dir, state, time in conn.execute(sa.text(sql)).all():
        by_cell.setdefault((cell, cache_dir), []).append((time or "", row_id, state))
    key = cells.cell_keys(cells.cell_values(conn))
    out = {}
    for (cell, cache_dir), rows in by_cell.items():
        _, newest, state = max(rows)
        warm = [r for r in rows if r[2] == WARM]
        cold = [r for r in rows if r[2] == COLD]
        out[key(cell, cache_dir)] = (newest, state, max(warm)[1] if warm else None, min(cold)[1] if cold else None,
                                     len(cold))
    return out


def replay(backend, ops, holds, at_end: int = 1) -> None:
    """Apply the generated writes to a fresh ledger, asserting ``holds(engine)`` after each
    one drawn to be checked, and ``at_end`` times at the end."""
    with fresh(backend) as db, tempfile.TemporaryDirectory() as tmp:
        assert run_cli("db", "upgrade", "--db", db).exit_code == 0
        with open_ledger(str(db), "write") as ledger:
            for op, check_after in ops:
                apply(op, db, ledger.engine, Path(tmp))
                if check_after:
                    holds(ledger.engine)
            for _ in range(at_end):
                holds(ledger.engine)


# -- the stale states a kept summary could show, each through a real check --------------

def _check(db) -> str:
    return run_cli("check", "--db", db).output


@pytest.mark.parametrize("change", ["DELETE FROM compile_records WHERE cache_state = 'cold'",
                                    "UPDATE compile_records SET status = 'failed' WHERE cache_state = 'cold'"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cold_row_deleted_or_failed_afterwards_is_no_longer_a_went_cold(backend, change, tmp_path):
    with fresh(backend) as db:
        add(db, tmp_path, rec(), rec(cache_state="cold", compile_s=9.0, timestamp="2026-07-02T10:00:00"))
        assert _check(db).startswith("went-cold ")
        with open_ledger(str(db), "write") as ledger, ledger.engine.begin() as conn:
            conn.execute(sa.text(change))
        assert _check(db) == "check run 2 (tolerance 1.5x): 0 ok, 0 regression, 0 inconclusive, 0 went-cold\n"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_time_that_is_another_s_prefix_sorts_before_it(backend, tmp_path):
    """"10:00:00" sorts before "10:00:00+00:00" (rows.oldest_first), though its id is the
    smaller: the cold row is the cell's newest, read from the warm row before it, and a
    went-cold. A stamp that sorted the shorter time last ("time|id") took the warm row for
    the newest and said nothing."""
    with fresh(backend) as db:
        add(db, tmp_path, rec(timestamp="2026-07-02T10:00:00"),
            rec(cache_state="cold", compile_s=9.0, timestamp="2026-07-02T10:00:00+00:00"))
        assert _check(db) == (
            "went-cold     local_cpu/node1 jax 0.10.2 imaging/mge/hst jit (n_batch 1, batch_size 1), cache dir"
            " /tmp/jax-cache: row 2 is cold: cause unknown (last warm row 1)\n"
            "check run 1 (tolerance 1.5x): 0 ok, 0 regression, 0 inconclusive, 1 went-cold\n")


def test_a_row_inserted_below_the_fold_is_folded(tmp_path):
    db = tmp_path / "ledger.db"
    add(db, tmp_path, rec(), rec(tag="gone", timestamp="2026-07-02T10:00:00"),
        rec(tag="warm again", timestamp="2026-07-03T10:00:00"))
    con = sqlite3.connect(db)
    with con:
        con.execute("DELETE FROM compile_records WHERE tag = 'gone'")
    con.close()
    assert _check(db) == "check run 1 (tolerance 1.5x): 0 ok, 0 regression, 0 inconclusive, 0 went-cold\n"
    assert query(db, "SELECT upto FROM cache_cells_state") == [(3,)]
    con = sqlite3.connect(db)
    with con:  # a cold row at the freed id 2, newer than everything: the cell's newest
        con.execute("INSERT INTO compile_records (id, transform, dataset_class, model_type, instrument, n_batch,"
                    " batch_size, hardware, jax_version, cache_dir, mixed_precision, hostname, timestamp, cache_state,"
                    " status, compile_s) SELECT 2, transform, dataset_class, model_type, instrument, n_batch,"
                    " batch_size, hardware, jax_version, cache_dir, mixed_precision, hostname, '2026-07-04T10:00:00',"
                    " 'cold', 'ok', 9.0 FROM compile_records WHERE id = 1")
    con.close()
    assert query(db, "SELECT upto FROM cache_cells_state") == [(0,)]  # the insert trigger reset the fold
    assert _check(db).startswith("went-cold ")


def test_a_check_folds_only_the_new_rows_and_the_cells_say_so(tmp_path):
    db = tmp_path / "ledger.db"
    add(db, tmp_path, rec(), rec(transform="grad", cache_state="cold"))
    _check(db)
    assert query(db, "SELECT upto FROM cache_cells_state") == [(2,)]
    assert query(db, "SELECT n_cold, first_cold IS NOT NULL FROM cache_cells ORDER BY n_cold") == [(0, 0), (1, 1)]
    add(db, tmp_path, rec(transform="grad", cache_state="cold", timestamp="2026-07-02T10:00:00"))
    _check(db)
    assert query(db, "SELECT upto FROM cache_cells_state") == [(3,)]
    assert query(db, "SELECT n_cold FROM cache_cells ORDER BY n_cold") == [(0,), (2,)]


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_triggers_are_there_at_head_and_gone_below_0009(backend, tmp_path):
    """And the writers that set them aside for a batch (an import, a merge: cells.appending,
    cell_ids.own_ids) leave every one as it was."""
    with fresh(backend) as db:
        assert run_cli("db", "upgrade", "--db", db).exit_code == 0
        source = tmp_path / "source.db"
        add(source, tmp_path, rec(tag="merged"))
        add(db, tmp_path, rec())
        assert run_cli("merge", source, "--db", db).exit_code == 0
        sql = ("SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name" if backend == "sqlite" else
               "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal ORDER BY tgname")
        names = ["cache_cells_on_delete", "cache_cells_on_insert"] + (
            ["cache_cells_on_truncate"] if backend == "postgresql" else []) + ["cache_cells_on_update",
                                                                               "cell_ids_on_insert",
                                                                               "cell_ids_on_key_update"]
        assert [r[0] for r in query(db, sql)] == names
        assert run_cli("db", "downgrade", "0008", "--db", db).exit_code == 0
        assert query(db, sql) == []
        assert run_cli("db", "upgrade", "--db", db).exit_code == 0
        assert [r[0] for r in query(db, sql)] == names



# -- a check takes its previous run's pinned verdicts only where they still stand -------

def _ok_rows(db, run: int) -> list[tuple]:
    return query(db, f"SELECT n_rows, row_id FROM verdicts WHERE check_run_id = {run} AND verdict = 'ok'")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_check_judges_only_the_rows_since_its_last_run_and_counts_all(backend, tmp_path):
    with fresh(backend) as db:
        add(db, tmp_path, rec())
        assert run_cli("pins", "update", "--db", db).exit_code == 0
        first = add(db, tmp_path, *(rec(compile_s=2.1, timestamp=f"2026-07-0{d}T10:00:00") for d in (2, 3)))
        _check(db)
        assert query(db, "SELECT upto FROM check_runs") == [(first[-1],)] and _ok_rows(db, 1) == [(2, first[-1])]
        (slow,) = add(db, tmp_path, rec(compile_s=20.0, timestamp="2026-07-04T10:00:00"))
        assert _check(db).startswith(f"regression    local_cpu/node1 jax 0.10.2 imaging/mge/hst jit"
                                     f" (n_batch 1, batch_size 1): row {slow} ")
        assert _ok_rows(db, 2) == [(2, first[-1])]
        assert query(db, "SELECT row_id FROM verdicts WHERE check_run_id = 2 AND verdict = 'regression'") == [(slow,)]


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_row_deleted_after_a_check_is_not_counted_by_the_next(backend, tmp_path):
    with fresh(backend) as db:
        add(db, tmp_path, rec())
        assert run_cli("pins", "update", "--db", db).exit_code == 0
        rows = add(db, tmp_path, *(rec(compile_s=s, timestamp=f"2026-07-0{d}T10:00:00")
                                   for s, d in ((2.1, 2), (20.0, 3))))
        assert _check(db).startswith("regression ")
        with open_ledger(str(db), "write") as ledger, ledger.engine.begin() as conn:
            conn.execute(sa.text(f"DELETE FROM compile_records WHERE id = {rows[1]}"))
        assert _check(db) == "check run 2 (tolerance 1.5x): 1 ok, 0 regression, 0 inconclusive, 0 went-cold\n"


def test_a_repin_or_other_options_judge_every_row_again(tmp_path):
    db = tmp_path / "ledger.db"
    add(db, tmp_path, rec())
    assert run_cli("pins", "update", "--db", db).exit_code == 0
    add(db, tmp_path, rec(compile_s=2.8, timestamp="2026-07-02T10:00:00"))
    assert _check(db).endswith(": 1 ok, 0 regression, 0 inconclusive, 0 went-cold\n")
    assert run_cli("check", "--tolerance", "1.1", "--db", db).output.startswith("regression ")
    add(db, tmp_path, rec(compile_s=1.0, timestamp="2026-07-03T10:00:00"))
    assert run_cli("pins", "update", "--repin", "--db", db).exit_code == 0  # pinned at 1.0 s now
    # the same options as run 2, but the 2.8 s row is older than the new pin: not judged
    assert run_cli("check", "--tolerance", "1.1", "--db", db).output == (
        "check run 3 (tolerance 1.1x): 0 ok, 0 regression, 0 inconclusive, 0 went-cold\n")


def test_a_table_rebuilt_without_its_triggers_is_folded_from_scratch(tmp_path):
    db = tmp_path / "ledger.db"
    add(db, tmp_path, rec(), rec(cache_state="cold", compile_s=9.0, timestamp="2026-07-02T10:00:00"))
    assert _check(db).startswith("went-cold ")
    # what a batch-mode migration that does not keep them leaves on SQLite: the table
    # copied into a new one, bare (0011 and 0012 keep them now; a later one may not)
    con = sqlite3.connect(db)
    with con:
        for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
            con.execute(f'DROP TRIGGER "{name}"')
        con.execute("DELETE FROM compile_records WHERE cache_state = 'cold'")  # written while nothing watched
    con.close()
    assert query(db, "SELECT name FROM sqlite_master WHERE type = 'trigger'") == []
    assert _check(db) == "check run 2 (tolerance 1.5x): 0 ok, 0 regression, 0 inconclusive, 0 went-cold\n"


# -- the cache findings a check takes from its previous run are the ones it would read ---

def _said(result) -> list[tuple]:
    """A check's findings, as what it says of each (the run's own ids left out)."""
    return [(f["verdict"], f["row_id"], f["cause"], f["fails"], f.get("old_jax"), f.get("old_cache_dir"),
             f["pin_id"]) for f in result.findings]


def _from_nothing(engine) -> list[tuple]:
    """The same check with nothing taken from an earlier run, rolled back."""
    with engine.connect() as conn, conn.begin() as txn:
        said = _said(judge(conn, rejudge=True))
        txn.rollback()
    return said


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_second_check_with_no_new_rows_reads_no_cell_and_says_the_same(backend, tmp_path, monkeypatch):
    from ledger.watch import findings

    with fresh(backend) as db:
        rows = every_finding_kind(db, tmp_path)
        with open_ledger(str(db), "write") as ledger:
            first = run_check(ledger.engine)
            found = {(f["verdict"], f["row_id"], f["fails"]) for f in first.findings}
            assert found == {("regression", rows["regression"], True), ("went-cold", rows["went-cold"], True),
                             ("cache-off", rows["cache-off"], True), ("cache-not-reused", rows["cache-not-reused"], True),
                             ("cache-not-reused", rows["by design"], False), ("jax-changed", rows["jax-changed"], False),
                             ("went-cold", rows["still cold"], True)}
            assert _said(first) == _from_nothing(ledger.engine)

            def no_read(*args, **kw):
                raise AssertionError("a cell's rows read again")

            with monkeypatch.context() as m:  # nothing new: every lineage's findings come from the first run
                m.setattr(findings, "lineage_rows", no_read)
                second = run_check(ledger.engine)
            assert (_said(second), second.counts, second.exit_code) == (_said(first), first.counts, first.exit_code)
            assert _said(second) == _from_nothing(ledger.engine)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_one_new_row_changes_only_its_cell(backend, tmp_path):
    with fresh(backend) as db:
        rows = every_finding_kind(db, tmp_path)
        with open_ledger(str(db), "write") as ledger:
            first = _said(run_check(ledger.engine))
            # the cache still off: the same cache-off, from its first none row
            add(db, tmp_path, rec(transform="vmap", cache_dir="", cache_state="none", timestamp=rows["next"]))
            second = _said(run_check(ledger.engine))
            assert second == first == _from_nothing(ledger.engine)
            # the went-cold cell warm again: that finding goes, and nothing else changes
            add(db, tmp_path, rec(transform="grad", timestamp=rows["next"]))
            third = _said(run_check(ledger.engine))
            assert third == [f for f in first if f[1] != rows["went-cold"]] == _from_nothing(ledger.engine)
            # a third cold run of the by-design cell, in another dir and not kept out by JAX's threshold:
            # no longer by design, and no new dir each run (two shared one): said on the new row, unknown
            (new,) = add(db, tmp_path, rec(cache_state="cold", model_type="knn", cache_dir="/j3", timestamp=rows["next"]))
            fourth = _said(run_check(ledger.engine))
            changed = [f for f in fourth if f not in third]
            assert [(f[0], f[1], f[2], f[3]) for f in changed] == [("cache-not-reused", new, (
                "3 cold runs in /tmp/jax-cache, never warm: cause unknown (the rows show no missing entry)"), False)]
            assert [f for f in third if f not in fourth] == [f for f in third if f[1] == rows["by design"]]
            assert fourth == _from_nothing(ledger.engine)
            # a none row written late with an older time, after the last warm row: the cache went off there
            (off,) = add(db, tmp_path, rec(transform="vmap", cache_dir="", cache_state="none",
                                           timestamp="2026-07-05T12:00:00"))
            fifth = _said(run_check(ledger.engine))
            assert [f[:2] for f in fifth if f[0] == "cache-off"] == [("cache-off", off)]
            assert fifth == _from_nothing(ledger.engine)


jax_records = st.builds(
    rec,
    transform=st.sampled_from(["jit", "grad"]),
    jax_version=st.sampled_from(["0.10.2", "0.10.3"]),
    cache_dir=st.sampled_from(["", "/c1", "/c2"]),
    cache_state=st.sampled_from(["warm", "cold", "none", "cold"]),
    status=st.sampled_from(["ok", "ok", "failed"]),
    timestamp=st.sampled_from(["2026-07-01T10:00:00", "2026-07-02T10:00:00", "2026-07-03T10:00:00"]),
    run_id=st.sampled_from([None, "r1", "r2"]),
    cache_files_before=st.sampled_from([None, 0, 3]),
    cache_files_after=st.sampled_from([None, 3]),
    compile_s=st.sampled_from([0.5, 2.0, 9.0]),
    tag=st.sampled_from(["a", "b", "c", "d"]),
)
cache_writes = st.lists(st.tuples(st.one_of(
    st.tuples(st.just("import"), st.lists(jax_records, min_size=1, max_size=4)),
    st.tuples(st.just("probe"), jax_records),
    st.tuples(st.just("delete"), st.integers(0, 7)),
    st.tuples(st.just("update"), st.integers(0, 7), st.sampled_from(["status = 'failed'", "cache_state = 'warm'",
                                                                    "cache_state = 'none'", "cache_dir = '/c3'"])),
    st.tuples(st.just("fill-gap"), jax_records),
), st.booleans()), min_size=1, max_size=8)


# One property over both kinds of writes: each example's checks are held to a recompute in
# every respect at once (the pinned verdicts, the cache findings, the cells), not replayed once
# per respect: two properties of 25 examples, each over one kind of writes, cost more than this.
@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=examples(30), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations | cache_writes)
def test_kept_cells_verdicts_and_cache_findings_equal_a_recompute_after_any_writes(backend, ops):
    replay(backend, ops, assert_check_matches_a_recompute, at_end=2)  # the second takes every cell from the first


@pytest.mark.parametrize("backend", BACKENDS)
def test_findings_kept_by_a_build_whose_passes_differ_are_not_taken_over(backend, tmp_path):
    """What the cache passes take from the last run is that run's word for it: a run by
    another version of the passes (the kept state says which) is folded anew instead."""
    import json

    from ledger.record import CACHE_CELL

    with fresh(backend) as db:
        rows = every_finding_kind(db, tmp_path)
        with open_ledger(str(db), "write") as ledger:
            run_check(ledger.engine)

            def say_otherwise(conn) -> None:  # what another build found of the by-design cell: 99 runs
                facts = json.loads(conn.execute(sa.text("SELECT facts FROM verdicts WHERE row_id = :row"),
                                                {"row": rows["by design"]}).scalar())
                facts["cause"]["runs"] = 99
                conn.execute(sa.text("UPDATE verdicts SET facts = :f WHERE row_id = :row"),
                             {"f": json.dumps(facts), "row": rows["by design"]})

            with ledger.engine.begin() as conn:
                say_otherwise(conn)
            taken = {f["row_id"]: f["cause"] for f in run_check(ledger.engine).findings}
            assert taken[rows["by design"]].startswith("99 cold runs ")  # the same build: taken over, unread
            with ledger.engine.begin() as conn:
                say_otherwise(conn)
                conn.execute(sa.text("UPDATE cache_cells_state SET cell_fields = :old"),
                             {"old": json.dumps(CACHE_CELL)})  # as the build before the version kept it
            said = run_check(ledger.engine)
            assert {f["row_id"]: f["cause"] for f in said.findings}[rows["by design"]].startswith("2 cold runs ")
            assert _said(said) == _from_nothing(ledger.engine)


_VALUE = st.none() | st.text(max_size=12) | st.integers(-3, 3)


@pytest.mark.slow  # 0.25 s of the fast tier's 0.3 quiet, 1.6 s in a CI run
@settings(max_examples=examples(50))
@given(values=st.fixed_dictionaries({c: _VALUE for c in cells.CELL_COLUMNS if c != "mixed_precision"}
                                    | {"mixed_precision": st.sampled_from([None, 0, 1, False, True])}),
       cache_dir=st.none() | st.text(max_size=12) | st.sampled_from(['a,"b"', "c\nd", "é\\", "x" * 5000]))
def test_a_cell_s_key_made_from_its_parts_is_the_key_the_ledger_keeps(values, cache_dir):
    """cells.cell_keys (the cell's part once, the dir's appended) gives, byte for byte, the
    key of every cell the ledger has kept (key_text over CACHE_CELL): a ledger folded by a
    build before it keeps its cells."""
    assert cells.cell_keys({7: values})(7, cache_dir) == key_text(values | {"cache_dir": cache_dir}, cells.CACHE_CELL)
