"""`ledger check` and `ledger explain` agree on every cell of a generated ledger: each
finding of check names the same kind and the same last warm row as `explain` of its row
(went-cold: the same cause, word for word), and every cell whose newest row went cold
after a warm one is a went-cold finding of check."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ledger import command
from ledger.record import COLD, NONE
from ledger.watch.kinds import KINDS

from .conftest import examples, query, write_json

WARM_ROW = re.compile(r"last warm row (\d+)")
COMPONENTS = [json.dumps({"computation": c, "XLA flags": f}) for c in ("h1", "h2") for f in ("f1", "f2")]

row = st.fixed_dictionaries({
    "jax_version": st.sampled_from(["0.4.30", "0.10.2"]),
    "model_type": st.sampled_from(["a", "b"]),
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
            "cache_files_before": r["cache_files_before"], "host_cpu_count": 8, "host_load_avg_1m": 0.1})
    return out


def _explained(db, row_id: int) -> tuple[str, int | None, str]:
    """explain's kind, last warm row and cause text for a row."""
    told = command.explain(row_id, db)
    cause = told.cause or ""
    kind, _, rest = cause.partition(": ")
    if kind not in KINDS:
        kind, rest = "went-cold", cause
    if getattr(told, "warm", None):  # a went-cold diagnosis: its warm row, shown on its own line
        return kind, told.warm["id"], rest
    warm = WARM_ROW.findall(cause)
    return kind, int(warm[-1]) if warm else None, rest


def _newest_cold_after_warm(db) -> set[int]:
    """Rows that are their cache cell's newest and cold, with a warm row before them."""
    rows = query(db, "SELECT id, jax_version, model_type, cache_dir, cache_state FROM compile_records"
                     " WHERE cache_dir IS NOT NULL ORDER BY timestamp, id")
    cells: dict = {}
    for rid, jax, model, cache_dir, state in rows:
        seen = cells.setdefault((jax, model, cache_dir), {"warm": False})
        seen.update(newest=rid, state=state, warm_before=seen["warm"])
        seen["warm"] = seen["warm"] or state == "warm"
    return {c["newest"] for c in cells.values() if c["state"] == COLD and c["warm_before"]}


@pytest.mark.slow
@settings(max_examples=examples(40), phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rows=st.lists(row, min_size=1, max_size=14))
def test_check_and_explain_agree_on_every_cell(tmp_path_factory, rows):
    path = tmp_path_factory.mktemp("agree")
    db = path / "ledger.db"
    command.import_json([write_json(path / "rows.json", _records(rows))], db)
    findings = json.loads(command.check(db).as_json())["findings"]
    for f in findings:
        kind, warm, cause = _explained(db, f["row_id"])
        stated = WARM_ROW.findall(f["cause"])
        assert (kind, warm) == (f["verdict"], int(stated[-1]) if stated else None), (f, cause)
        if f["verdict"] != "cache-off":  # cache-off: explain speaks of its row, check of the first none row
            told = cause if "still cold after" in cause or kind != "went-cold" else f"{cause} (last warm row {warm})"
            assert told == f["cause"]
    went_cold = {f["row_id"] for f in findings if f["verdict"] == "went-cold"}
    assert _newest_cold_after_warm(db) <= went_cold
