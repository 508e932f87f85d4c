"""The report's opening section, "what to do": each root cause the newest `ledger check`
found, in check's own words (ledger/watch/grouped.py), costliest first, with what it costs
a run. The report judges nothing itself (it is read-only): a ledger never checked, or a
check that found nothing, says so."""

from __future__ import annotations

import sqlalchemy as sa

from ledger.output import shown
from ledger.report.text import md
from ledger.storage.models import check_runs
from ledger.watch.check import stored_findings
from ledger.watch.grouped import groups

HEADING = "### what to do"


def markdown(engine, filters: dict | None = None) -> str:
    with engine.connect() as conn:
        run = conn.execute(sa.select(check_runs.c.id, check_runs.c.checked_at)
                           .order_by(check_runs.c.id.desc()).limit(1)).first()
        if run is None:
            return f"{HEADING}\n\nThis ledger has not been checked: `ledger check` says what to do.\n\n"
        found = [f for f in stored_findings(conn, run.id)
                 if all(f.get(k) == v for k, v in (filters or {}).items() if v is not None and k in f)]
    found_groups = sorted(groups(found), key=lambda g: -(g.cost_s or 0))
    head = f"{HEADING}\n\nFrom check run {run.id} ({md(run.checked_at)})"
    if not found_groups:
        return f"{head}: nothing to do, the cache applied wherever it could.\n\n"
    lines = [f"- {md(shown(g.line()))}" for g in found_groups]  # a stored line break stays in its line
    return f"{head}: each root cause, costliest first.\n\n" + "\n".join(lines) + "\n\n"
