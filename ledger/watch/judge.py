"""The cache findings of one lineage, judged from its rows: the one place `ledger check`
and `ledger explain` (and so `diff`, which explains its went-cold functions) decide what a
row says about the cache.

A lineage is a cell (one program: record.CELL_FIELDS, the variant included) on one host
and precision, across jax versions and cache dirs (findings.LINEAGE). Its rows are
loaded once (ledger/watch/findings.py for check, explain.py for one row), oldest first;
the functions here read them and nothing else, but for the whole rows and prunes of the
pair a cause compares (`Evidence`). explain asks what check would say were its row the
newest: `judge(rows up to the row)`, so the two agree by construction.

- went-cold: a cache cell (the lineage, a jax version and a cache dir) whose newest row
  is cold after a warm row in that dir. Read against the newest warm row before it, but
  never another process's program in the same run (rows of one run under different keys
  are not each other's warm row: on CPU each process of a jax.distributed job compiles
  under its own key).
- The cold streak of a lineage under one jax: the cold rows since its last warm row in
  any dir, when its newest row with a cache dir is cold and its dir holds no warm row
  before it. Two runs or more: cache-not-reused, for the strongest cause the rows show
  (causes.streak_cause: JAX's own thresholds first, then a new dir each run, lost
  entries, a changed key), or went-cold when only an older jax was ever warm (still
  cold under the new one). One run: jax-changed when an older jax was warm before it (the
  expected cold compile after a bump); else nothing (a first compile, or the first into
  another dir after warm ones there: explain says so, check does not fail it).
- cache-off: the lineage's newest row has no cache dir, and it was warm under one before.

Rows that a process other than 0 compiled and JAX did not write (only process 0 writes
entries) are the cache's health, not the cell's (health.py: cache-not-written): left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ledger.record import COLD, NONE, NOT_PERSISTED_PROCESS_INDEX, WARM
from ledger.watch import streaks
from ledger.watch.causes import (
    C_DIR_CHANGED,
    C_JAX,
    C_OFF,
    C_STILL_COLD,
    Cause,
    cold_cause,
    fetch_rows,
    has_prunes,
    prunes_of,
    run_of,
    streak_cause,
)
from ledger.watch.kinds import CACHE_NOT_REUSED, CACHE_OFF, JAX_CHANGED, KINDS, WENT_COLD

# What the judge reads of each row of a lineage (besides the lineage's own fields).
COLUMNS = ("id", "timestamp", "jax_version", "cache_dir", "cache_state", "run_id", "phase", "cache_key", "compile_s",
           "cache_not_persisted", "cache_files_before", "cache_files_after", "cache_requests", "cache_misses",
           "cache_min_compile_time_s", "cache_min_entry_size_bytes", "command", "objective")


@dataclass
class Finding:
    """One cache or health finding: its kind, its row, the row it is read against, its
    cause (facts), whether it fails, and the program (recorded command, or objective)
    and run it belongs to."""

    verdict: str
    row_id: int
    cause: Cause
    fails: bool
    versus_id: int | None = None  # the warm row whose key's pin the verdict links
    program: str | None = None
    run: str | None = None
    cost_s: float | None = None  # what the finding costs a run, in compile seconds
    extra: dict = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The cause as verdicts.cause stores it, and the lines say it."""
        words = self.cause.words()
        if self.verdict == WENT_COLD and self.versus_id is not None and self.cause.code != C_STILL_COLD:
            words += f" (last warm row {self.versus_id})"
        return words

    def facts(self) -> dict:
        """What verdicts.facts keeps: enough to make the finding again, words and all."""
        return {"cause": self.cause.as_json(), "fails": self.fails, "versus": self.versus_id,
                "program": self.program, "run": self.run, "cost_s": self.cost_s, **self.extra}

    @staticmethod
    def from_facts(verdict: str, row_id: int, facts: dict) -> Finding:
        f = dict(facts)
        known = {k: f.pop(k, None) for k in ("cause", "fails", "versus", "program", "run", "cost_s")}
        fails = KINDS[verdict].fails if known["fails"] is None else known["fails"]
        return Finding(verdict, row_id, Cause.from_json(known["cause"]), fails, known["versus"], known["program"],
                       known["run"], known["cost_s"], f)


class Evidence:
    """Whole rows and prunes for the pairs a cause compares, read as asked and kept.

    `later`: a finding whose cause reads a pair (a went-cold's, a cold streak's) is made at
    settle(), where every such pair is read together, in one query for their rows and one
    for their keys' prunes; as asked, each took its own. A cache dir emptied under 2,000
    warm cells is 2,000 went-cold findings at once, and 2,000 cells never reused as many
    streaks: read as asked, `ledger check` took 3.1 s and 1.2 s on SQLite (5.2 s on
    PostgreSQL for the first)."""

    def __init__(self, conn, later: bool = False):
        self.conn, self._rows, self._prunes = conn, {}, {}
        self._has_prunes: bool | None = None
        self._later: list[tuple[Finding, tuple, Callable[[], tuple[Cause, bool]]]] | None = [] if later else None

    def rows(self, *ids: int) -> list[dict]:
        missing = [i for i in dict.fromkeys(ids) if i not in self._rows]
        if missing:
            self._rows.update(fetch_rows(self.conn, missing))
        return [self._rows[i] for i in ids]

    def prunes(self, key: str | None) -> list[dict]:
        self._read_prunes([key])
        return self._prunes[key] if key else []

    def _read_prunes(self, keys) -> None:
        missing = [k for k in dict.fromkeys(keys) if k and k not in self._prunes]
        if missing:
            if self._has_prunes is None:
                self._has_prunes = has_prunes(self.conn)
            self._prunes.update(prunes_of(self.conn, missing, self._has_prunes))
            for k in missing:
                self._prunes.setdefault(k, [])

    def cold_cause(self, cold_id: int, warm_id: int) -> Cause:
        cold, warm = self.rows(cold_id, warm_id)
        return cold_cause(cold, warm, self.prunes(warm.get("cache_key")))

    def streak_cause(self, state: dict) -> tuple[Cause, bool]:
        """causes.streak_cause of a streak's state (streaks.py), with the whole rows of the
        pair it compares and their keys' prunes."""
        ids = streak_pair(state)
        whole = dict(zip(ids, self.rows(*ids), strict=True))
        keys = {r.get("cache_key") for r in whole.values()}
        return streak_cause(state, whole, {k: self.prunes(k) for k in keys if k})

    def made(self, found: Finding, ids, cause: Callable[[], tuple[Cause, bool]]) -> Finding:
        """`found` with its cause and whether it fails from `cause`, which reads the rows
        `ids` and their keys' prunes: now, or at settle() with every other's."""
        if self._later is None:
            found.cause, found.fails = cause()
        else:
            self._later.append((found, tuple(ids), cause))
        return found

    def settle(self) -> None:
        """Every cause left for later made, its rows and prunes read with the others'."""
        if not self._later:
            return
        pending, self._later = self._later, []
        self._read_prunes(r.get("cache_key") for r in self.rows(*(i for _, ids, _ in pending for i in ids)))
        for found, _, cause in pending:
            found.cause, found.fails = cause()


def streak_pair(state: dict) -> list[int]:
    """The rows a streak's cause compares (causes.streak_cause), if any."""
    return state["pair"] if not state["unwritten"] and state["pair"] else []


_UNSETTLED = Cause("unsettled")  # a finding's cause until Evidence.settle() makes it: it has no words


def program_of(row: dict) -> str | None:
    """What ran: a recorded program's command line, or the probe's objective."""
    return row.get("command") or (f"objective {row['objective']}" if row.get("objective") else None)


def judged(rows: list[dict]) -> list[dict]:
    """The rows the cache passes read: a process other than 0 whose entry JAX would not
    write is the cache's health (health.py), not the cell's."""
    return [r for r in rows if r.get("cache_not_persisted") != NOT_PERSISTED_PROCESS_INDEX]


def judge(rows: list[dict], ev: Evidence) -> list[Finding]:
    """Every finding of one lineage's rows (oldest first), as check gives them now."""
    rows = judged(rows)
    return sorted((f for cache_pass in PASSES for f in cache_pass(rows, ev)), key=lambda f: f.row_id)


def newest_enough(rows: list[dict], warm_dirs: set[tuple]) -> bool:
    """Whether the newest rows of a lineage (its rows from a point on: findings._start)
    judge as all of them would: every look back for a warm row that the passes make
    from a cold row finds one among them, or has none to find among all of them
    (`warm_dirs`: each (jax, cache dir) with a warm row anywhere). The passes read
    nothing older than the warm row they find; a jax never warm, its every cold row
    (which _start reads) and an older jax's warm row before them."""
    rows = judged(rows)
    warm_jax = {jax for jax, _ in warm_dirs}
    for jax, mine in _by_jax(rows).items():
        cached = [r for r in mine if r["cache_dir"] and r["cache_state"] in (WARM, COLD)]
        newest = {r["cache_dir"]: r for r in cached}
        for cache_dir, row in newest.items():
            if (row["cache_state"] == COLD and (jax, cache_dir) in warm_dirs
                    and _warm_before(mine, row, same_dir=True) is None):
                return False
        if not cached or cached[-1]["cache_state"] != COLD or _warm_before(mine, cached[-1], same_dir=False):
            continue
        if jax in warm_jax:
            return False  # its warm row is older than these rows
        if warm_jax - {jax} and _older_jax_warm(rows, jax, cached[0]) is None:
            return False  # another jax's warm row before the streak may be older than these rows
    return True


def _by_jax(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["jax_version"], []).append(r)
    return out


def _finding(kind: str, row: dict, cause: Cause, fails: bool, versus: int | None, cost: float | None = None,
             **extra) -> Finding:
    return Finding(kind, row["id"], cause, fails, versus, program_of(row), row.get("run_id"),
                   row.get("compile_s") if cost is None else cost, extra)


def _warm_before(rows: list[dict], row: dict, same_dir: bool) -> dict | None:
    """The newest warm row before `row` (in its dir, or any), but never a row of `row`'s
    own run under another key: another process's program, not this one's past."""
    for r in reversed(rows[:rows.index(row)]):
        if r["cache_state"] != WARM or not r["cache_dir"] or (same_dir and r["cache_dir"] != row["cache_dir"]):
            continue
        if run_of(r) == run_of(row) and r.get("cache_key") != row.get("cache_key"):
            continue
        return r
    return None


def went_cold_pass(rows: list[dict], ev: Evidence) -> list[Finding]:
    """Per jax and cache dir: its newest row cold after a warm row in that dir."""
    return [f for mine in _by_jax(rows).values() for f in _went_cold(mine, ev)]


def _went_cold(rows: list[dict], ev: Evidence) -> list[Finding]:
    newest: dict[str, dict] = {}
    for r in rows:
        if r["cache_dir"] and r["cache_state"] in (WARM, COLD):
            newest[r["cache_dir"]] = r
    out = []
    for row in newest.values():
        warm = _warm_before(rows, row, same_dir=True) if row["cache_state"] == COLD else None
        if warm is not None:
            pair = (row["id"], warm["id"])
            out.append(ev.made(_finding(WENT_COLD, row, _UNSETTLED, True, warm["id"]), pair,
                               lambda pair=pair: (ev.cold_cause(*pair), True)))
    return out


def streak_pass(rows: list[dict], ev: Evidence) -> list[Finding]:
    """Per jax: its cold streak's finding (cache-not-reused, still cold, jax-changed)."""
    return [f for jax, mine in _by_jax(rows).items() if (f := _streak(rows, jax, mine, ev)) is not None]


def _streak(lineage: list[dict], jax: str, rows: list[dict], ev: Evidence) -> Finding | None:
    """The finding of one jax's cold streak, if its newest row with a dir is cold and has no
    warm row before it in its dir (that one is a went-cold)."""
    cached = [r for r in rows if r["cache_dir"] and r["cache_state"] in (WARM, COLD)]
    if not cached or cached[-1]["cache_state"] != COLD or _warm_before(rows, cached[-1], same_dir=True):
        return None
    newest = cached[-1]
    warm = _warm_before(rows, newest, same_dir=False)
    colds = [r for r in cached[cached.index(warm) + 1 if warm else 0:] if r["cache_state"] == COLD]
    old = None if warm else _older_jax_warm(lineage, jax, colds[0])
    state = streaks.of(jax, colds)
    if state["runs"] >= 2:
        if old is None:
            # its state kept (verdicts.facts) where no row of the jax was ever warm: a
            # never-warm cell's next check adds the rows since to it (findings.py)
            return streak_finding(state, ev, newest, keep=warm is None)

        def still() -> tuple[Cause, bool]:
            inner, _ = ev.streak_cause(state)
            return Cause(C_STILL_COLD, {"inner": inner.as_json(), "runs": state["runs"], "jax": jax,
                                        "warm_row": old["id"], "old_jax": old["jax_version"]}), True

        return ev.made(_finding(WENT_COLD, newest, _UNSETTLED, True, old["id"], state["last_run_s"]),
                       streak_pair(state), still)
    if old is not None:
        first = colds[0]
        cause = Cause(C_JAX, {"old": old["jax_version"], "new": jax, "warm_row": old["id"]})
        return _finding(JAX_CHANGED, first, cause, False, old["id"], old_jax=old["jax_version"], new_jax=jax)
    return None


def streak_finding(state: dict, ev: Evidence, newest: dict, keep: bool = True) -> Finding:
    """A streak of two or more cold runs with no warm row before it: cache-not-reused, on
    its newest row (its id, run_id, command and objective), costing a run its newest
    run's cold compile seconds; `keep`: its state goes into its facts."""
    extra = {"streak": state} if keep else {}
    found = _finding(CACHE_NOT_REUSED, newest, _UNSETTLED, True, None, state["last_run_s"], **extra)
    return ev.made(found, streak_pair(state), lambda: ev.streak_cause(state))


def _older_jax_warm(lineage: list[dict], jax: str, first: dict) -> dict | None:
    """The newest warm row under another jax before the streak's first cold row."""
    before = lineage[:lineage.index(first)]
    return next((r for r in reversed(before) if r["jax_version"] != jax and r["cache_state"] == WARM
                 and r["cache_dir"]), None)


def cache_off_pass(rows: list[dict], ev: Evidence) -> list[Finding]:
    """The lineage's newest row has no cache dir and it was warm under one before: on the
    first such row after the last warm one."""
    kept = [r for r in rows if r["cache_state"] in (WARM, COLD, NONE)]
    if not kept or kept[-1]["cache_state"] != NONE:
        return []
    warm = next((r for r in reversed(kept) if r["cache_state"] == WARM and r["cache_dir"]), None)
    if warm is None:
        return []
    first = next(r for r in kept[kept.index(warm) + 1:] if r["cache_state"] == NONE)
    cause = Cause(C_OFF, {"first_none": first["id"], "dir": warm["cache_dir"], "warm_row": warm["id"]})
    return [_finding(CACHE_OFF, first, cause, True, warm["id"], old_cache_dir=warm["cache_dir"])]


# -- explain: the same judgement, of one row ---------------------------------------------

def of_row(rows: list[dict], row_id: int, ev: Evidence) -> tuple[Finding | None, Cause | None]:
    """What check says of a row were it the newest of its lineage (rows: the lineage's,
    oldest first, up to and including it): the finding on it or on its streak, or where
    there is none, a note (a first compile into another dir after warm ones)."""
    upto = rows[:next(i for i, r in enumerate(rows) if r["id"] == row_id) + 1]
    row = upto[-1]
    found = judge(upto, ev)
    mine = [f for f in found if f.row_id == row_id]
    if mine:
        return mine[0], None
    if row["cache_state"] == NONE:
        return next((f for f in found if f.verdict == CACHE_OFF), None), None
    same_run = [f for f in found if f.verdict == JAX_CHANGED and f.run is not None and f.run == row.get("run_id")]
    if same_run:
        return same_run[0], None
    kept = [r for r in judged(upto) if r["jax_version"] == row["jax_version"]]
    if row["cache_state"] == COLD and row in kept:
        warm = _warm_before(kept, row, same_dir=False)
        if warm is not None and warm["cache_dir"] != row["cache_dir"] and not any(
                r["cache_dir"] == row["cache_dir"] for r in kept[kept.index(warm) + 1:kept.index(row)]):
            return None, Cause(C_DIR_CHANGED, {"from": warm["cache_dir"], "to": row["cache_dir"],
                                               "warm_row": warm["id"]})
    return None, None


# The cache passes, each over one lineage's judged rows (oldest first), in this order. A new
# cache finding kind is its Kind in kinds.py and its pass here (docs/layout.md).
PASSES = [cache_off_pass, went_cold_pass, streak_pass]
