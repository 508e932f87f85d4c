"""The ledger's words about compile rows, spelled once: which row is newer, which rows
count (ok, pinnable), how a row's key reads to people, and the clock of what the ledger
itself writes (pins, check runs).

Every query that orders rows or asks "ok?" or "pinnable?" takes its SQL from here
(tests/test_words.py holds the tree to it), so a change to the rule, the one clock of
aware UTC times for instance, is a change to this file.

Row order: by timestamp text, a NULL timestamp as the oldest on every backend, ties
broken by id (the order rows were written in one ledger).
"""

from __future__ import annotations

import json

from ledger.record import CELL_LABELS, FUNCTION_KIND_EAGER, SHAPE_FIELDS, STATUS_OK, WARM, now_timestamp


def _p(alias: str) -> str:
    return f"{alias}." if alias else ""


def time_sql(alias: str = "") -> str:
    """A row's place in time, as SQL: its timestamp, a NULL one the oldest."""
    return f"COALESCE({_p(alias)}timestamp, '')"


def newest_first(alias: str = "") -> str:
    """ORDER BY text, newest row first."""
    return f"{time_sql(alias)} DESC, {_p(alias)}id DESC"


def oldest_first(alias: str = "") -> str:
    """ORDER BY text, oldest row first."""
    return f"{time_sql(alias)}, {_p(alias)}id"


def before_sql(alias: str, time: str, row_id: str, *, inclusive: bool = False) -> str:
    """Row `alias` comes before the row at (time, row_id), both SQL expressions (a
    parameter, or another row's time_sql and id); `inclusive`: or is that row."""
    t = time_sql(alias)
    return f"({t} < {time} OR ({t} = {time} AND {_p(alias)}id {'<=' if inclusive else '<'} {row_id}))"


def after_sql(alias: str, time: str, row_id: str) -> str:
    """Row `alias` comes after the row at (time, row_id)."""
    t = time_sql(alias)
    return f"({t} > {time} OR ({t} = {time} AND {_p(alias)}id > {row_id}))"


def ok_sql(alias: str = "") -> str:
    """The compile succeeded. status is NULL only on rows written before the column had
    its default: they were successful compiles (a failed transform was never recorded then)."""
    return f"COALESCE({_p(alias)}status, '{STATUS_OK}') = '{STATUS_OK}'"


def not_eager_sql(alias: str = "") -> str:
    """Not one of JAX's eager primitives (jit_add, jit_broadcast_in_dim: an op run outside
    jit): the report's tables show a program's own functions and the probe's transforms,
    and fold the primitives into one line under their program."""
    return f"COALESCE({_p(alias)}function_kind, '') <> '{FUNCTION_KIND_EAGER}'"


def pinnable_sql(alias: str = "") -> str:
    """A row a pin may hold: warm, ok and timed. A cold row is the cost the cache exists to
    remove; none and unknown rows sit on neither side of that line."""
    p = _p(alias)
    return f"{p}cache_state = '{WARM}' AND {ok_sql(alias)} AND {p}compile_s IS NOT NULL"


def key_values(row, names) -> tuple:
    """A row's values of the fields `names`, as one key: mixed_precision as true/false
    whatever the backend returned (SQLite 0/1, PostgreSQL a bool), NULL as None."""
    return tuple(bool(row[n]) if n == "mixed_precision" and row[n] is not None else row[n] for n in names)


def key_text(row, names) -> str:
    """The canonical text of a row's key over `names` (JSON of key_values): equal keys
    give equal text, on every backend. What pins.pin_key and a cache cell's key hold."""
    return json.dumps(key_values(row, names), separators=(",", ":"))


def describe_key(row) -> str:
    """A key (or a cell) for people: host, then cell."""
    mp = row["mixed_precision"]
    host = f"{row['hardware']}/{row['hostname']} jax {row['jax_version']}" + (" mixed" if mp else "")
    cell = "/".join(str(row[f]) if row[f] is not None else "-" for f in CELL_LABELS)
    # the batch shape is part of the cell: two shapes are two keys, and must read so
    shape = [f"{f} {row.get(f)}" for f in SHAPE_FIELDS if row.get(f) is not None]
    # a recorded compile's cell is its function at an input signature
    # (JAX did not say: "?", not Python's None)
    signature = row.get("input_signature")
    function = f" {function_name(row['function'], row.get('variant'))}({'?' if signature is None else signature})" \
        if row.get("function") is not None else ""
    return f"{host} {cell} {row['transform']}{function}" + (f" ({', '.join(shape)})" if shape else "")


def function_name(function: str, variant: int | None) -> str:
    """A recorded function as people read it: its name, and which program of that name
    and signature it is where its process compiled more than one (jit_step#2)."""
    return f"{function}#{variant + 1}" if variant else function


FOLD_RUN = 3  # identical argument types in a row from which a signature reads "60x f64[3]"
SIGNATURE_SHOWN = 120  # characters of a folded signature shown; the rest is counted


def fold_signature(signature: str | None, limit: int = SIGNATURE_SHOWN) -> str | None:
    """An input signature for a table cell: runs of one type folded (``f64[3], f64[3],
    f64[3]`` reads ``3x f64[3]``), and what still exceeds ``limit`` counted, not
    spelled out. The stored signature is whole (``--json``, ``ledger sql``, a report's
    hover); this is only how it reads."""
    if not signature:
        return signature
    args, arrow, results = signature.partition(" -> ")
    parts = [_folded(args.split(", "))] + ([_folded(results.split(", "))] if arrow else [])
    out = []
    for i, types in enumerate(parts):
        text, shown = "", 0
        for t in types:
            step = t if not text else f"{text}, {t}"
            if len(step) > limit // len(parts) and text:
                break
            text, shown = step, shown + 1
        if shown < len(types):
            text += f", ... {len(types) - shown} more"
        out.append(text)
    return " -> ".join(out)


def _folded(types: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(types):
        j = i
        while j < len(types) and types[j] == types[i]:
            j += 1
        out += [f"{j - i}x {types[i]}"] if j - i >= FOLD_RUN else types[i:j]
        i = j
    return out


def utc_now() -> str:
    """The time the ledger stamps on what it writes itself (pins, pin history, check runs):
    the record contract's one clock."""
    return now_timestamp()
