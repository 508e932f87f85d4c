"""`ledger check`: every pinned key's newer warm rows against its pin, and the cache
cells that went cold, each run stored as verdicts so a failure can be audited later.

The heavy lifting is SQL: the pinned rows are judged by one INSERT ... SELECT (pins
joined to compile_records on the comparability key), and the went-cold cells come
from one window pass over the table; Python sees only the findings.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import sqlalchemy as sa

from ledger.record import CACHE_CELL, COLD, COMPARABILITY_KEY, WARM
from ledger.storage.engine import read_connection
from ledger.storage.models import check_runs, pins, verdicts
from ledger.watch.explain import cause_text, diagnose, fetch_rows
from ledger.watch.keys import loaded_cause_sql, loaded_sql, pin_key, same_sql
from ledger.watch.pins import describe_key, filter_sql, ok_sql, pinnable_sql, utc_now

TOLERANCE = 1.5
OK, REGRESSION, INCONCLUSIVE, WENT_COLD = "ok", "regression", "inconclusive", "went-cold"
VERDICTS = (OK, REGRESSION, INCONCLUSIVE, WENT_COLD)
FAILING = (REGRESSION, WENT_COLD)
_ID_PAD = 10**12  # ids as fixed-width text, so "timestamp|id" sorts as (timestamp, id)


def _judge_sql(dialect: str, where: str) -> str:
    """Judge every warm ok row newer than its key's pin, straight into verdicts.

    A finding is one verdict row; the ok rows of a pin are one row between them
    (n_rows, the newest row_id, the slowest compile_s and ratio), so a check of a
    big ledger writes hundreds of rows, not hundreds of thousands, each run."""
    match = " AND ".join(same_sql(f"r.{f}", f"p.{f}", dialect) for f in COMPARABILITY_KEY)
    newer = ("(COALESCE(r.timestamp, '') > COALESCE(p.timestamp, '')"
             " OR (COALESCE(r.timestamp, '') = COALESCE(p.timestamp, '') AND r.id > p.row_id))")
    loaded = loaded_sql("r")
    judged = (
        "SELECT p.id AS pin_id, p.pin_key, r.id AS row_id, r.compile_s, p.compile_s AS pin_compile_s,"
        " r.compile_s / NULLIF(p.compile_s, 0) AS ratio,"
        f" CASE WHEN {loaded} THEN '{INCONCLUSIVE}' WHEN r.compile_s > :tol * p.compile_s"
        f" THEN '{REGRESSION}' ELSE '{OK}' END AS verdict, CASE WHEN {loaded} THEN {loaded_cause_sql('r')} END AS cause"
        f" FROM compile_records r JOIN pins p ON {match}"
        f" WHERE {pinnable_sql('r')} AND {newer}{where}"
    )
    one_per_finding = f"CASE WHEN verdict = '{OK}' THEN 0 ELSE row_id END"
    return (
        "INSERT INTO verdicts (check_run_id, pin_id, pin_key, row_id, n_rows, compile_s, pin_compile_s, ratio,"
        " tolerance, verdict, cause, checked_at)"
        " SELECT :run, pin_id, pin_key, MAX(row_id), COUNT(*), MAX(compile_s), pin_compile_s, MAX(ratio),"
        f" :tol, verdict, MAX(cause), :now FROM ({judged}) judged"
        f" GROUP BY pin_id, pin_key, pin_compile_s, verdict, {one_per_finding} ORDER BY MAX(row_id)"
    )


# Grouping order: the columns that tell cells apart first, so the sort's comparisons
# stop early (a third faster on a million rows than the key's own order).
_GROUP_ORDER = ("transform", "model_type", "hostname", "cache_dir", "dataset_class", "instrument", "hardware",
                "jax_version", "mixed_precision")
assert sorted(_GROUP_ORDER) == sorted(CACHE_CELL)


def _stamp(state_too: bool) -> str:
    # "timestamp|id" with the id at fixed width: its MAX is the newest row, ties by id
    text = f"COALESCE(timestamp, '') || '|' || CAST({_ID_PAD} + id AS TEXT)"
    return text + " || '|' || cache_state" if state_too else text


def went_cold_cells(conn, filters: dict | None, since: str | None) -> list[tuple[int, int]]:
    """(cold row id, last warm row id) of every cache cell whose newest ok row is cold.

    One GROUP BY over the cells (not a window: a window carries every row through the
    sort, twice as slow): the newest row with its state, and the newest warm row."""
    where, params = filter_sql(filters)
    sql = (
        f"SELECT newest, last_warm FROM (SELECT MAX({_stamp(True)}) AS newest,"
        f" MAX(CASE WHEN cache_state = '{WARM}' THEN {_stamp(False)} END) AS last_warm"
        f" FROM compile_records WHERE {ok_sql()} AND cache_dir IS NOT NULL AND cache_dir <> ''{where}"
        f" GROUP BY {', '.join(_GROUP_ORDER)}) cells WHERE newest LIKE '%|{COLD}' AND last_warm IS NOT NULL"
    )
    if since is not None:
        sql += " AND newest >= :since"
        params["since"] = since
    out = []
    for newest, last_warm in conn.execute(sa.text(sql), params).all():
        ts_id = newest[: -len(COLD) - 1]
        out.append((int(ts_id.rsplit("|", 1)[1]) - _ID_PAD, int(last_warm.rsplit("|", 1)[1]) - _ID_PAD))
    return sorted(out)


def _cold_verdicts(conn, pairs, run_id: int, now: str) -> list[dict]:
    rows = fetch_rows(conn, [i for pair in pairs for i in pair])
    pinned = {r.pin_key: r for r in conn.execute(sa.select(pins.c.id, pins.c.pin_key, pins.c.compile_s))}
    out = []
    for cold_id, warm_id in pairs:
        cold, warm = rows[cold_id], rows[warm_id]
        pin = pinned.get(pin_key(warm))
        ratio = cold["compile_s"] / pin.compile_s if pin and pin.compile_s and cold["compile_s"] is not None else None
        out.append(dict(check_run_id=run_id, pin_id=pin.id if pin else None, pin_key=pin.pin_key if pin else None,
                        row_id=cold_id, compile_s=cold["compile_s"], pin_compile_s=pin.compile_s if pin else None,
                        ratio=ratio, tolerance=None, verdict=WENT_COLD, checked_at=now,
                        cause=f"{cause_text(diagnose(cold, warm))} (last warm row {warm_id})"))
    return out


@dataclass
class CheckResult:
    run_id: int
    tolerance: float
    exit_code: int
    counts: dict = field(default_factory=dict)
    findings: list[dict] = field(default_factory=list)

    def summary(self) -> str:
        counts = ", ".join(f"{self.counts.get(v, 0)} {v}" for v in VERDICTS)
        return f"check run {self.run_id} (tolerance {self.tolerance:g}x): {counts}"

    def as_json(self) -> str:
        return json.dumps({"check_run_id": self.run_id, "tolerance": self.tolerance, "exit_code": self.exit_code,
                           "counts": {v: self.counts.get(v, 0) for v in VERDICTS}, "findings": self.findings},
                          indent=1, default=str) + "\n"


_FINDING_COLUMNS = ("verdict", "row_id", "compile_s", "pin_id", "pin_compile_s", "ratio", "tolerance", "cause")


def _findings(conn, run_id: int) -> list[dict]:
    cols = ", ".join(f"v.{c}" for c in _FINDING_COLUMNS)
    key = ", ".join(f"r.{c}" for c in (*CACHE_CELL, "tag", "timestamp"))
    sql = (f"SELECT {cols}, {key} FROM verdicts v JOIN compile_records r ON r.id = v.row_id"
           f" WHERE v.check_run_id = :run AND v.verdict <> '{OK}' ORDER BY v.verdict, v.id")
    found = [dict(r) for r in conn.execute(sa.text(sql), {"run": run_id}).mappings()]
    for f in found:
        if f["mixed_precision"] is not None:
            f["mixed_precision"] = bool(f["mixed_precision"])
    return found


def run_check(engine, *, tolerance: float = TOLERANCE, filters: dict | None = None,
              since: str | None = None) -> CheckResult:
    """Judge, store the run and its verdicts (one transaction), return the findings.

    The went-cold pass (a read) runs on its own connection in a thread while this one
    judges the pinned rows: the two scans overlap (the driver lets go of the GIL
    while the database works)."""
    with ThreadPoolExecutor(1, thread_name_prefix="went-cold") as pool:
        cold = pool.submit(_went_cold, engine, filters, since)
        return _judge_and_store(engine, cold, tolerance, filters, since)


def _went_cold(engine, filters: dict | None, since: str | None) -> list[tuple[int, int]]:
    with read_connection(engine) as conn:
        if conn.dialect.name == "sqlite":
            # a sort of every ok row; SQLite's sorter can split it over worker threads
            conn.exec_driver_sql(f"PRAGMA threads = {min(8, os.cpu_count() or 1)}")
        return went_cold_cells(conn, filters, since)


def _judge_and_store(engine, cold: Future, tolerance: float, filters: dict | None, since: str | None) -> CheckResult:
    now = utc_now()
    where, params = filter_sql(filters, "r")
    if since is not None:
        where += " AND r.timestamp >= :since"
        params["since"] = since
    given = {k: v for k, v in (filters or {}).items() if v is not None} | ({"since": since} if since else {})
    with engine.begin() as conn:
        run_id = conn.execute(sa.insert(check_runs).values(checked_at=now, tolerance=tolerance, exit_code=0,
                                                           filters=json.dumps(given, sort_keys=True))
                              ).inserted_primary_key[0]
        conn.execute(sa.text(_judge_sql(conn.dialect.name, where)), params | {"run": run_id, "tol": tolerance, "now": now})
        pairs = cold.result()
        if pairs:
            conn.execute(sa.insert(verdicts), _cold_verdicts(conn, pairs, run_id, now))
        counts = dict(conn.execute(sa.select(verdicts.c.verdict, sa.func.sum(verdicts.c.n_rows))
                                   .where(verdicts.c.check_run_id == run_id).group_by(verdicts.c.verdict)).all())
        exit_code = 1 if any(counts.get(v) for v in FAILING) else 0
        conn.execute(sa.update(check_runs).where(check_runs.c.id == run_id).values(exit_code=exit_code))
        findings = _findings(conn, run_id)
    return CheckResult(run_id, tolerance, exit_code, counts, findings)


def finding_line(f: dict) -> str:
    """One line per finding, for people; --json gives CI the same fields."""
    head = f"{f['verdict']:<13} {describe_key(f)}"
    if f["verdict"] == WENT_COLD:
        return f"{head}, cache dir {f['cache_dir']}: row {f['row_id']} is cold: {f['cause']}"
    versus = f"row {f['row_id']} compile_s {f['compile_s']:.4g}s vs pin {f['pin_compile_s']:.4g}s (pin {f['pin_id']})"
    ratio = f"{f['ratio']:.2f}x" if f["ratio"] is not None else "n/a"
    if f["verdict"] == REGRESSION:
        return f"{head}: {versus} = {ratio} > {f['tolerance']:g}x"
    return f"{head}: {versus} = {ratio}, not judged: {f['cause']}"
