"""The report's "cache health" section: the health findings of the newest `ledger check`
(ledger/watch/health.py), as check printed them: a line per root cause (watch/grouped.py). The report reads what check stored; it
judges nothing itself (it is read-only), so a ledger never checked says so."""

from __future__ import annotations

import sqlalchemy as sa

from ledger.output import shown
from ledger.report.text import md
from ledger.storage.models import check_runs
from ledger.watch.check import stored_findings
from ledger.watch.grouped import groups
from ledger.watch.kinds import HEALTH_KINDS


def markdown(engine, filters: dict | None = None) -> str:
    """The section, or '' when the newest check found nothing of the cache's health."""
    with engine.connect() as conn:
        run = conn.execute(sa.select(check_runs.c.id, check_runs.c.checked_at)
                           .order_by(check_runs.c.id.desc()).limit(1)).first()
        if run is None:
            return ""
        found = [f for f in stored_findings(conn, run.id) if f["verdict"] in HEALTH_KINDS
                 and all(f.get(k) == v for k, v in (filters or {}).items() if v is not None and k in f)]
    if not found:
        return ""
    out = ["### cache health", "", f"From check run {run.id} ({run.checked_at}): what the cache fails to keep, and what a process compiled again.", ""]
    out += [f"- {md(shown(g.line()))}" for g in groups(found)]  # a stored line break stays in its line
    return "\n".join(out) + "\n\n"
