"""Row filters: the columns a user may narrow the watch commands by (pins, check, report),
as SQL, as the options that gave them, and the refusal of filters that match no row."""

from __future__ import annotations

import shlex

from ledger.errors import LedgerError
from ledger.record import CELL_LABELS

# The columns a user may narrow pins, check and repin by.
FILTER_FIELDS = ("hardware", "hostname", *CELL_LABELS, "transform")


def given(filters: dict | None) -> dict:
    """The filters given: a None value is no filter."""
    return {k: v for k, v in (filters or {}).items() if v is not None}


def filter_sql(filters: dict | None, alias: str = "") -> tuple[str, dict]:
    """' AND col = :f_col ...' for the filters given (None values are no filter)."""
    p = f"{alias}." if alias else ""
    parts, params = [], {}
    for name, value in (filters or {}).items():
        if value is None:
            continue
        if name not in FILTER_FIELDS:
            raise ValueError(f"not a filter column: {name}")
        parts.append(f" AND {p}{name} = :f_{name}")
        params[f"f_{name}"] = value
    return "".join(parts), params


def describe_filters(filters: dict | None) -> str:
    """The filters as the options that gave them (a value quoted as a shell would need,
    a huge one cut short)."""
    def shown(value) -> str:
        text = str(value)
        return shlex.quote(text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)")

    given = filters or {}
    return " ".join(f"--{name.replace('_', '-')} {shown(given[name])}" for name in FILTER_FIELDS
                    if given.get(name) is not None)  # one order, whichever command gave them


class NoRowMatches(LedgerError):
    """Filters that match no compile row: a typo (`--transform bogus`), so a usage
    error, exit 2; `ledger check` exits 1 for findings, and the two stay apart."""

    exit_code = 2


def refuse_unmatched(conn, filters: dict | None, consequence: str) -> None:
    """Refuse filters that were given and match not one compile row: every command
    that takes them (pins update and list, check, report) would otherwise print an
    empty answer and exit 0, and a typo in a CI filter would read as all-clear.
    No filters, or a matching row (or pin: one merged from another ledger): nothing to say."""
    import sqlalchemy as sa

    where, params = filter_sql(filters)
    if where and not any(conn.execute(sa.text(f"SELECT 1 FROM {table} WHERE 1 = 1{where} LIMIT 1"), params).first()
                         for table in ("compile_records", "pins")):
        raise NoRowMatches(f"no compile row matches {describe_filters(filters)}: {consequence}")
