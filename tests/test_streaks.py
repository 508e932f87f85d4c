"""A never-warm cell's cold streak carried from one check to the next (ledger/watch/streaks.py):
its state folded from the rows since equals its state folded from every row, and the
check that carries it says what a check reading every row says, facts and all, on both
backends, while reading only the rows since."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.record import NOT_PERSISTED_COMPILE_TIME, NOT_PERSISTED_PROCESS_INDEX
from ledger.storage.open import open_ledger
from ledger.watch import findings, streaks

from .conftest import examples, run_cli
from .helpers import checked_counting, said_from_nothing
from .ledgers import add, rec
from .writes import BACKENDS, each_check_says_what_every_row_says, fresh

# -- the state ---------------------------------------------------------------------------------

cold_rows = st.lists(st.fixed_dictionaries({
    # a time that is another's prefix sorts before it (rows.oldest_first)
    "timestamp": st.sampled_from([None, "2026-07-01T10:00:00", "2026-07-01T10:00:00+00:00", "2026-07-02T10:00:00"]),
    "cache_dir": st.sampled_from(["/c1", "/c2", "/c3"]),
    "run_id": st.sampled_from([None, "r1", "r2", "r3"]),
    "phase": st.sampled_from([None, "cold"]),
    "compile_s": st.sampled_from([None, 0.25, 0.5, 2.0]),
    "cache_not_persisted": st.sampled_from([None, None, NOT_PERSISTED_COMPILE_TIME]),
    "cache_min_compile_time_s": st.sampled_from([None, 1.0, 2.0]),
    "cache_files_before": st.sampled_from([None, 0, 3]),
    "cache_files_after": st.sampled_from([None, 3, 4]),
}), min_size=1, max_size=12)


def _ordered(rows: list[dict]) -> list[dict]:
    """The rows with ids, oldest first as the check reads them (rows.oldest_first)."""
    rows = [dict(r, id=i + 1) for i, r in enumerate(rows)]
    return sorted(rows, key=lambda r: (r["timestamp"] or "", r["id"]))


@pytest.mark.slow  # a property test
@settings(max_examples=examples(300))
@given(rows=cold_rows, cut=st.integers(0, 12))
def test_a_state_folded_from_the_rows_since_is_the_state_of_every_row(rows, cut):
    rows = _ordered(rows)
    old, new = rows[:cut], rows[cut:]
    before = {streaks.run_key(r) for r in old}
    seen = {streaks.run_key(r) for r in new} & before  # what check asks the ledger
    state = streaks.of("0.10.2", old)
    given_state = json.dumps(state, sort_keys=True)
    folded = streaks.fold(state, new, seen)
    assert json.dumps(state, sort_keys=True) == given_state  # the state given is left as it was
    last = streaks.run_key(old[-1]) if old else None
    if new and streaks.run_key(new[-1]) in before and streaks.run_key(new[-1]) != last:
        assert folded is None  # an older run the newest again: its seconds are not in the state
    else:
        assert json.dumps(folded, sort_keys=True) == json.dumps(streaks.of("0.10.2", rows), sort_keys=True)


def test_the_state_counts_runs_not_rows_and_costs_the_newest_run():
    rows = _ordered([{"timestamp": "2026-07-01T10:00:00", "cache_dir": "/c1", "run_id": "r1", "phase": None,
                      "compile_s": s} for s in (0.5, 0.25)]
                    + [{"timestamp": "2026-07-02T10:00:00", "cache_dir": "/c2", "run_id": "r2", "phase": None,
                        "compile_s": s} for s in (2.0, 1.0)])
    state = streaks.of("0.10.2", rows)
    assert (state["runs"], state["last_run"], state["last_run_s"], state["dirs"], state["pair"]) == (
        2, ["run", "r2", None], 3.0, ["/c1", "/c2"], None)
    assert (state["min_s"], state["max_s"], state["newest"]) == (0.25, 2.0, ["2026-07-02T10:00:00", 4])


# -- the check that carries it -----------------------------------------------------------------

NEVER = {"cache_state": "cold", "model_type": "knn", "cache_files_before": 3, "cache_files_after": 3,
         "cache_min_compile_time_s": 1.0, "compile_s": 0.5}


def _checked(engine, monkeypatch) -> tuple[list[tuple], int]:
    """A check's findings, and how many rows its cache passes read of the lineages it judged."""
    return checked_counting(engine, monkeypatch, findings, "_rows_by_cell",
                            lambda args, out: sum(len(rows) for rows in out.values()))


@pytest.mark.slow  # an import and a check, again and again
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_never_warm_cell_is_judged_from_its_kept_state_and_the_rows_since(backend, tmp_path, monkeypatch):
    days = iter(f"2026-07-{d:02d}T10:00:00" for d in range(1, 29))
    with fresh(backend) as db:
        add(db, tmp_path, *(rec(**NEVER, run_id=f"r{i}", timestamp=next(days)) for i in range(6)))
        with open_ledger(str(db), "write") as ledger:
            first, read = _checked(ledger.engine, monkeypatch)
            assert [f[:4] for f in first] == [("cache-not-reused", first[0][1], (
                "6 cold runs in /tmp/jax-cache, never warm: the entries were never written, by design: every"
                " compile (0.5 s) was under jax_persistent_cache_min_compile_time_secs 1, so there is nothing"
                " to reuse"), False)]
            assert read == 6 and first == said_from_nothing(ledger.engine)
            # a new run: only its row is read, and the finding is the one every row gives
            (new,) = add(db, tmp_path, rec(**(NEVER | {"compile_s": 0.75}), run_id="r6", timestamp=next(days)))
            second, read = _checked(ledger.engine, monkeypatch)
            assert read == 1 and second == said_from_nothing(ledger.engine)
            assert [(f[1], f[2].split(":")[0], f[4]) for f in second] == [(new, "7 cold runs in /tmp/jax-cache, never warm", 0.75)]
            # the same run goes on: still seven runs, costing that run both rows
            (more,) = add(db, tmp_path, rec(**(NEVER | {"compile_s": 0.25}), run_id="r6", timestamp=next(days)))
            third, read = _checked(ledger.engine, monkeypatch)
            assert read == 1 and third == said_from_nothing(ledger.engine)
            assert [(f[1], f[2].split(":")[0]) for f in third] == [(more, "7 cold runs in /tmp/jax-cache, never warm")]
            assert json.loads(third[0][5])["cost_s"] == 1.0
            # rows that the state cannot take: older than its newest, and an older run the newest again
            add(db, tmp_path, rec(**NEVER, run_id="r9", timestamp="2026-07-01T09:00:00"))
            fourth, read = _checked(ledger.engine, monkeypatch)
            assert read == 10 and fourth == said_from_nothing(ledger.engine)
            add(db, tmp_path, rec(**NEVER, run_id="r2", timestamp=next(days)))
            fifth, read = _checked(ledger.engine, monkeypatch)
            assert read == 11 and fifth == said_from_nothing(ledger.engine)
            # a row another process left unwritten is the cache's health, not the cell's: nothing read again
            add(db, tmp_path, rec(**NEVER, run_id="r10", timestamp=next(days),
                                  cache_not_persisted=NOT_PERSISTED_PROCESS_INDEX, process_index=1))
            sixth, read = _checked(ledger.engine, monkeypatch)
            assert read == 1 and sixth == fifth == said_from_nothing(ledger.engine)
        # the state is the next check's: stored with the finding, not shown by --json
        assert "streak" in json.loads(sixth[0][5])
        shown = json.loads(run_cli("check", "--json", "--db", db).output)["findings"]
        assert [sorted(f["facts"]) for f in shown] == [["cause", "cost_s", "fails", "program", "run", "versus"]]


@pytest.mark.slow  # an import and a check, again and again
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_new_row_whose_time_is_a_prefix_of_the_newest_is_read_before_it(backend, tmp_path, monkeypatch):
    """"10:00:00" sorts before "10:00:00+00:00" (rows.oldest_first), though its id is larger:
    the state cannot take it, and the streak is read whole."""
    with fresh(backend) as db:
        add(db, tmp_path, *(rec(**NEVER, run_id=f"r{i}", timestamp="2026-07-01T10:00:00+00:00") for i in range(2)))
        with open_ledger(str(db), "write") as ledger:
            first, _ = _checked(ledger.engine, monkeypatch)
            add(db, tmp_path, rec(**NEVER, run_id="r2", timestamp="2026-07-01T10:00:00"))
            second, read = _checked(ledger.engine, monkeypatch)
            assert read == 1 + 3 and second == said_from_nothing(ledger.engine)
            assert [f[1] for f in second] == [f[1] for f in first]  # the newest row is still the same


never_records = st.builds(
    rec,
    model_type=st.just("knn"),
    cache_state=st.sampled_from(["cold", "cold", "none"]),
    cache_dir=st.sampled_from(["", "/c1", "/c2"]),
    jax_version=st.sampled_from(["0.10.2", "0.10.3"]),
    timestamp=st.sampled_from(["2026-07-01T10:00:00", "2026-07-01T10:00:00+00:00", "2026-07-02T10:00:00",
                               "2026-07-03T10:00:00"]),
    run_id=st.sampled_from([None, "r1", "r2", "r3"]),
    cache_files_before=st.sampled_from([None, 0, 3]),
    cache_files_after=st.sampled_from([None, 3]),
    cache_min_compile_time_s=st.sampled_from([None, 1.0]),
    compile_s=st.sampled_from([0.5, 2.0]),
)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=examples(10), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(never_records, min_size=1, max_size=4), min_size=2, max_size=5))
def test_never_warm_cells_carried_check_after_check_say_what_every_row_says(backend, batches, tmp_path_factory):
    each_check_says_what_every_row_says(backend, batches, tmp_path_factory.mktemp("never"))
