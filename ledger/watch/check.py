"""`ledger check`: every pinned key's newer warm rows against its pin, what the cells
say about the cache (went-cold, cache-off, cache-not-reused, jax-changed:
ledger/watch/findings.py) and about its health (cache-not-written, below-threshold,
evicted: ledger/watch/health.py), each run stored as verdicts so a failure can be
audited later.

The heavy lifting is SQL: the pinned rows are judged by one INSERT ... SELECT (pins
joined to compile_records on the comparability key), and the cache findings are read
from the kept cache cells, into which each check first folds the rows that arrived
since the last (ledger/watch/cells.py); Python sees only the findings.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import sqlalchemy as sa

from ledger import gc_pause
from ledger.filters import filter_sql, refuse_unmatched
from ledger.filters import given as filters_given
from ledger.record import CACHE_CELL, COMPARABILITY_KEY
from ledger.rows import after_sql, key_values, pinnable_sql, time_sql, utc_now
from ledger.storage.aside import Aside, rows_of
from ledger.storage.batch import insert_rows, insert_text
from ledger.storage.engine import planned, planner_settings
from ledger.storage.models import check_runs, pins, verdicts
from ledger.watch import cells, grouped
from ledger.watch.causes import fetch_rows
from ledger.watch.findings import Earlier, cache_findings, earlier, lineages_of, link_pin
from ledger.watch.health import BELOW_THRESHOLD_S, Kept, health_findings, since_filter
from ledger.watch.history import HISTORY, TOLERANCE_RULE
from ledger.watch.judge import Finding
from ledger.watch.keys import loaded_cause_sql, loaded_sql, pinned_rows_sql
from ledger.watch.kinds import INCONCLUSIVE, KINDS, OK, REGRESSION, order_sql

TOLERANCE = 1.5
MIN_DIFF = 0.05  # seconds: below this a slower compile is never a regression, whatever its ratio


def _judge_sql(dialect: str, where: str, allow_loaded: bool = False, new_only: bool = False) -> str:
    """Judge every warm ok row newer than its key's pin, straight into verdicts.

    A finding is one verdict row; the ok rows of a pin are one row between them
    (n_rows, the newest row_id, the slowest compile_s and ratio), so a check of a
    big ledger writes hundreds of rows, not hundreds of thousands, each run.

    Only the rows with :above < id <= :top are judged; the pinned verdicts of run
    :prev (0: none) stand for the rows up to :above (see _reusable) and are grouped
    with them, as if judged again. `new_only`: :above is above 0 (keys.pinned_rows_sql)."""
    newer = after_sql("r", time_sql("p"), "p.row_id")
    loaded = "1 = 0" if allow_loaded else loaded_sql("r")  # --allow-loaded: a loaded host's rows judged too
    # the key's own history judges where the pin has a threshold from it
    # (ledger/watch/history.py), the fixed tolerance elsewhere; either way a row
    # must also be min_diff seconds slower than what it is judged against, so a
    # millisecond compile is never judged by its ratio alone
    limit = "COALESCE(p.threshold_s, :tol * p.compile_s)"
    base = "CASE WHEN p.threshold_s IS NULL THEN p.compile_s ELSE p.history_median_s END"
    rule = f"CASE WHEN p.threshold_s IS NULL THEN '{TOLERANCE_RULE}' ELSE '{HISTORY}' END"
    # narrow rows into the GROUP BY's sort (a pin's columns are joined back onto its
    # few groups after it): sorting ~400k of them is most of a check's own cost
    judged = (
        "SELECT p.id AS pin_id, r.id AS row_id, r.compile_s,"
        f" CASE WHEN {loaded} THEN '{INCONCLUSIVE}' WHEN r.compile_s > {limit} AND r.compile_s - ({base}) > :min_diff"
        f" THEN '{REGRESSION}' ELSE '{OK}' END AS verdict, CASE WHEN {loaded} THEN {loaded_cause_sql('r')} END AS cause"
        f" FROM {pinned_rows_sql(dialect, new_only)}"
        f" WHERE r.id > :above AND r.id <= :top AND {pinnable_sql('r')} AND {newer}{where}"
    )
    before = (f"SELECT pin_id, verdict, row_id, n_rows, compile_s, cause FROM verdicts WHERE check_run_id = :prev"
              f" AND pin_id IS NOT NULL AND verdict IN ('{OK}', '{REGRESSION}', '{INCONCLUSIVE}')")
    judged = (f"SELECT pin_id, verdict, row_id, 1 AS n_rows, compile_s, cause FROM ({judged}) new"
              f" UNION ALL {before}")
    one_per_finding = f"CASE WHEN verdict = '{OK}' THEN 0 ELSE row_id END"
    grouped = (f"SELECT pin_id, verdict, MAX(row_id) AS row_id, SUM(n_rows) AS n_rows, MAX(compile_s) AS compile_s,"
               f" MAX(cause) AS cause FROM ({judged}) judged GROUP BY pin_id, verdict, {one_per_finding}")
    return (
        f"SELECT :run, p.id, p.pin_key, g.row_id, g.n_rows, g.compile_s, p.compile_s,"
        f" g.compile_s / NULLIF(p.compile_s, 0), :tol, g.verdict, g.cause, :now, {rule}, {limit}"
        f" FROM ({grouped}) g JOIN pins p ON p.id = g.pin_id ORDER BY g.row_id"
    )


_JUDGED = ("check_run_id", "pin_id", "pin_key", "row_id", "n_rows", "compile_s", "pin_compile_s", "ratio",
           "tolerance", "verdict", "cause", "checked_at", "rule", "threshold_s")  # what _judge_sql selects


def _judge_pinned(conn, where: str, allow_loaded: bool, prev, params: dict, aside: bool = False) -> Aside | None:
    """The pinned rows judged into verdicts (_judge_sql): every row, or where the previous
    run `prev` stands for the rows up to its `upto`, the rows since. PostgreSQL joins those
    by hashing. Its estimates of the pinned rows are a handful: for the rows since, the
    statistics of a table that has just grown (2.2 s of a daily check at 1M rows, where the
    hash joins take 0.1 s); for every row, the pins' cells matched through the cells table
    (4.6 s of a first check, each cell's rows fetched through the index out of order and
    each pin looked up per row, where a scan and hash joins take 1.9 s).

    `aside`: every row is judged on a connection of its own (storage.aside, as cells.begin_fold
    reads a rebuild's rows), while the check goes on; its reader is returned, for
    _insert_judged. Else they are judged here, and None is returned."""
    new_only = bool(prev and prev.upto)
    d = conn.dialect.name
    sql = _judge_sql(d, where, allow_loaded, new_only)
    reader = Aside.start(conn, rows_of(sql, params, planner_settings(d, **_HASH_JOINS))) if aside and not new_only else None
    if reader is None:
        with planned(conn, **_HASH_JOINS):
            conn.execute(sa.text(f"INSERT INTO verdicts ({', '.join(_JUDGED)}) {sql}"), params)
    return reader


_HASH_JOINS = {"enable_nestloop": "off"}  # _judge_pinned's, on PostgreSQL


def _insert_judged(conn, reader: Aside | None) -> None:
    """The verdicts _judge_pinned judged aside, if it did, in the order judged."""
    if reader is not None:
        rows = reader.result()
        if rows:
            conn.exec_driver_sql(insert_text(conn, verdicts, _JUDGED), rows)


# what a cache verdict reads of its row and of the warm row it is read against (link_pin)
_LINKED = ("id", "compile_s", *COMPARABILITY_KEY)


def _cache_verdicts(conn, found: list[Finding], run_id: int, now: str) -> list[dict]:
    """The cache findings as verdict rows, each linked to the pin of the warm key it
    is read against (where pinned), with what the row costs against that pin."""
    rows = fetch_rows(conn, [i for f in found for i in (f.row_id, f.versus_id) if i is not None], _LINKED)
    pinned = {r.pin_key: r for r in conn.execute(sa.select(pins.c.id, pins.c.pin_key, pins.c.compile_s)).all()}
    out = []
    for f in found:
        row, pin = rows[f.row_id], link_pin(pinned, rows, f)
        ratio = row["compile_s"] / pin.compile_s if pin and pin.compile_s and row["compile_s"] is not None else None
        out.append({"check_run_id": run_id, "pin_id": pin.id if pin else None,
                    "pin_key": pin.pin_key if pin else None, "row_id": f.row_id, "compile_s": row["compile_s"],
                    "pin_compile_s": pin.compile_s if pin else None, "ratio": ratio, "tolerance": None,
                    "verdict": f.verdict, "checked_at": now, "cause": f.text,
                    "facts": json.dumps(f.facts(), sort_keys=True, default=str)})
    return out


@dataclass
class CheckResult:
    run_id: int
    tolerance: float
    exit_code: int
    counts: dict = field(default_factory=dict)
    findings: list[dict] = field(default_factory=list)
    min_diff: float = MIN_DIFF
    earlier: int | None = None  # the check run whose findings these are compared with (unchanged)

    def summary(self) -> str:
        shown = [k.name for k in KINDS.values() if k.always_counted or self.counts.get(k.name)]
        counts = ", ".join(f"{self.counts.get(v, 0)} {v}" for v in shown)
        return f"check run {self.run_id} (tolerance {self.tolerance:g}x): {counts}"

    def as_json(self) -> str:
        return json.dumps({"check_run_id": self.run_id, "tolerance": self.tolerance, "min_diff_s": self.min_diff,
                           "exit_code": self.exit_code,
                           "counts": {v: self.counts.get(v, 0) for v in KINDS},
                           "unchanged_since": self.earlier,
                           "groups": [g.as_json() for g in grouped.groups(self.findings)],
                           "findings": [_shown(f) for f in self.findings]},
                          indent=1, default=str) + "\n"

    def lines(self, verbose: bool = False) -> list[str]:
        """What check prints above its summary: a line per root cause (grouped.py)."""
        return grouped.lines(self.findings, self.earlier, verbose)


_FINDING_COLUMNS = ("verdict", "row_id", "compile_s", "pin_id", "pin_compile_s", "ratio", "tolerance", "cause",
                    "rule", "threshold_s", "facts")
_PIN_HISTORY = ("history_n", "history_median_s", "history_mad_s")


def stored_findings(conn, run_id: int) -> list[dict]:
    """The run's findings, each with its facts (verdicts.facts), whether it fails the
    check, and what its kind keeps beyond the verdict (the old jax of a jax-changed, ...)."""
    cols = ", ".join(f"v.{c}" for c in _FINDING_COLUMNS)
    key = ", ".join(f"r.{c}" for c in (*CACHE_CELL, "tag", "timestamp", "run_id", "command", "objective",
                                       "host_load_avg_1m", "host_cpu_count", "host_cpu_affinity"))
    cols += "".join(f", p.{c}" for c in _PIN_HISTORY)
    sql = (f"SELECT {cols}, {key} FROM verdicts v JOIN compile_records r ON r.id = v.row_id"
           " LEFT JOIN pins p ON p.id = v.pin_id"
           f" WHERE v.check_run_id = :run AND v.verdict <> '{OK}' ORDER BY {order_sql()}, v.id")
    found = [dict(r) for r in conn.execute(sa.text(sql), {"run": run_id}).mappings().all()]
    for f in found:
        f["mixed_precision"] = key_values(f, ["mixed_precision"])[0]
        facts = f["facts"] = json.loads(f["facts"]) if f["facts"] else {}
        f["fails"] = facts.get("fails", KINDS[f["verdict"]].fails)
        f.update({k: v for k, v in facts.items() if k not in _FACT_KEYS})  # what a kind adds (old_jax, ...)
    return found


# the state a finding keeps for the next check (streaks.py, churn.py): the next check's to
# read, not the finding's to show (nor in --json, whose facts are the finding's)
_STATE_KEYS = ("streak", "churn")
_FACT_KEYS = ("cause", "fails", "versus", "program", "run", "cost_s", *_STATE_KEYS)


def shown_facts(facts: dict) -> dict:
    """A finding's facts as --json gives them: without the state kept for the next check."""
    return {k: v for k, v in facts.items() if k not in _STATE_KEYS}


def _shown(finding: dict) -> dict:
    facts = finding.get("facts")
    return finding | {"facts": shown_facts(facts)} if facts and any(k in facts for k in _STATE_KEYS) else finding


def run_check(engine, *, tolerance: float = TOLERANCE, filters: dict | None = None,
              since: str | None = None, min_diff: float = MIN_DIFF, rejudge: bool = False,
              below_s: float = BELOW_THRESHOLD_S, allow_loaded: bool = False) -> CheckResult:
    """Judge, store the run and its verdicts (one transaction), return the findings.

    The cache cells are folded first, in the same transaction: the findings read
    them, and a check that fails leaves them as they were. The pinned rows the
    previous run judged are not judged again where its verdicts still stand
    (_reusable); `rejudge` judges every row regardless."""
    with gc_pause.paused(), engine.begin() as conn:
        return judge(conn, tolerance=tolerance, filters=filters, since=since, min_diff=min_diff, rejudge=rejudge,
                     below_s=below_s, allow_loaded=allow_loaded, fresh=True)


def judge(conn, *, tolerance: float = TOLERANCE, filters: dict | None = None, since: str | None = None,
          min_diff: float = MIN_DIFF, rejudge: bool = False, below_s: float = BELOW_THRESHOLD_S,
          allow_loaded: bool = False, fresh: bool = False) -> CheckResult:
    """run_check in the caller's write transaction; `fresh`: it has written nothing yet
    (run_check's), so a rebuild of the cache cells may read every row on a connection of
    its own (cells.begin_fold), which sees only what is committed."""
    refuse_unmatched(conn, filters, "nothing to check")  # before a check run is stored
    now = utc_now()
    where, params = filter_sql(filters, "r")
    if since is not None:
        where += " AND r.timestamp >= :since"
        params["since"] = since
    given = _given(filters, since, below_s, allow_loaded)
    # on a first check of a big ledger a rebuild's pass over every row goes on beside the
    # health (cells.begin_fold), and a judgement of every pinned row beside the cache passes
    # (_judge_pinned), each on a connection of its own: both cores are used
    fold = cells.begin_fold(conn, aside=fresh)
    pinned = None
    try:
        kept = None if rejudge or since is not None else _kept(conn, fold.found, given)
        digest = pins_digest(conn)
        prev = None if rejudge else _reusable(conn, fold.found, digest, tolerance, min_diff, given)
        run_id = conn.execute(sa.insert(check_runs).values(  # its exit code and newest run time below
            checked_at=now, tolerance=tolerance, exit_code=0, min_diff_s=min_diff, filters=given, upto=fold.top,
            pins_digest=digest)).inserted_primary_key[0]
        before = _previous(conn, run_id, given)
        health, newest_run = health_findings(conn, filters, below_s, kept)
        health = since_filter(conn, health, since)
        folded = fold.finish()
        pinned = _judge_pinned(conn, where, allow_loaded, prev, params | {
            "run": run_id, "tol": tolerance, "min_diff": min_diff, "now": now, "top": fold.top,
            "above": prev.upto if prev else 0, "prev": prev.id if prev else 0}, aside=fold.reader is not None)
        parsed = lineages_of(list(folded.cells))  # every cell's lineage and values: one parse
        found = cache_findings(conn, folded.cells, parsed, filters, since, _earlier(conn, kept, folded, parsed))
        _insert_judged(conn, pinned)
    except BaseException:
        for reader in (fold, pinned):
            if reader is not None:
                reader.cancel()
        raise
    found += health
    if found:
        insert_rows(conn, verdicts, _cache_verdicts(conn, found, run_id, now))
    counts = dict(conn.execute(sa.select(verdicts.c.verdict, sa.func.sum(verdicts.c.n_rows))
                               .where(verdicts.c.check_run_id == run_id).group_by(verdicts.c.verdict)).all())
    exit_code = 1 if counts.get(REGRESSION) or any(f.fails for f in found) else 0
    conn.execute(sa.update(check_runs).where(check_runs.c.id == run_id)
                 .values(exit_code=exit_code, newest_run_time=newest_run))
    findings = stored_findings(conn, run_id)
    if before is not None:
        said = _said_by(conn, before)
        for f in findings:
            f["unchanged"] = tuple(f[c] for c in _SAID) in said
    return CheckResult(run_id, tolerance, exit_code, counts, findings, min_diff, before)


def _given(filters: dict | None, since: str | None, below_s: float, allow_loaded: bool) -> str:
    """What a run's findings were judged over, as check_runs.filters keeps it: a run with
    other options keeps nothing of another's."""
    return json.dumps(filters_given(filters) | ({"since": since} if since else {})
                      | ({"below_threshold_s": below_s} if below_s != BELOW_THRESHOLD_S else {})
                      | ({"allow_loaded": True} if allow_loaded else {}), sort_keys=True)


def _previous(conn, run_id: int, given: str) -> int | None:
    """The check run before `run_id` judged over the same filters and options, if any."""
    return conn.execute(sa.select(sa.func.max(check_runs.c.id)).where(
        check_runs.c.id < run_id, check_runs.c.filters == given)).scalar()


_SAID = ("verdict", "row_id", "cause")  # what makes two findings the same finding


def _said_by(conn, run_id: int) -> set[tuple]:
    """What a run's stored findings said (_SAID of each), read as those three columns
    only: a tenth of stored_findings' time (no join, no facts parsed)."""
    sql = f"SELECT {', '.join(_SAID)} FROM verdicts WHERE check_run_id = :run AND verdict <> '{OK}'"
    return {tuple(r) for r in conn.execute(sa.text(sql), {"run": run_id}).all()}


def pins_digest(conn) -> str:
    """A digest of every pin as it stands: a run judged against these pins and no others."""
    rows = conn.execute(sa.select(pins).order_by(pins.c.id)).all()
    return hashlib.sha256(json.dumps([list(r) for r in rows], default=str).encode()).hexdigest()


def _reusable(conn, folded: int, digest: str, tolerance: float, min_diff: float, given: str):
    """The previous run, if its pinned verdicts stand for the rows up to its `upto`:
    it judged the same pins with the same options, and no row at or below its
    `upto` changed since (the cache cells' fold was not reset: cells.fold); else None."""
    prev = conn.execute(sa.select(check_runs).order_by(check_runs.c.id.desc()).limit(1)).first()
    same = prev is not None and prev.upto is not None and prev.upto == folded and folded > 0 and (
        prev.pins_digest, prev.tolerance, prev.min_diff_s, prev.filters) == (digest, tolerance, min_diff, given)
    return prev if same else None


def _kept(conn, found: int, given: str) -> Kept | None:
    """The previous run, where the cache passes may take what they read of a cell's rows
    from its findings (_earlier), and the health judges what it read of older runs: it
    read the rows up to its `upto` as they stand (the fold found that `upto`: it was not
    reset since), over the same filters and options, with no --since (which drops
    findings); else None."""
    prev = conn.execute(sa.select(check_runs).order_by(check_runs.c.id.desc()).limit(1)).first()
    if prev is None or not found or prev.upto != found or prev.filters != given:
        return None
    return Kept(prev.id, prev.upto, prev.newest_run_time)


def _earlier(conn, kept: Kept | None, folded: cells.Folded, parsed: dict) -> Earlier | None:
    """The `kept` run's cache findings, with the lineages the fold's new rows touched."""
    if kept is None:
        return None
    return earlier(conn, kept.run_id, kept.upto, {parsed[k][0] for k in folded.new})
