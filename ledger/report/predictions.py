"""How often `ledger predict` held, per host, from the predictions a later compile row
scored (ledger/predict/store.py); each failed prediction is a finding, one line each."""

from __future__ import annotations

from ledger.predict.store import has_table, scores
from ledger.report.text import md

HEADING = "### Predictions"


def markdown(engine, hostname: str | None = None) -> str:
    """The section, or '' when no prediction has been scored yet."""
    with engine.connect() as conn:
        found = scores(conn, hostname) if has_table(conn) else []
    if not found:
        return ""
    out = ["", HEADING, "", "| host | scored | held | held % |", "|---|---:|---:|---:|"]
    out += [f"| {md(s.hostname)} | {s.scored} | {s.held} | {100 * s.held / s.scored:.0f}% |" for s in found]
    failed = [f for s in found for f in s.failed]
    if failed:
        out += ["", "Predictions that did not hold:", ""]
        out += [md(f"- prediction {f['prediction_id']} ({f['created_at']}, {f['hostname']}): "
                   f"{f['dataset_class']} / {f['model_type']} / {f['instrument']} {f['transform']} "
                   f"predicted {f['predicted']}, row {f['row_id']} measured {f['measured']}")
                for f in failed]
    return "\n".join(out) + "\n"
