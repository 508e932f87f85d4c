"""Predictions kept, and scored against reality.

A prediction is scored by the first ok compile row after it (by id: rows written
later) with the same cache key on the same host and cache dir: it held when that row's
measured cache_state is the predicted one. The cache key names the program, its
compile options and the machine, so a row with it is the compile that was predicted.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from ledger.record import now_timestamp
from ledger.rows import ok_sql
from ledger.storage.models import predictions

# What a prediction keeps: every column of the table but those save() sets itself.
STORED = tuple(c.name for c in predictions.columns if c.name not in ("id", "after_row_id", "created_at"))


def save(engine, preds: list[dict]) -> list[int]:
    """Store each prediction (one transaction); their ids, in order."""
    now = now_timestamp()
    with engine.begin() as conn:
        after = conn.execute(sa.text("SELECT COALESCE(MAX(id), 0) FROM compile_records")).scalar()
        ids = []
        for p in preds:
            values = {k: p.get(k) for k in STORED} | {"after_row_id": int(after), "created_at": now}
            ids.append(conn.execute(predictions.insert().values(**values)).inserted_primary_key[0])
    return ids


# The first later ok row of each prediction's key, host and cache dir.
SCORED_SQL = f"""
SELECT p.id AS prediction_id, p.hostname, p.hardware, p.jax_version, p.transform,
       p.dataset_class, p.model_type, p.instrument, p.predicted, p.cause, p.created_at,
       r.id AS row_id, r.cache_state AS measured, r.compile_s
FROM predictions p
JOIN compile_records r ON r.id = (
    SELECT MIN(c.id) FROM compile_records c
    WHERE c.cache_key = p.cache_key AND c.id > p.after_row_id
      AND c.hostname = p.hostname AND c.cache_dir = p.cache_dir
      AND {ok_sql('c')})
{{where}}
ORDER BY p.hostname, p.id
"""


@dataclass
class HostScore:
    hostname: str
    scored: int
    held: int
    failed: list[dict]


def scores(conn, hostname: str | None = None) -> list[HostScore]:
    """Per host: predictions that a later row scored, how many held, and the failed ones."""
    where, params = ("WHERE p.hostname = :h", {"h": hostname}) if hostname else ("", {})
    out: dict[str, HostScore] = {}
    for r in conn.execute(sa.text(SCORED_SQL.format(where=where)), params).mappings():
        s = out.setdefault(r["hostname"], HostScore(r["hostname"], 0, 0, []))
        s.scored += 1
        if r["measured"] == r["predicted"]:
            s.held += 1
        else:
            s.failed.append(dict(r))
    return list(out.values())


def has_table(conn) -> bool:
    return sa.inspect(conn).has_table("predictions")
