"""`ledger check` and `ledger explain` agree on every cell of a generated ledger: each
finding of check is, fact for fact and word for word, what `explain` of its row finds
(kind, the warm row it is read against, the cause, whether it fails), and every cell whose
newest row went cold after a warm one of an earlier run (or of its run, under its key) is
a went-cold finding of check. The ledgers hold several programs per run: two model types,
and a recorded function of two variants (two programs of one name and signature)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from ledger import command
from ledger.record import COLD, NONE
from ledger.storage.open import open_ledger
from ledger.watch.check import shown_facts
from ledger.watch.findings import LINEAGE, lineage_key, rows_of_lineage
from ledger.watch.grouped import _key
from ledger.watch.judge import Evidence, judge
from ledger.watch.kinds import CACHE_NOT_REUSED, CACHE_OFF, JAX_CHANGED, WENT_COLD

from .conftest import examples, query, write_json

COMPONENTS = [json.dumps({"computation": c, "XLA flags": f}) for c in ("h1", "h2") for f in ("f1", "f2")]

row = st.fixed_dictionaries({
    "jax_version": st.sampled_from(["0.4.30", "0.10.2"]),
    "model_type": st.sampled_from(["a", "b"]),
    "variant": st.sampled_from([None, 0, 1]),  # None: a probe's row; 0, 1: two programs of one recorded name
    "cache_dir": st.sampled_from(["/c1", "/c2", None]),
    "warm": st.booleans(),
    "cache_key_components": st.sampled_from(COMPONENTS),
    "program_fingerprint": st.sampled_from(["p1", "p2"]),
    "cache_files_before": st.sampled_from([0, 3]),
    "run": st.integers(0, 3),
    "tick": st.integers(0, 2),  # 0: the same second as the row before (ties order by id)
})


def _records(rows: list[dict]) -> list[dict]:
    out, second = [], 0
    for i, r in enumerate(rows):
        second += r["tick"]
        state = NONE if r["cache_dir"] is None else ("warm" if r["warm"] else COLD)
        out.append({
            "transform": "jit", "trace_s": 0.1, "compile_s": 1.0 + i / 100, "first_s": 0.1, "steady_s": 0.01,
            "dataset_class": "imaging", "model_type": r["model_type"], "instrument": "hst", "ndim": 8,
            "n_batch": 1, "batch_size": 1, "hardware": "local_cpu", "jax_version": r["jax_version"],
            "cache_dir": r["cache_dir"], "mixed_precision": False, "tag": f"t{i}", "hostname": "node1",
            "timestamp": f"2026-07-01T10:{second // 60:02d}:{second % 60:02d}+00:00", "cache_state": state,
            "cache_state_source": "measured", "status": "ok", "run_id": f"run{r['run']}", "phase": "p",
            "cache_key_components": r["cache_key_components"], "program_fingerprint": r["program_fingerprint"],
            "cache_files_before": r["cache_files_before"], "host_cpu_count": 8, "host_load_avg_1m": 0.1,
            **({} if r["variant"] is None else {"function": "jit_f", "input_signature": "f32[3]",
                                                "variant": r["variant"], "command": "python fit.py",
                                                "cache_key": f"k-{r['cache_key_components']}"})})
    return out


def _explained(db, row_id: int) -> dict | None:
    """explain's finding for a row, as check's --json gives one (None: no finding)."""
    found = command.explain(row_id, db).finding
    if found is None:
        return None
    return {"verdict": found.verdict, "row_id": found.row_id, "cause": found.text, "fails": found.fails,
            "facts": shown_facts(json.loads(json.dumps(found.facts(), default=str)))}


def _newest_cold_after_warm(db) -> set[int]:
    """Rows that are their cache cell's newest and cold, with a warm row before them that
    is not another key's of their own run."""
    rows = query(db, "SELECT id, jax_version, model_type, variant, cache_dir, cache_state, run_id, cache_key"
                     " FROM compile_records WHERE cache_dir IS NOT NULL ORDER BY timestamp, id")
    cells: dict = {}
    for rid, jax, model, variant, cache_dir, state, run, key in rows:
        seen = cells.setdefault((jax, model, variant, cache_dir), {"warm": []})
        seen.update(newest=rid, state=state, warm_before=any(r != run or k == key for r, k in seen["warm"]))
        if state == "warm":
            seen["warm"].append((run, key))
    return {c["newest"] for c in cells.values() if c["state"] == COLD and c["warm_before"]}


def _at(run: int, model: str, warm: bool, variant=None, cache_dir="/c1", jax="0.10.2") -> dict:
    return {"jax_version": jax, "model_type": model, "variant": variant, "cache_dir": cache_dir, "warm": warm,
            "cache_key_components": COMPONENTS[0], "program_fingerprint": "p1", "cache_files_before": 3,
            "run": run, "tick": 1}


# what generation seldom reaches: a went-cold cell, three cells of one program never reused,
# two programs of one recorded name, and a jax bump, in one ledger
SEVERAL = [_at(0, "a", True), _at(1, "a", False),
           *[_at(r, m, False, cache_dir="/c2") for r in (0, 1, 2) for m in ("a", "b")],
           _at(1, "b", False, variant=0), _at(2, "b", False, variant=0), _at(2, "b", True, variant=1),
           _at(3, "a", False, jax="0.4.30"), _at(3, "b", False, jax="0.4.30")]


# a cell's last warm row is of its newest (cold) row's run under another key: the warm row
# it went cold from is older, before where check starts reading (findings._start), so the
# check must read the lineage whole (judge.newest_enough)
OTHER_KEY_LAST = [_at(0, "a", True, variant=0), {**_at(1, "a", True, variant=0), "cache_key_components": COMPONENTS[1]},
                  _at(1, "a", False, variant=0)]
# the same in another dir: the jax's only warm row since is of that run under another key, and
# the cold rows between its older warm row and it are the streak
OTHER_KEY_ELSEWHERE = [_at(0, "a", True, variant=0), _at(1, "a", False, variant=0, cache_dir="/c2"),
                       {**_at(2, "a", True, variant=0), "cache_key_components": COMPONENTS[1]},
                       _at(2, "a", False, variant=0, cache_dir="/c2")]

# a jax never warm (0.10.2) between warm rows of another (0.4.30): the warm row before its
# first cold row is older than where check starts reading, so it reads the lineage whole
JAX_BACK = [_at(0, "a", True, jax="0.4.30"), _at(1, "a", False), _at(2, "a", True, jax="0.4.30"), _at(3, "a", False)]




def _checked(tmp_path_factory, rows) -> tuple:
    """A ledger of `rows` and check's --json of it."""
    path = tmp_path_factory.mktemp("ledger")
    db = path / "ledger.db"
    command.import_json([write_json(path / "rows.json", _records(rows))], db)
    return db, json.loads(command.check(db).as_json())


def _explain_agrees(db, said: dict) -> None:
    findings = said["findings"]
    for f in findings:
        mine = _explained(db, f["row_id"])
        assert mine == {k: f[k] for k in ("verdict", "row_id", "cause", "fails", "facts")}, (f, mine)
    went_cold = {f["row_id"] for f in findings if f["verdict"] == "went-cold"}
    assert _newest_cold_after_warm(db) <= went_cold


def _judged_whole(db) -> set[tuple]:
    """Every cache finding of every lineage judged from all its rows (explain's read): what
    check, which reads each lineage from its oldest last warm row on where that suffices
    (findings._start), must find."""
    with open_ledger(str(db), "read") as led, led.engine.connect() as conn:
        ev, seen, out = Evidence(conn), set(), set()
        for r in conn.execute(sa.text(f"SELECT {', '.join(LINEAGE)} FROM compile_records")).mappings():
            if (text := lineage_key(r)) not in seen:
                seen.add(text)
                out |= {(f.verdict, f.row_id, f.text) for f in judge(rows_of_lineage(conn, dict(r)), ev)}
    return out


def _finds_what_judging_every_row_finds(db, said: dict) -> None:
    cache_kinds = {WENT_COLD, CACHE_OFF, CACHE_NOT_REUSED, JAX_CHANGED}
    assert {(f["verdict"], f["row_id"], f["cause"]) for f in said["findings"]
            if f["verdict"] in cache_kinds} == _judged_whole(db)


def _grouped_lines_hold_every_finding_once(said: dict, rows: list) -> None:
    """check's lines (--json's groups) hold every finding of the ungrouped list exactly
    once, and a group's findings share their kind, root cause and program."""
    groups = said["groups"]
    # not grouped: ok, and the loaded hosts' inconclusive rows (one line of their own)
    findings = [f for f in said["findings"] if f["verdict"] not in ("ok", "inconclusive")]
    assert Counter(r for g in groups for r in g["rows"]) == Counter(f["row_id"] for f in findings)
    assert sum(g["findings"] for g in groups) == len(findings)
    by_row: dict = {}
    for f in findings:
        by_row.setdefault(f["row_id"], []).append(f)
    for g in groups:
        keys = {_key(by_row[r][0]) for r in g["rows"] if len(by_row[r]) == 1}  # a row of one finding
        assert len(keys) <= 1 and "\n" not in g["line"], g
    if rows is SEVERAL:  # the example holds what it is for: several kinds, and a group of cells
        assert {"went-cold", "cache-not-reused", "jax-changed"} <= {f["verdict"] for f in findings}, findings


@example(rows=SEVERAL)
@example(rows=OTHER_KEY_LAST)
@example(rows=OTHER_KEY_ELSEWHERE)
@example(rows=JAX_BACK)
@pytest.mark.slow
@settings(max_examples=examples(60), phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rows=st.lists(row, min_size=1, max_size=14))
def test_check_explain_and_the_grouped_lines_agree_on_every_generated_ledger(tmp_path_factory, rows):
    """Each ledger imported and checked once, then held to three things: each finding of
    check is what `explain` of its row finds; check's cache findings are what judging every
    row of every lineage finds; check's lines hold every finding once. (Three properties of
    their own before, 40 ledgers each: the import and check were most of each one's time.)"""
    db, said = _checked(tmp_path_factory, rows)
    _explain_agrees(db, said)
    _finds_what_judging_every_row_finds(db, said)
    _grouped_lines_hold_every_finding_once(said, rows)
