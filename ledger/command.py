"""The ledger's verbs as a library: one function per command, as Alembic's `command`.

Each takes the ledger (``db``: a SQLite path or a database URL; None: LEDGER_DB, else
./ledger.db, as the CLI resolves it), opens it the one way (storage/open.py, in the mode
the verb needs: ``read`` never writes, on any backend), and returns a result the CLI
prints and a notebook keeps. Errors are LedgerError (one line; ``exit_code`` on it).
The CLI files (ledger/cli/) parse, call one of these, and print. docs/python-api.md
shows them in use.

    from ledger import command
    run = command.probe(objective="toy", transforms="jit,vag", cache_dir="/tmp/jc", db="ledger.db")
    result = command.check(db="ledger.db")
    print(result.summary(), [f.verdict for f in result.findings])
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ledger import gc_pause
from ledger.errors import LedgerError


def _open(db, mode: str, *, take_in: bool = False, **kw):
    """The ledger, opened the one way (storage/open.py). A command that reads first waits
    for a `ledger record` of this ledger still draining (settle()); one that writes, with
    ``take_in``, first takes in the rows `ledger record` runs kept aside for this ledger."""
    from ledger.storage.open import open_ledger

    db = None if db is None else str(db)
    if mode in ("read", "query"):
        settle(db)
    ledger = open_ledger(db, mode, **kw)
    if take_in:
        from ledger.recorder.ingest import take_in_kept

        try:
            take_in_kept(ledger)
        except BaseException as exc:
            ledger.__exit__(type(exc), exc, exc.__traceback__)
            raise
    return ledger


def settle(db=None) -> None:
    """Wait, briefly, for a `ledger record` run of this ledger whose command has ended
    and whose ingester still drains: the rows of a command that just returned are there
    for the next one to read."""
    from ledger.recorder.ingest import wait_for_draining
    from ledger.storage.url import resolve

    wait_for_draining(resolve(None if db is None else str(db)))


# -- measuring ----------------------------------------------------------------------------


@dataclass
class ProbeRun:
    """What one `probe` wrote: its run id, its rows as written, where, the transforms that
    failed, and lines about JAX internals the probe could not use."""

    run_id: str
    rows: list[dict]
    display: str
    failures: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def probe(db=None, *, on_record: Callable[[dict], None] | None = None, on_progress=None, **options) -> ProbeRun:
    """`ledger probe`: measure an objective under JAX transforms, one row per transform,
    each committed the moment it is measured. ``options`` are ProbeSpec's (objective,
    transforms, cache_dir, tag, n_batch, ...; unset: its defaults). ``on_progress`` gets
    the probe's progress events (the CLI's live display)."""
    from ledger.probes import ProbeError, ProbeSpec, run_probe
    from ledger.probes.jax_internals import notes_of
    from ledger.storage.writer import add_compile_record

    rows: list[dict] = []
    try:
        spec = ProbeSpec.make(**{k: v for k, v in options.items() if v is not None})
        # bad options fail above, before any database is made; the revision gate below,
        # before minutes of compiling
        with _open(db, "write", take_in=True) as ledger:

            def write(record: dict) -> None:
                add_compile_record(ledger.engine, record)  # committed now: a later crash keeps it
                rows.append(record)
                if on_record is not None:
                    on_record(record)

            outcome = run_probe(spec, on_record=write, on_progress=on_progress)
    except ProbeError as exc:
        raise LedgerError(str(exc)) from None
    return ProbeRun(outcome.run_id, rows, ledger.display, list(outcome.failures), notes_of(rows))


def predict(db=None, *, timeout: float | None = None, timeout_flag: str = "timeout", **options):
    """`ledger predict`: warm or cold for each transform, before anything compiles;
    stored. Returns ledger.predict.run.Outcome (results, notes, exit_code) and the key
    report (its context: host, jax, cache dir). A JAX that cannot be predicted on, or
    keys not computed within ``timeout`` seconds, store nothing (a LedgerError, exit 2)."""
    from ledger.predict import run

    spec = run.spec_of(options)
    # before the database is made: a JAX that cannot be predicted on, or a timeout, writes nothing
    report = run.compute(spec, run.DEFAULT_TIMEOUT_S if timeout is None else timeout, timeout_flag)
    with _open(db, "write", take_in=True) as ledger:
        return run.predict(spec, ledger.engine, report), report


def recording(db=None, **options):
    """`ledger record` for a block of Python: every compile inside is a row
    (ledger.recording, the same context manager)."""
    from ledger import recording as _recording

    return _recording(db=db, **options)


# -- the cache dir ------------------------------------------------------------------------


def _cache_dir(cache_dir) -> Path:
    """The dir `ledger cache` reads, made absolute; refused if it is none."""
    if str(cache_dir) == "":
        from ledger.cache.prune import PruneUsageError

        raise PruneUsageError("the cache dir is an empty path: give the dir (. for the current one)")
    path = Path(os.path.abspath(cache_dir))
    if not path.is_dir():
        raise LedgerError(f"no cache dir at {cache_dir}" + (": it is a file" if path.exists() else ""))
    return path


def _cache_ledger(db) -> bool:
    """Whether `ledger cache` reads a ledger: the one named (--db, LEDGER_DB) must be there,
    as a typo'd --db must not leave a prune to the files alone; ./ledger.db, when it is."""
    from ledger.storage.url import ENV_VAR, resolve

    target = resolve(None if db is None else str(db))
    if target.path is None or target.path.exists():
        return True
    if db is not None or os.environ.get(ENV_VAR):
        raise LedgerError(f"no ledger database at {target.path}")
    return False


def cache(cache_dir, db=None, *, unused_days: int = 30):
    """`ledger cache DIR`: the dir's entries, what JAX recorded in each, and what the
    ledger knows of them (hits, seconds saved, last use, dead weight). Reads only; without
    a ledger (none named, no ./ledger.db), the files alone. Returns a
    ledger.cache.inventory.Inventory (as_json(), totals())."""
    from ledger.cache.inventory import build

    path = _cache_dir(cache_dir)
    if not _cache_ledger(db):
        return build(path, None, unused_days)
    with _open(db, "read") as ledger:
        return build(path, ledger.engine, unused_days, ledger=ledger.display)


def cache_prune(cache_dir, db=None, *, unused_days: int | None = None, max_size: int | None = None,
                dry_run: bool = False):
    """`ledger cache prune DIR`: remove the entries that save least per byte, never one used
    within ``unused_days`` (default 7 with ``max_size``), until the dir's entries total at
    most ``max_size`` bytes (None: every unused entry). Each removal is a cache_prunes row
    where a ledger exists, committed before its file goes; ``dry_run``: the plan alone,
    nothing written anywhere. Returns a ledger.cache.prune.Plan (removals, stopped, as_json())."""
    from ledger.cache import prune
    from ledger.cache.inventory import build

    if unused_days is None and max_size is None:
        raise prune.PruneUsageError("give --unused-days N, --max-size SIZE or both: prune removes nothing unasked")
    if unused_days is not None and not 0 <= unused_days <= prune.MAX_DAYS:
        raise prune.PruneUsageError(f"--unused-days must be from 0 to {prune.MAX_DAYS}, not {unused_days}")
    if max_size is not None and max_size < 0:
        raise prune.PruneUsageError(f"--max-size must be 0 or more bytes, not {max_size}")
    days = prune.DEFAULT_DAYS_WITH_SIZE if unused_days is None else unused_days
    path = _cache_dir(cache_dir)
    if not _cache_ledger(db):
        plan = prune.plan(build(path, None, max(days, 1)), days, max_size)
        if not dry_run:
            prune.apply(plan)
        return plan
    # the ledger opened to write before anything is removed: one that is locked or
    # read-only refuses the prune whole, not after the files are gone
    with _open(db, "read" if dry_run else "write", take_in=not dry_run, create=False) as ledger:
        plan = prune.plan(build(path, ledger.engine, max(days, 1), ledger=ledger.display), days, max_size)
        if not dry_run:
            prune.apply(plan, ledger.engine)
    return plan


# -- the schema -----------------------------------------------------------------------------


def upgrade(db=None, revision: str = "head") -> str | None:
    """`ledger db upgrade`: the schema (and data migrations) to ``revision``; the revision
    the database is at after (None: base)."""
    with _open(db, "migrate", create=True) as ledger:
        ledger.migrate("upgrade", revision)
        return ledger.revision


def downgrade(revision: str, db=None, *, drop_data: bool = False) -> str | None:
    """`ledger db downgrade`: lossless down to 0001 (docs/migrations.md); the revision it is
    at after. Down to base every table goes, rows and all: refused on a ledger that holds
    any row unless ``drop_data``."""
    with _open(db, "migrate", create=False) as ledger:
        rows = 0 if drop_data or not _down_to_base(revision, ledger.revision) else _rows_held(ledger.engine)
        if rows:
            raise LedgerError(f"downgrading {ledger.display} to base drops every table and the {rows} rows in them:"
                              " give --drop-data to do so (ledger export keeps a copy)")
        ledger.migrate("downgrade", revision)
        return ledger.revision


def _down_to_base(revision: str, current: str | None) -> bool:
    """Whether downgrading from ``current`` to ``revision`` (base, a revision, -N) ends at base."""
    from ledger.storage.revisions import REVISIONS

    if revision.strip().lower() == "base":
        return True
    if revision.startswith("-") and revision[1:].isdigit() and current in REVISIONS:
        return REVISIONS.index(current) - int(revision[1:]) < 0
    return False


# Tables whose rows a ledger makes again from the others: alembic's own, and the cache
# cells' summary (ledger/watch/cells.py) with its bookkeeping row, which every ledger has.
_REMADE = {"alembic_version", "cache_cells", "cache_cells_state"}


def _rows_held(engine) -> int:
    """The rows a downgrade to base would lose: of every table but those the ledger makes
    again (the stashes of lossless downgrades count)."""
    import sqlalchemy as sa

    with engine.connect() as conn:
        names = [t for t in sa.inspect(conn).get_table_names() if t not in _REMADE]
        return sum(conn.execute(sa.text(f'SELECT count(*) FROM "{t}"')).scalar_one() for t in names)


def current(db=None) -> tuple[str | None, str]:
    """`ledger db current`: (revision, status: head, older, newer, empty or foreign)."""
    with _open(db, "migrate") as ledger:
        return ledger.revision, ledger.status


# -- moving rows ----------------------------------------------------------------------------


def import_json(paths: Iterable, db=None, *, skip_invalid: bool = False, progress=None):
    """`ledger import`: legacy JSON results (files or folders), all or nothing, idempotent.
    Returns the importer's summary (records, files, added_compile, duplicates, skipped...)."""
    from ledger.legacy.reading import find_json_files, reading

    files = find_json_files([Path(p) for p in paths])  # a missing path fails before any database is made
    # The readers start before the ledger opens (SQLAlchemy's import, the revision gate:
    # half a second) and parse meanwhile; none inherits a database connection.
    # The collector paused: the forked readers inherit the pause (ledger/gc_pause.py).
    with gc_pause.paused(), reading(files, skip_invalid, progress) as parts, \
            _open(db, "write", take_in=True) as ledger:
        from ledger.legacy.importer import import_parts

        return import_parts(ledger.engine, files, parts)


def export(db=None, fmt: str = "json") -> str:
    """`ledger export`: the whole ledger as JSON (the legacy shape plus new fields) or CSV."""
    from ledger.legacy.exporter import FORMATS, render

    if fmt not in FORMATS:
        raise LedgerError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    with _open(db, "read") as ledger:
        return render(ledger.engine, fmt)


def merge(sources: Iterable, db=None):
    """`ledger merge`: per-node ledgers into this one, all or nothing, idempotent.
    Returns (the destination as shown, one summary per source)."""
    from ledger.merge import merge as _merge

    with _open(db, "write", take_in=True):
        pass  # what `ledger record` kept for this ledger, first (merge opens it again, to lock it)
    return _merge([str(s) for s in sources], None if db is None else str(db))


def sql(query: str, db=None, limit: int | None = None) -> tuple[list[str], list[tuple]]:
    """`ledger sql`: one read-only statement; (columns, rows), at most ``limit`` rows."""
    from itertools import islice

    from ledger.storage.readonly import open_query

    settle(db)
    with open_query(None if db is None else str(db), query) as result:
        return list(result.columns), list(islice(result.rows, limit) if limit else result.rows)


# -- watching -----------------------------------------------------------------------------


def pins_update(db=None, *, filters: dict | None = None, repin: bool = False, allow_loaded: bool = False,
                dry_run: bool = False):
    """`ledger pins update`: pin every unpinned key to its newest warm ok row (``dry_run``:
    read only, the plan of what would change)."""
    from ledger.watch.pins import update_pins

    with _open(db, "read" if dry_run else "write", take_in=not dry_run, create=False) as ledger:
        return update_pins(ledger.engine, filters=filters or {}, repin=repin, allow_loaded=allow_loaded,
                           dry_run=dry_run)


def pins_list(db=None, *, filters: dict | None = None) -> tuple[list[str], list[tuple]]:
    """`ledger pins list`: (columns, rows)."""
    from ledger.watch.pins import list_pins

    with _open(db, "read") as ledger:
        return list_pins(ledger.engine, filters or {})


def check(db=None, *, tolerance: float = 1.5, min_diff: float = 0.05, since: str | None = None,
          filters: dict | None = None, below_s: float = 5.0, allow_loaded: bool = False):
    """`ledger check`: warm rows against their pins, whether the cache still applies, and
    its health. Stored as a check run. Returns its result (findings, lines(), summary(),
    as_json(), exit_code)."""
    from ledger.watch.check import run_check

    with _open(db, "write", take_in=True, create=False) as ledger:
        return run_check(ledger.engine, tolerance=tolerance, filters=filters or {}, since=since, min_diff=min_diff,
                         below_s=below_s, allow_loaded=allow_loaded)


def explain(row_id: int, db=None):
    """`ledger explain`: why a row was cold (or had no cache): check's finding for it, as
    an Explanation (finding, cause, lines())."""
    from ledger.watch.explain import explain_row

    with _open(db, "read") as ledger:
        return explain_row(ledger.engine, row_id)


def runs(db=None, *, filters: dict | None = None, limit: int | None = 20):
    """`ledger runs`: one Run per run id, newest first (at most ``limit``; None: all), and
    how many rows belong to no run (legacy imports)."""
    from ledger.filters import refuse_unmatched
    from ledger.report.runs import list_runs, unrun_rows

    with _open(db, "read") as ledger:
        with ledger.engine.connect() as conn:
            refuse_unmatched(conn, filters, "no runs to list")
        return list_runs(ledger.engine, filters, limit), unrun_rows(ledger.engine, filters)


def diff(db=None, a: str | None = None, b: str | None = None, *, by_test: bool | None = None):
    """`ledger diff`: run ``a`` against run ``b``, function by function (neither given:
    the last two runs of the newest run's command or objective). A Diff (functions,
    counts(), as_json(), exit_code: 1 when anything went cold or slower); for two pytest
    sessions (``by_test`` None) or when ``by_test``, a TestDiff, test by test (findings,
    counts(), summary(), exit_code: 1 when a test compiles more, or went cold or slower)."""
    from ledger.report.diff import DiffUsageError, diff_runs, last_two
    from ledger.report.diff_tests import diff_sessions, is_session

    if (a is None) != (b is None):
        raise DiffUsageError("give two run ids, or none for the last two runs of the same command or objective")
    with _open(db, "read") as ledger:
        a, b = (a, b) if a is not None else last_two(ledger.engine)
        if by_test is None:
            with ledger.engine.connect() as conn:
                by_test = is_session(conn, a) and is_session(conn, b)
        return diff_sessions(ledger.engine, a, b) if by_test else diff_runs(ledger.engine, a, b)


def report(db=None, *, filters: dict | None = None, predictions: bool = True) -> str:
    """`ledger report`: the markdown report (``predictions``: how often predict held)."""
    from ledger import savings
    from ledger.filters import refuse_unmatched
    from ledger.report import health, lines, recorded, saved, text, todo
    from ledger.report import predictions as scored

    filters = filters or {}
    with _open(db, "read") as ledger:
        with ledger.engine.connect() as conn:  # a typo'd filter is not an empty report
            refuse_unmatched(conn, filters, "nothing to report")
        costs_of = savings.ColdCosts()  # the programs and the time saved: mostly the same cells
        out = text.markdown(lines.build(ledger.engine, filters), recorded.build(ledger.engine, filters, costs_of),
                            saved.per_day(ledger.engine, filters, costs_of), todo.markdown(ledger.engine, filters))
        out += "\n" + health.markdown(ledger.engine, filters)
        if predictions:
            out += scored.markdown(ledger.engine, filters.get("hostname"))
    return out


def report_html(path, db=None, *, filters: dict | None = None) -> tuple[int, int]:
    """`ledger report --html`: one page with charts, written whole; (tables, charts)."""
    from ledger.filters import refuse_unmatched
    from ledger.report.html import drawing, write_html

    filters = filters or {}
    # the charts' process starts before the ledger opens: it loads matplotlib meanwhile
    with drawing() as draw, _open(db, "read") as ledger:
        with ledger.engine.connect() as conn:
            refuse_unmatched(conn, filters, "nothing to report")
        try:
            return write_html(ledger.engine, Path(path), filters, draw)
        except OSError as exc:
            raise LedgerError(f"cannot write {path}: {exc.strerror}") from None
