"""A regression threshold from each key's own history, kept on its pin.

A fixed 1.5x fits no real key: on a quiet node a key's warm compiles sit within 1%
and a 1.4x slowdown passes; on a shared node they spread by 40% and 1.5x flags noise.
So a pin also keeps the key's warm history up to the pin (the newest WINDOW warm ok
rows at or before it, loaded-host rows left out) and, with MIN_HISTORY rows or more,
a threshold drawn from their spread:

    threshold = median + K * 1.4826 * MAD

the robust form of a z-score (median and median absolute deviation in place of mean
and standard deviation, 1.4826 making the MAD estimate sigma for normal noise; one
slow outlier in the history moves neither). K = 5 follows conbench, whose lookback
z-score flags a result more than 5 deviations from its history's mean. With fewer
rows the fixed tolerance (default 1.5x the pin) judges. The history is sticky like
the pin: it is taken when the key is pinned, so a regression never becomes the noise
it is judged against; a repin takes it again.
"""

from __future__ import annotations

from statistics import median

import sqlalchemy as sa

from ledger.rows import before_sql, newest_first, pinnable_sql, time_sql
from ledger.watch.keys import key_join_sql, loaded_sql

MIN_HISTORY = 6  # warm rows a key needs before its own spread judges it
WINDOW = 30  # the newest warm rows at or before the pin that make its history
K = 5.0
MAD_TO_SIGMA = 1.4826
HISTORY, TOLERANCE_RULE = "history", "tolerance"


def stats(values: list[float]) -> dict:
    """history_n, history_median_s, history_mad_s and threshold_s of a key's history."""
    if not values:
        return {"history_n": 0, "history_median_s": None, "history_mad_s": None, "threshold_s": None}
    m = median(values)
    mad = median(abs(v - m) for v in values)
    threshold = m + K * MAD_TO_SIGMA * mad if len(values) >= MIN_HISTORY else None
    return {"history_n": len(values), "history_median_s": m, "history_mad_s": mad, "threshold_s": threshold}


def _history_sql(dialect: str) -> str:
    """Each pin lacking a history, with its key's newest WINDOW warm ok rows at or
    before the pin's own row, loaded hosts left out: one pass for all of them."""
    match = key_join_sql("r", "p", dialect)
    upto = before_sql("r", time_sql("p"), "p.row_id", inclusive=True)

    return (
        "SELECT pin_id, compile_s FROM (SELECT p.id AS pin_id, r.compile_s, ROW_NUMBER() OVER (PARTITION BY p.id"
        f" ORDER BY {newest_first('r')}) AS rn"
        f" FROM pins p JOIN compile_records r ON {match}"
        f" WHERE p.history_n IS NULL AND {pinnable_sql('r')} AND NOT {loaded_sql('r')} AND {upto}) h"
        f" WHERE rn <= {WINDOW}"
    )


def fill_histories(conn) -> int:
    """Take the history of every pin that has none (new, repinned, migrated or merged
    pins); returns how many were filled. The caller's transaction."""
    from ledger.storage.models import pins

    todo = [r[0] for r in conn.execute(sa.select(pins.c.id).where(pins.c.history_n.is_(None)))]
    if not todo:
        return 0
    values: dict[int, list[float]] = {pin_id: [] for pin_id in todo}
    for pin_id, compile_s in conn.execute(sa.text(_history_sql(conn.dialect.name))):
        values[pin_id].append(compile_s)
    conn.execute(sa.update(pins).where(pins.c.id == sa.bindparam("pid")),
                 [{"pid": pin_id, **stats(v)} for pin_id, v in values.items()])
    return len(todo)


def rule_text(f: dict) -> str:
    """How a pinned row was judged, with the numbers, for a finding's line."""
    if f.get("rule") == HISTORY:
        return (f"history rule: threshold {f['threshold_s']:.4g}s = median {f['history_median_s']:.4g}s"
                f" + {K:g} x 1.4826 x MAD {f['history_mad_s']:.3g}s, n {f['history_n']}; pin {f['pin_compile_s']:.4g}s")
    return f"tolerance rule: {f['tolerance']:g}x pin {f['pin_compile_s']:.4g}s"
