"""`IN :name` with a Python list: the one way the ledger binds a list into SQL text.

A list parameter is bound as expanding (one placeholder per value, on every backend),
and a long list is sent in chunks, so that a query stays under each backend's limit on
bound parameters (SQLite's 32,766, PostgreSQL's 65,535, and their statement sizes).
"""

from __future__ import annotations

import re

CHUNK = 500  # values a query: far under every backend's parameter limit


def with_lists(sql: str, *names: str):
    """`sql` as a statement whose parameters among `names` that it uses bind as lists
    (`IN :name`); its other parameters bind as plain values. Give no empty list: untyped,
    PostgreSQL reads one as NULL of type integer (report/runs.py, whose run ids may be
    none, binds its own list as text); rows_in queries nothing for none."""
    import sqlalchemy as sa  # here: a command's start-up that imports this needs no SQLAlchemy yet

    used = [n for n in names if re.search(rf":{re.escape(n)}\b", sql)]
    return sa.text(sql).bindparams(*(sa.bindparam(n, expanding=True) for n in used))


def rows_in(conn, sql: str, name: str, values, params: dict | None = None):
    """The rows of `sql`, each a dict of its own, its list parameter `name` each chunk of
    `values` in turn, in the order given; nothing is queried for no values. Made from the
    rows' tuples: a dict of each of SQLAlchemy's mappings cost twice as much (a first check
    reads 21,000 rows through here, 35 columns each)."""
    stmt, values = with_lists(sql, name), list(values)
    for start in range(0, len(values), CHUNK):
        result = conn.execute(stmt, (params or {}) | {name: values[start:start + CHUNK]})
        names = list(result.keys())
        yield from (dict(zip(names, row)) for row in result.all())
