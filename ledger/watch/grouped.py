"""What `ledger check` prints: one line per root cause, counted, not a line per cell.

A check's findings (check.stored_findings: each with its facts) fall into groups that
share a kind, a root cause (causes.Cause.root) and a program (the recorded command, or
the probe's objective). A group of one cell reads as that cell's own line (kinds.py); a
bigger one counts its cells and says what it costs a run: "below-threshold `python
mge.py`: 211 cells never written: every compile was under ...; 9.51 s a run". The cells a
run's compiles under JAX's threshold never wrote, and that run's below-threshold finding,
are one root: one line. The loaded hosts' inconclusive rows are one line with their
count and the flag that judges them; a finding the previous check gave too is counted,
not listed again. `--verbose` and `--json` still give every cell.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ledger.output import three_digits
from ledger.watch.causes import C_RUN_UNDER_THRESHOLD, C_THRESHOLD, MIN_COMPILE_TIME, MIN_ENTRY_SIZE, Cause
from ledger.watch.kinds import (
    BELOW_THRESHOLD,
    CACHE_NOT_REUSED,
    INCONCLUSIVE,
    JAX_CHANGED,
    KINDS,
    OK,
    finding_line,
    program_text,
)

ALLOW_LOADED = "--allow-loaded"
# What keeps entries JAX's thresholds threw away: the setting, named as the environment takes it.
_KEEPS = {MIN_COMPILE_TIME: "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0",
          MIN_ENTRY_SIZE: "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0",
          None: "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 and JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0"}


@dataclass
class Group:
    """Findings of one kind, root cause and program."""

    kind: str
    root: tuple
    program: str | None
    findings: list[dict] = field(default_factory=list)

    @property
    def fails(self) -> bool:
        return any(f["fails"] for f in self.findings)

    @property
    def cells(self) -> list[dict]:
        """The findings about a cell (not about a run)."""
        return [f for f in self.findings if not _of_run(f)]

    @property
    def cost_s(self) -> float | None:
        """What the root costs a run: the run's own sum where a run-level finding says it,
        else the cells' (each its newest run's compile seconds)."""
        runs = [f["facts"]["cost_s"] for f in self.findings if _of_run(f) and f["facts"].get("cost_s")]
        if runs:
            return max(runs)
        costs = [f["facts"].get("cost_s") for f in self.cells if f["facts"].get("cost_s") is not None]
        return sum(costs) if costs else None

    @property
    def unchanged(self) -> bool:
        return all(f.get("unchanged") for f in self.findings)

    def as_json(self) -> dict:
        return {"kind": self.kind, "root": list(self.root), "program": self.program, "cells": len(self.cells),
                "findings": len(self.findings), "fails": self.fails, "cost_s": self.cost_s,
                "unchanged": self.unchanged, "line": self.line(), "rows": [f["row_id"] for f in self.findings]}

    def line(self) -> str:
        if len(self.findings) == 1:
            return finding_line(self.findings[0])
        if self.kind == JAX_CHANGED:
            return _bump_line(self)
        cause = Cause.from_json(self.findings[-1]["facts"]["cause"])
        n = len(self.cells)
        counted = f"{n} cell{'s' * (n != 1)} of {program_text(self.program)}"
        run = next((f for f in self.findings if _of_run(f)), None)
        if run is not None:
            counted += f" (run {run['facts']['run'][:12]}: {run['facts']['cause']['n']} compiles)"
        cost = f"; {three_digits(self.cost_s)} s a run" if self.cost_s else ""
        fix = f"; {_KEEPS.get(self.root[1], _KEEPS[None])} keeps them" if self.root[0] == C_THRESHOLD else ""
        return (f"{self.kind:<13} {counted}: {cause.root_words()}{cost}{fix}"
                + ("" if self.fails else " [does not fail]"))


def _of_run(f: dict) -> bool:
    """A finding about a run, not a cell. (Asked as `f not in group.cells`, a list made and
    searched by dict equality at each finding: 2,000 went-cold cells' line took 1.5 s.)"""
    return (f["facts"].get("cause") or {}).get("code") == C_RUN_UNDER_THRESHOLD


def _bump_line(g: Group) -> str:
    """A jax bump recompiles every cell once: the host, the bump and the cells' rows."""
    f = g.findings[0]
    host = f"{f['hardware']}/{f['hostname']}" + (" mixed" if f["mixed_precision"] else "")
    ids = ", ".join(str(x["row_id"]) for x in g.findings)
    return (f"{JAX_CHANGED:<13} jax {f.get('old_jax')} → {f['jax_version']} on {host}: {len(g.findings)} cells"
            f" of {program_text(g.program)} recompile once (rows {ids}); expected after a bump, does not fail")


def _key(f: dict) -> tuple:
    """(kind, root, program) of a finding: the threshold's cells and its run are one root."""
    facts = f["facts"]
    if not facts.get("cause"):  # judged against a pin (regression): a line of its own
        return f["verdict"], ("row", f["row_id"]), None
    cause = Cause.from_json(facts["cause"])
    kind = BELOW_THRESHOLD if cause.root[0] == C_THRESHOLD and f["verdict"] in (BELOW_THRESHOLD, CACHE_NOT_REUSED) \
        else f["verdict"]
    root = cause.root
    if kind == JAX_CHANGED:  # a bump is said per host
        root = (*root, f["hardware"], f["hostname"], bool(f["mixed_precision"]))
    return kind, root, facts.get("program")


def groups(findings: list[dict]) -> list[Group]:
    """The findings (not ok, not inconclusive) in groups, in the kinds' order, costliest first."""
    out: dict[tuple, Group] = {}
    for f in findings:
        if f["verdict"] in (OK, INCONCLUSIVE):
            continue
        key = _key(f)
        out.setdefault(key, Group(*key)).findings.append(f)
    order = list(KINDS)
    return sorted(out.values(), key=lambda g: (order.index(g.kind), -(g.cost_s or 0)))


def lines(findings: list[dict], earlier: int | None, verbose: bool = False) -> list[str]:
    """check's lines: a line per group (per finding with `verbose`), the loaded hosts'
    inconclusive rows in one, and the findings unchanged since check run `earlier` counted."""
    if verbose:
        return [finding_line(f) for f in findings]
    found = groups(findings)
    out = [g.line() for g in found if not g.unchanged]
    loaded = [f for f in findings if f["verdict"] == INCONCLUSIVE]
    if len(loaded) == 1:
        out.append(finding_line(loaded[0]))
    elif loaded:
        n = len(loaded)
        out.append(f"{INCONCLUSIVE:<13} {n} warm rows measured on a loaded host (1-minute load above the usable cores)"
                   f" were not judged: {ALLOW_LOADED} judges them")
    same = [g for g in found if g.unchanged]
    if same:
        n, failing = sum(len(g.findings) for g in same), sum(f["fails"] for g in same for f in g.findings)
        out.append(f"{n} finding{'s' * (n != 1)} in {len(same)} line{'s' * (len(same) != 1)} unchanged since check"
                   f" run {earlier}" + (f", {failing} of them failing" if failing else "")
                   + ": ledger check --verbose lists them")
    return out
