"""A source's predictions (`ledger predict`), carried into the destination.

A prediction's identity is where, what and when: its hostname, cache_dir, cache_key,
transform and created_at (IDENTITY). One whose identity the destination holds already
is not added again, so merging the same source twice adds nothing; when the two say
a different `predicted`, that is a conflict, reported (the destination's stays).

A prediction is scored by the first ok row after its after_row_id with its cache key,
host and cache dir (ledger/predict/store.py). after_row_id is a position among the
source's row ids, which the destination does not share, so it is placed anew:

- scored in the source: just before the destination's copy of the row that scored it
  there (found by its identity, record_key), so that row scores it here too, whatever
  rows of other sources lie between;
- not scored in the source: after every row the destination holds once the source's
  rows are in, so only a row written (or merged) later scores it, as in the source.

Every prediction is checked before it is written: its cell and program columns by the
record contract's validator (as compile_records' columns), `predicted` a cache state,
the expected cost a finite number of seconds, not negative, created_at an ISO 8601
time; a refused one stops the merge with one line naming the source and its id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from ledger.errors import LedgerError, first_line
from ledger.merge import values as value
from ledger.merge.rows import checked, chunks, shown, sqlite_bools
from ledger.predict.store import SCORED_SQL
from ledger.record import CACHE_STATES, COMPILE_FIELDS
from ledger.record_validation import RecordError, compile_row
from ledger.storage.bulk import lookup
from ledger.storage.models import compile_records, predictions

IDENTITY = ("hostname", "cache_dir", "cache_key", "transform", "created_at")
# Every column is carried: those of compile_records checked as its columns, the rest here.
_CELL = tuple(c.name for c in predictions.c if c.name in COMPILE_FIELDS)
_OWN = ("predicted", "cause", "expected_compile_s", "expected_n", "created_at")
COLUMNS = ("id", *_CELL, *_OWN, "after_row_id")


@dataclass
class PredictionMerge:
    added: int = 0
    present: int = 0
    conflicts: list[str] = field(default_factory=list)


def scoring_rows(src, display: str) -> dict[int, int]:
    """{prediction id: id of the row that scored it} in the source, by the store's rule."""
    try:
        return {r.prediction_id: r.row_id for r in src.execute(sa.text(SCORED_SQL.format(where="")))}
    except SQLAlchemyError as exc:
        raise LedgerError(f"cannot read {display}: {first_line(exc)}") from None


def checked_prediction(raw: dict) -> dict:
    """The destination's row for a source prediction (after_row_id aside), or RecordError."""
    row = compile_row(sqlite_bools({name: raw[name] for name in _CELL}))
    for name in ("cache_key", "transform"):
        if row[name] is None:
            raise RecordError(f"{name} is missing")
    if raw["predicted"] not in CACHE_STATES:
        raise RecordError(f"predicted {shown(repr(raw['predicted']), 60)} is not one of {', '.join(CACHE_STATES)}")
    value.count("after_row_id", raw["after_row_id"])  # placed anew, but the source's scoring read it
    return {name: row[name] for name in _CELL} | {
        "predicted": raw["predicted"], "cause": value.text("cause", raw["cause"]),
        "expected_compile_s": value.seconds("expected_compile_s", raw["expected_compile_s"]),
        "expected_n": value.count("expected_n", raw["expected_n"]),
        "created_at": value.time("created_at", raw["created_at"])}


def _placement(dest, scored_by: dict[int, int], keys: dict) -> Callable[[int], int]:
    """after_row_id in the destination for a source prediction's id (the module's rule)."""
    ids = lookup(dest, compile_records, "record_key", "id", {keys[r] for r in scored_by.values() if r in keys})
    newest = dest.execute(sa.text("SELECT COALESCE(MAX(id), 0) FROM compile_records")).scalar()

    def after(prediction_id: int) -> int:
        row_id = ids.get(keys.get(scored_by.get(prediction_id)))
        return newest if row_id is None else row_id - 1

    return after


def _held(dest) -> dict[tuple, str]:
    """{identity: predicted} of the destination's predictions."""
    sql = f"SELECT {', '.join(IDENTITY)}, predicted FROM predictions"
    return {tuple(r[:-1]): r[-1] for r in dest.execute(sa.text(sql))}


def copy_predictions(src, dest, display: str, scored_by: dict[int, int], keys: dict) -> PredictionMerge:
    """`scored_by`: scoring_rows() of the source; `keys`: {source row id: record_key},
    the scoring rows' among them (the compile rows are in the destination already)."""
    out, held, after = PredictionMerge(), _held(dest), _placement(dest, scored_by, keys)
    for raws in chunks(src, display, "predictions", COLUMNS):
        new = []
        for raw, row in zip(raws, checked(raws, checked_prediction, display, "prediction")):
            identity = tuple(row[name] for name in IDENTITY)
            if identity in held:
                out.present += 1
                _conflict(out, row, held[identity])
                continue
            held[identity] = row["predicted"]
            new.append(row | {"after_row_id": after(raw["id"])})
        if new:
            dest.execute(predictions.insert(), new)
        out.added += len(new)
    return out


def _conflict(out: PredictionMerge, row: dict, here: str) -> None:
    if row["predicted"] != here:
        out.conflicts.append(f"prediction {shown(row['transform'])} on {shown(row['hostname'])} {row['created_at']}:"
                             f" predicted {row['predicted']} in the source, {here} here (kept)")
