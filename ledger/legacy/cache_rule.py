"""The legacy tag -> cache_state rule, once in Python and once as SQL.

The data migration (migrations/versions/0003_backfill_cache_state.py) and `ledger import`'s
record-by-record path both run `backfill_sql()`, so those two agree record for record by
construction; `classify_legacy()` is the same rule in Python, which import's readers give
the bulk of a legacy tree (`with_states()`, so the rows go in once, with no UPDATE after
them), and which tests/test_cache_rule.py holds equal to the SQL on both backends (a table
of cases and generated tags).

The rule (docs/migrations.md, "The legacy backfill"):
  cache_dir empty or missing          -> none     (source empty_cache_dir)
  tag ends with warm\\d*(-retry)?      -> warm     (source tag)
  else tag ends with cold             -> cold     (source tag)
  else                                -> unknown  (source unknown), on purpose

End-anchoring is the point: `mb_homo_cold_laxmap_gpu` has "cold" mid-tag and stays
unknown. "Ends" means the very end of the string (\\Z, not $, which would also match
before a trailing newline) and case-insensitive over ASCII, which is what SQL's
lower() and LIKE do on every backend we run on.
"""

from __future__ import annotations

import re

from ledger.record import (
    COLD,
    NONE,
    SOURCE_EMPTY_CACHE_DIR,
    SOURCE_TAG,
    SOURCE_UNKNOWN,
    UNKNOWN,
    WARM,
)

_WARM = re.compile(r"warm[0-9]*(?:-retry)?\Z", re.IGNORECASE | re.ASCII)
_COLD = re.compile(r"cold\Z", re.IGNORECASE | re.ASCII)


def classify_legacy(cache_dir: str | None, tag: str | None) -> tuple[str, str]:
    """(cache_state, cache_state_source) for a record that did not record its state."""
    if cache_dir is None or cache_dir == "":
        return NONE, SOURCE_EMPTY_CACHE_DIR
    if tag is not None:
        if _WARM.search(tag):
            return WARM, SOURCE_TAG
        if _COLD.search(tag):
            return COLD, SOURCE_TAG
    return UNKNOWN, SOURCE_UNKNOWN


class _Memo(dict):
    """classify_legacy() by (cache dir empty, tag): a tree holds few distinct pairs."""

    def __missing__(self, key):
        empty, tag = key
        self[key] = state = classify_legacy(None if empty else "/", tag)
        return state


def with_states(rows: list[tuple], cache_dir_at: int, tag_at: int) -> list[tuple]:
    """Each row with its (cache_state, cache_state_source) appended, by the rule."""
    memo = _Memo()
    return [row + memo[row[cache_dir_at] in (None, ""), row[tag_at]] for row in rows]


def state_sql(dialect: str = "sqlite") -> str:
    """The rule as one SQL CASE over the row's cache_dir and tag."""
    # SQLite's LIKE ignores ASCII case (our rule's re.IGNORECASE | re.ASCII);
    # PostgreSQL's does not, ILIKE does.
    like = "ILIKE" if dialect == "postgresql" else "LIKE"
    # The tag with one trailing "-retry" removed, then trailing digits stripped by
    # rtrim: what is left ends in "warm" exactly when the tag matches
    # warm[0-9]*(-retry)?\Z. The cheap "%warm%" test first spares most rows the
    # string work: this CASE runs once per row over million-row tables.
    unretried = f"CASE WHEN tag {like} '%-retry' THEN substr(tag, 1, length(tag) - 6) ELSE tag END"
    return (
        "CASE"
        f" WHEN cache_dir IS NULL OR cache_dir = '' THEN '{NONE}'"
        f" WHEN tag {like} '%cold' THEN '{COLD}'"
        f" WHEN tag {like} '%warm%' AND rtrim({unretried}, '0123456789') {like} '%warm' THEN '{WARM}'"
        f" ELSE '{UNKNOWN}' END"
    )


_SOURCE_OF_STATE = (
    f"CASE s WHEN '{NONE}' THEN '{SOURCE_EMPTY_CACHE_DIR}' WHEN '{UNKNOWN}' THEN '{SOURCE_UNKNOWN}' "
    f"ELSE '{SOURCE_TAG}' END"
)


def backfill_sql(dialect: str = "sqlite", table: str = "compile_records") -> str:
    """One set-based UPDATE: every row without a cache_state gets the rule; rows that
    have one are never touched.

    Both columns come from one evaluation of the CASE (a row-value SET from a
    one-row subquery): evaluating it twice cost a quarter more on a million rows.
    """
    return (
        f"UPDATE {table} SET (cache_state, cache_state_source) = "
        f"(SELECT s, {_SOURCE_OF_STATE} FROM (SELECT {state_sql(dialect)} AS s) AS rule) "
        "WHERE cache_state IS NULL"
    )
