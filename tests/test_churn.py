"""An entry's churn carried from one check to the next (ledger/watch/churn.py): the count
folded from the rows since equals the count of every row, and the check that carries it
says what a check reading every row of the key says, facts and all, on both backends,
while reading only the rows since; a prune of the key has it read whole."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.storage.models import cache_prunes
from ledger.storage.open import open_ledger
from ledger.watch import churn, health

from .conftest import examples
from .helpers import checked_counting, said_from_nothing
from .ledgers import _insert, add, rec
from .writes import BACKENDS, each_check_says_what_every_row_says, fresh

LIMIT = json.dumps({"jax_compilation_cache_max_size": 65536})
NO_LIMIT = json.dumps({"jax_compilation_cache_max_size": -1})

entry_rows = st.lists(st.fixed_dictionaries({
    "cache_state": st.sampled_from(["warm", "cold", "cold", "none"]),
    "hostname": st.sampled_from(["node1", "node2"]),
    "cache_dir": st.sampled_from(["/c1", "/c1", ""]),
    "jax_cache_settings": st.sampled_from([LIMIT, LIMIT, NO_LIMIT, None]),
    "timestamp": st.sampled_from(["2026-07-01T10:00:00", "2026-07-01T10:00:00+00:00", "2026-07-02T10:00:00"]),
    "compile_s": st.sampled_from([None, 2.0]),
    "run_id": st.sampled_from([None, "r1"]),
}), min_size=1, max_size=14)


def _ordered(rows: list[dict]) -> list[dict]:
    rows = [dict(r, id=i + 1, cache_key="jit_f-k1", command="python fit.py", objective=None)
            for i, r in enumerate(rows)]
    return sorted(rows, key=lambda r: (r["timestamp"] or "", r["id"]))


def _facts(found) -> list[str]:
    return sorted(json.dumps([f.verdict, f.row_id, f.cause.as_json(), f.fails, f.versus_id, f.program, f.run,
                              f.cost_s, f.extra], sort_keys=True) for f in found)


def test_a_fold_counts_on_and_leaves_the_state_it_was_given_as_it_was():
    rows = _ordered([{"cache_state": state, "hostname": "node1", "cache_dir": "/c1", "jax_cache_settings": LIMIT,
                      "timestamp": f"2026-07-0{i + 1}T10:00:00", "compile_s": 2.0, "run_id": None}
                     for i, state in enumerate(["warm", "cold", "warm", "cold", "warm", "cold"])])
    state = churn.fold(churn._empty("jit_f-k1", "node1", "/c1"), rows[:4], [])
    given_state = json.dumps(state, sort_keys=True)
    assert (state["times"], churn.fold(state, rows[4:], [])["times"]) == (2, 3)
    assert json.dumps(state, sort_keys=True) == given_state


@pytest.mark.slow  # a property test
@settings(max_examples=examples(300))
@given(rows=entry_rows, cut=st.integers(0, 14))
def test_a_count_folded_from_the_rows_since_is_the_count_of_every_row(rows, cut):
    rows = _ordered(rows)
    old, new = rows[:cut], rows[cut:]
    before = churn.evicted(old, {})
    carried = churn.since(before, new, {})
    if carried is not None:
        assert _facts(carried) == _facts(churn.evicted(rows, {}))
    # read whole where a state cannot say: nothing found before, an entry with no count kept, a row out of order
    entries = {(r["hostname"], r["cache_dir"]) for r in new if r["cache_dir"] and r["cache_state"] != "none"}
    kept = {(f.extra["churn"]["host"], f.extra["churn"]["dir"]) for f in before}
    assert (carried is None) == (not before or bool(entries - kept) or _out_of_order(old, new, kept))


def _out_of_order(old: list[dict], new: list[dict], kept: set) -> bool:
    """A kept entry's first new row is not after its newest counted row."""
    for host, where in kept:
        mine_old = [r for r in old if (r["hostname"], r["cache_dir"]) == (host, where) and r["cache_state"] != "none"]
        mine_new = [r for r in new if (r["hostname"], r["cache_dir"]) == (host, where) and r["cache_state"] != "none"]
        if mine_new and (mine_new[0]["timestamp"] or "", mine_new[0]["id"]) <= (mine_old[-1]["timestamp"] or "",
                                                                                mine_old[-1]["id"]):
            return True
    return False


def _entry(states: str, start: int) -> list[dict]:
    """One recorded row per state ('w' warm, 'c' cold), a run each, an hour apart."""
    return [rec(cache_state={"w": "warm", "c": "cold"}[s], cache_key="jit_f-k1", cache_dir="/c",
                jax_cache_settings=LIMIT, run_id=f"run{start + i}", command="python fit.py", function="jit_f",
                transform="recorded", timestamp=f"2026-07-01T{start + i:02d}:00:00+00:00", tag=f"t{start + i}")
            for i, s in enumerate(states)]


def _checked(engine, monkeypatch) -> tuple[list[tuple], int]:
    """A check's findings, and how many rows its health passes read by key."""
    return checked_counting(engine, monkeypatch, health, "_rows_by",
                            lambda args, out: sum(map(len, out.values())) if args[1] == "cache_key" else 0)


@pytest.mark.slow  # an import and a check, again and again
@pytest.mark.parametrize("backend", BACKENDS)
def test_churn_is_counted_on_from_the_rows_since_and_a_prune_has_the_key_read_whole(backend, tmp_path, monkeypatch):
    with fresh(backend) as db:
        add(db, tmp_path, *_entry("cwcwc", 1))
        with open_ledger(str(db), "write") as ledger:
            first, read = _checked(ledger.engine, monkeypatch)
            assert [(f[0], f[2].split(" (")[0]) for f in first if f[0] == "evicted"] == [
                ("evicted", "entry jit_f-k1 in /c on node1 was evicted and compiled cold again 2 times")]
            assert read == 5 and first == said_from_nothing(ledger.engine)
            (_, c) = add(db, tmp_path, *_entry("wc", 6))  # evicted again: only those two rows read
            second, read = _checked(ledger.engine, monkeypatch)
            assert read == 2 and second == said_from_nothing(ledger.engine)
            assert [(f[1], f[2].split(" (")[0]) for f in second if f[0] == "evicted"] == [
                (c, "entry jit_f-k1 in /c on node1 was evicted and compiled cold again 3 times")]
            add(db, tmp_path, *_entry("w", 8))  # warm again: no eviction, the churn stands (the went-cold goes)
            third, read = _checked(ledger.engine, monkeypatch)
            assert read == 1 and third == said_from_nothing(ledger.engine)
            assert [f[:5] for f in third if f[0] == "evicted"] == [f[:5] for f in second if f[0] == "evicted"]
            # a prune of the key between two counted rows: not an eviction; the key is read whole
            _insert(db, cache_prunes, [{"cache_dir": "/c", "cache_key": "jit_f-k1", "entry": "jit_f-k1-cache",
                                        "bytes": 9, "reason": "unused 30 days", "pruned_at": "2026-07-01T06:30:00+00:00"}])
            add(db, tmp_path, *_entry("c", 9))
            fourth, read = _checked(ledger.engine, monkeypatch)
            assert read == 1 + 9 and fourth == said_from_nothing(ledger.engine)  # the rows since, then all
            assert [f[2].split(" (")[0] for f in fourth if f[0] == "evicted"] == [
                "entry jit_f-k1 in /c on node1 was evicted and compiled cold again 3 times"]


@pytest.mark.slow  # an import and a check, again and again
@pytest.mark.parametrize("backend", BACKENDS)
def test_new_rows_whose_time_is_a_prefix_of_the_newest_are_counted_before_it(backend, tmp_path, monkeypatch):
    """"10:00:00" sorts before "10:00:00+00:00" (rows.oldest_first), though its ids are
    larger: the count cannot take them, and the key is read whole."""
    def at(rows: list[dict], when: str) -> list[dict]:
        return [r | {"timestamp": when} for r in rows]

    with fresh(backend) as db:
        add(db, tmp_path, *at(_entry("cwcwc", 1), "2026-07-01T10:00:00+00:00"))
        with open_ledger(str(db), "write") as ledger:
            _checked(ledger.engine, monkeypatch)
            add(db, tmp_path, *at(_entry("wc", 6), "2026-07-01T10:00:00"))
            found, read = _checked(ledger.engine, monkeypatch)
            assert read == 2 + 7 and found == said_from_nothing(ledger.engine)
            assert [f[2].split(" (")[0] for f in found if f[0] == "evicted"] == [
                "entry jit_f-k1 in /c on node1 was evicted and compiled cold again 3 times"]


limited = st.builds(
    rec, cache_key=st.just("jit_f-k1"), function=st.just("jit_f"), transform=st.just("recorded"),
    command=st.just("python fit.py"),
    cache_state=st.sampled_from(["warm", "cold", "cold", "none"]),
    hostname=st.sampled_from(["node1", "node2"]),
    cache_dir=st.sampled_from(["/c1", "/c1", "/c2"]),
    jax_cache_settings=st.sampled_from([LIMIT, LIMIT, NO_LIMIT]),
    timestamp=st.sampled_from(["2026-07-01T10:00:00", "2026-07-01T10:00:00+00:00", "2026-07-02T10:00:00"]),
    run_id=st.sampled_from(["r1", "r2", "r3"]),
    tag=st.sampled_from(["a", "b", "c", "d", "e"]),
)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=examples(10), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(limited, min_size=1, max_size=5), min_size=2, max_size=5))
def test_churn_carried_check_after_check_says_what_every_row_says(backend, batches, tmp_path_factory):
    each_check_says_what_every_row_says(backend, batches, tmp_path_factory.mktemp("churn"))
