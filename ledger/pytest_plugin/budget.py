"""`@pytest.mark.compile_budget(compiles=N, seconds=S)`: what a test's call may compile.

Judged over the test's call (its fixtures' compiles are their setup's and teardown's),
started from JAX's in-memory caches cleared, so the count is the same run alone, in the
whole suite or on any pytest-xdist worker: a budget that held in one order and broke in
another would be a flaky test. ``compiles``: every compile of the call, warm ones too
(each is a program JAX built again). ``seconds``: the compile seconds of the compiles
that really compiled (cold, or with no persistent cache), warm ones being cache reads;
judged only on a host that was not loaded, and said so where it was not judged.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass

from ledger.record import WARM

MARKER = "compile_budget"
SHOWN = 4  # functions named in the failure's line; the rest are counted


class BudgetError(ValueError):
    """A compile_budget marker that cannot be judged (a usage error of the suite)."""


@dataclass(frozen=True)
class Budget:
    compiles: int | None = None
    seconds: float | None = None

    @classmethod
    def of_marker(cls, mark) -> Budget:
        if mark.args:
            raise BudgetError("compile_budget takes keywords only: compile_budget(compiles=N, seconds=S)")
        unknown = set(mark.kwargs) - {"compiles", "seconds"}
        if unknown:
            raise BudgetError(f"compile_budget has no {', '.join(sorted(unknown))}: it takes compiles= and seconds=")
        compiles, seconds = mark.kwargs.get("compiles"), mark.kwargs.get("seconds")
        if compiles is not None and (type(compiles) is not int or compiles < 0):
            raise BudgetError(f"compile_budget(compiles={compiles!r}): a count, 0 or more")
        if seconds is not None and (type(seconds) not in (int, float) or not 0 <= seconds < float("inf")):
            raise BudgetError(f"compile_budget(seconds={seconds!r}): seconds, 0 or more")
        if compiles is None and seconds is None:
            raise BudgetError("compile_budget needs compiles=N, seconds=S or both")
        return cls(compiles, None if seconds is None else float(seconds))


def usable_cores() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def loaded(load_1m: float | None, cores: int | None) -> bool:
    """The loaded-host rule of ledger/watch/keys.py (loaded_sql), for one compile in
    hand: its 1-minute load above the cores it could use; unknown is not loaded."""
    return load_1m is not None and cores is not None and load_1m > cores


def _named(counts: Counter, unit) -> str:
    top = [f"{name} {unit(n)}" for name, n in counts.most_common(SHOWN)]
    more = len(counts) - SHOWN
    return ", ".join(top) + (f" and {more} more" if more > 0 else "")


def _times(n: int) -> str:
    return f"{n}x"


def judge(budget: Budget, compiles: list, cores: int | None = None) -> tuple[str | None, str | None]:
    """(why the test is over its budget, in one line, or None; why its seconds were
    not judged, or None). ``compiles``: the call's (tally.Compile)."""
    over, note = [], None
    if budget.compiles is not None and len(compiles) > budget.compiles:
        counts = Counter(c.function or "?" for c in compiles)
        over.append(f"{len(compiles)} compiles > {budget.compiles}: {_named(counts, _times)}{_recompiled(compiles)}")
    real = [c for c in compiles if c.cache_state != WARM and c.compile_s is not None]
    if budget.seconds is not None and real:
        cores = usable_cores() if cores is None else cores
        busy = [c for c in real if loaded(c.host_load_avg_1m, cores)]
        seconds = sum(c.compile_s for c in real)
        if busy:
            note = (f"compile_budget(seconds={budget.seconds:g}) not judged: {len(busy)} of its {len(real)} compiles"
                    f" on a loaded host (1-minute load {max(c.host_load_avg_1m for c in busy):.2f} >"
                    f" {cores} usable cores)")
        elif seconds > budget.seconds:
            spent = Counter()
            for c in real:
                spent[c.function or "?"] += c.compile_s
            over.append(f"{seconds:.2f} s compiling > {budget.seconds:g} s: {_named(spent, lambda s: f'{s:.2f} s')}")
    return ("compile_budget exceeded: " + "; ".join(over)) if over else None, note


def _recompiled(compiles: list) -> str:
    """The signatures compiled more than once: the same program built again."""
    again = Counter((c.function, c.input_signature) for c in compiles)
    worst = [(k, n) for k, n in again.most_common() if n > 1]
    if not worst:
        return ""
    (function, signature), n = worst[0]
    return f"; recompiled: {function}({signature or '?'}) {n} times"
