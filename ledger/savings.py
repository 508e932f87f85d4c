"""What a warm compile saved: the one definition, for `ledger runs`, `ledger diff`, the
report (its programs and its time-saved table), `ledger cache` and predict's expected
cold cost.

A warm compile saved what the same function at the same signature costs cold, less
what it cost warm:

- the cold cost is its cell's median cold compile: the ok cold rows of its
  STATELESS_KEY (the host key but cache_state, and the cell: a recorded row's function
  and input signature), measured on a host that was not loaded (ledger/watch/keys.py's
  rule; every cache dir, every run). A compile slowed by a busy host is not what the
  cache saves on a quiet one;
- where the ledger holds no cold row of the cell at all, the compile seconds JAX wrote
  inside the cache entry, but only when they are at least 1: JAX keeps whole seconds,
  so a sub-second compile reads 0 there and every hit of it would read as a loss. Such
  a figure is counted apart (``from_jax``) and said so;
- else the saving is unknown: counted (``unknown``; ``loaded`` of them because the
  cell's cold rows were all on a loaded host), never summed as 0. What those would have
  saved by the loaded rows' median is kept apart (``loaded_s``) and said as such: on a
  small machine a compile-bound program loads its host itself, and that figure is the
  only one there is; it is never added to ``seconds``.

Not clamped at 0: a cache read slower than the compile it replaced (a tiny function)
cost time, and the sum is held to the wall clock (bench/bench_field_fit.py).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from ledger.record import COLD, STATELESS_KEY
from ledger.rows import key_values, ok_sql
from ledger.storage.cell_ids import all_assigned
from ledger.storage.in_lists import with_lists

FROM_COLD, FROM_JAX, UNKNOWN = "cold", "jax", "unknown"
JAX_MIN_S = 1  # JAX's whole seconds below this say nothing (a 0.4 s compile reads 0)
# How `runs`, the report and `ledger cache` name the figure, in one place.
SAVED_FROM = ("each warm compile against its cell's median cold compile on a host not loaded"
              " (JAX's whole seconds in the entry where the ledger has no cold row and they are >= 1 s)")
CELL = STATELESS_KEY


@dataclass
class Saved:
    """What some warm compiles saved, summed: the seconds of those with a cold cost,
    and how many had none."""

    seconds: float = 0.0
    known: int = 0  # warm compiles with a cold cost (from_jax of them by JAX's entry)
    from_jax: int = 0
    unknown: int = 0
    loaded: int = 0  # of the unknown: the cell was cold only on a loaded host
    loaded_s: float = 0.0  # what those saved by their loaded cold rows' median: said apart, never summed in

    def add(self, other: Saved) -> Saved:
        for name in ("seconds", "known", "from_jax", "unknown", "loaded", "loaded_s"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        return self

    @property
    def value(self) -> float | None:
        """The seconds, or None when no warm compile had a cold cost (unknown, not 0)."""
        return None if self.known == 0 else self.seconds

    def as_dict(self) -> dict:
        return {**asdict(self), "seconds": round(self.seconds, 6), "loaded_s": round(self.loaded_s, 6)}


@dataclass
class Cost:
    """A cell's cold cost: the median of ``n`` cold rows on hosts not loaded (None when
    none), and how many cold rows it has on loaded hosts, and their median."""

    median: float | None
    n: int
    n_loaded: int = 0
    loaded_median: float | None = None


def _loaded():
    from ledger.watch.keys import loaded_sql  # the one loaded-host rule

    return loaded_sql()


def cold_costs(conn, cells: set[tuple]) -> dict[tuple, Cost]:
    """Each of ``cells``' cold cost (a cell: its values of CELL, as rows.key_values gives
    them). One read of the cold rows of the cells' functions and transforms, as plain
    tuples: at 50k cold rows, mapping each row cost more than the query; where every row
    has its cell id, each row as its id, the cells' values read once from `cells`."""
    if not cells:
        return {}
    transforms = sorted({c[CELL.index("transform")] for c in cells if c[CELL.index("transform")] is not None})
    functions = sorted({c[CELL.index("function")] for c in cells if c[CELL.index("function")] is not None})
    where = " AND transform IN :transforms" if transforms else ""
    # a probe row's function is NULL: its cells are read whole
    where += " AND (function IS NULL OR function IN :functions)" if functions else ""
    params = {"transforms": transforms, "functions": functions}
    by_id = all_assigned(conn)
    quiet: dict = {}
    loaded: dict = {}
    for seconds, is_loaded, *key in conn.execute(with_lists(
            f"SELECT compile_s, CASE WHEN {_loaded()} THEN 1 ELSE 0 END, {'cell_id' if by_id else ', '.join(CELL)}"
            f" FROM compile_records WHERE cache_state = '{COLD}' AND {ok_sql()} AND compile_s IS NOT NULL{where}",
            *params), params):
        (loaded if is_loaded else quiet).setdefault(key[0] if by_id else _cell(key), []).append(seconds)
    if by_id:  # each cell id as its cell's values
        of = {r[0]: key_values(r._mapping, CELL) for r in conn.execute(
            with_lists(f"SELECT id, {', '.join(CELL)} FROM cells WHERE 1 = 1{where}", *params), params)}
        quiet, loaded = ({of[i]: v for i, v in d.items()} for d in (quiet, loaded))
    return {c: Cost(statistics.median(quiet[c]) if c in quiet else None, len(quiet.get(c, ())),
                    len(loaded.get(c, ())), statistics.median(loaded[c]) if c in loaded else None)
            for c in cells if c in quiet or c in loaded}


_MP = CELL.index("mixed_precision")


def _cell(key: list) -> tuple:
    """A cell's values as read, as key_values gives them (mixed_precision a bool)."""
    if key[_MP] is not None:
        key[_MP] = bool(key[_MP])
    return tuple(key)


class ColdCosts:
    """cold_costs for a report's several sections, each cell read at most once: the
    programs' newest runs and the time-saved days are mostly the same cells, and each
    read is a scan of the cold rows of their functions."""

    def __init__(self) -> None:
        self._known: dict[tuple, Cost] = {}
        self._read: set[tuple] = set()

    def __call__(self, conn, cells: set[tuple]) -> dict[tuple, Cost]:
        if missing := cells - self._read:
            self._known.update(cold_costs(conn, missing))
            self._read |= missing
        return {c: self._known[c] for c in cells if c in self._known}


def cell_of(row) -> tuple:
    return key_values(row, CELL)


def entry_seconds(cache_dir: str | None, cache_key: str | None) -> int | None:
    """JAX's compile seconds in the entry of ``cache_key`` in ``cache_dir`` (either name
    JAX gives an entry), or None: no such file here, or unreadable."""
    from ledger.cache.entries import SUFFIX, compile_seconds

    if not cache_dir or not cache_key or "/" in cache_key or cache_key.startswith("."):
        return None
    for name in (f"{cache_key}{SUFFIX}", cache_key):
        path = Path(cache_dir) / name
        if path.is_file():
            return compile_seconds(path)[0]
    return None


def saved(n_warm: int, warm_s: float, cost: Cost | None, jax_s: int | None = None) -> Saved:
    """What ``n_warm`` warm compiles of one cell taking ``warm_s`` seconds in all saved.
    ``jax_s``: JAX's seconds in their entry (asked only where the cell was never cold)."""
    if cost is not None and cost.median is not None:
        return Saved(n_warm * cost.median - warm_s, known=n_warm)
    if cost is not None:  # cold rows, all on a loaded host
        return Saved(unknown=n_warm, loaded=n_warm, loaded_s=n_warm * cost.loaded_median - warm_s)
    if jax_s is not None and jax_s >= JAX_MIN_S:
        return Saved(n_warm * jax_s - warm_s, known=n_warm, from_jax=n_warm)
    return Saved(unknown=n_warm)


def of_rows(conn, rows: list[dict], entries: dict[str, int | None] | None = None,
            costs_of=cold_costs) -> list[Saved]:
    """What each warm row saved (each with CELL's columns, compile_s, cache_dir and
    cache_key). ``entries``: JAX's seconds by cache key where the caller read them
    (`ledger cache`); else the entry is looked for in the row's cache dir. ``costs_of``:
    a ColdCosts where a report reads the same cells again."""
    costs = costs_of(conn, {cell_of(r) for r in rows})
    read: dict[tuple, int | None] = {}
    out = []
    for r in rows:
        cost = costs.get(cell_of(r))
        jax_s = None
        if cost is None:
            at = (r.get("cache_dir"), r.get("cache_key"))
            if entries is not None:
                jax_s = entries.get(at[1])
            elif at not in read:
                jax_s = read[at] = entry_seconds(*at)
            else:
                jax_s = read[at]
        out.append(saved(1, r["compile_s"], cost, jax_s))
    return out


def total(items) -> Saved:
    out = Saved()
    for s in items:
        out.add(s)
    return out


def words(s: Saved, fmt=lambda v: f"{v:.2f}") -> str:
    """A sum for people: '2.41 s', '2.41 s (+3 unknown)', 'unknown' (none known)."""
    if s.value is None:
        if not s.unknown:
            return "nothing (no warm compile)"
        if s.loaded == s.unknown:
            return f"unknown (cold only on a loaded host: {fmt(s.loaded_s)} s by those rows)"
        return "unknown"
    out = f"{fmt(s.seconds)} s"
    extra = [f"+{s.unknown} unknown"] if s.unknown else []
    if s.from_jax:
        extra.append(f"{s.from_jax} by JAX's whole seconds")
    return out + (f" ({', '.join(extra)})" if extra else "")
