"""`ledger probe` and `ledger objectives`: the main job, as a thin shell.

probes/ measures and hands over plain records; this writes each one the moment it
arrives (its own transaction), shows live progress on stderr, and prints a summary.
jax is imported by probes/ when the probe runs, never at CLI start.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Annotated, Optional

import typer

from ledger.cli.options import DbOpt
from ledger.errors import LedgerError


SUMMARY_COLUMNS = ("phase", "transform", "status", "cache_state", "cache_state_source",
                   "trace_s", "compile_s", "first_s", "steady_s")


class Progress:
    """One status line on stderr: transform, phase and seconds elapsed. On a
    terminal it ticks every half second (compiles take minutes and the probe only
    reports at phase boundaries); elsewhere it prints one line per phase."""

    def __init__(self, stream=sys.stderr):
        self.stream = stream
        self.tty = stream.isatty()
        self.current: dict | None = None
        self.since = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._tick, daemon=True) if self.tty else None

    def __enter__(self):
        if self._thread:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread:
            self._thread.join()
            self.stream.write("\r\033[K")
            self.stream.flush()

    def _line(self) -> str:
        ev = self.current or {}
        elapsed = ev.get("elapsed_s", 0.0) + (time.monotonic() - self.since)
        run_phase = f"[{ev['run_phase']}] " if ev.get("run_phase") else ""
        return f"{run_phase}{ev.get('transform', '?')}: {ev.get('phase', '?')} {elapsed:6.1f}s"

    def _tick(self):
        while not self._stop.wait(0.5):
            with self._lock:
                if self.current is not None:
                    self.stream.write("\r\033[K" + self._line())
                    self.stream.flush()

    def __call__(self, event: dict) -> None:
        with self._lock:
            self.current, self.since = event, time.monotonic()
            if not self.tty:
                self.stream.write(self._line() + "\n")
                self.stream.flush()


def _seconds(value):
    return None if value is None else f"{value:.4f}"


def probe_cmd(
    objective: Annotated[str, typer.Option("--objective", "-o", help="A built-in (see `ledger objectives`) or package.module:builder.")] = "toy",
    transforms: Annotated[str, typer.Option("--transforms", "-t", help="Comma-separated, or 'all'.")] = "all",
    cache_dir: Annotated[Optional[str], typer.Option("--cache-dir", help="JAX persistent compilation cache dir [default: none, unless JAX_COMPILATION_CACHE_DIR is set].")] = None,
    tag: Annotated[Optional[str], typer.Option("--tag", help="Free-text label kept on the rows.")] = None,
    n_batch: Annotated[int, typer.Option("--n-batch", help="Inputs per batched call (vmap, laxmap, pyloop).")] = 8,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Chunk size for laxmap_vag and pyloop_vag.")] = 4,
    steady_calls: Annotated[int, typer.Option("--steady-calls", help="Calls averaged into steady_s.")] = 3,
    mixed_precision: Annotated[bool, typer.Option("--mixed-precision", help="Passed to the objective's builder and recorded.")] = False,
    isolate: Annotated[bool, typer.Option("--isolate", help="Each transform in a fresh process.")] = False,
    cold_warm: Annotated[bool, typer.Option("--cold-warm", help="A fresh cache dir, then the same transforms again in a new process.")] = False,
    db: DbOpt = None,
) -> None:
    """Measure an objective under JAX transforms; one row per transform."""
    from probes import ProbeError, ProbeSpec, run_probe
    from probes.orchestrate import validate

    from ledger.storage.open import open_ledger
    from ledger.output import format_table
    from ledger.storage.writer import add_compile_record

    spec = ProbeSpec(
        objective=objective, transforms=transforms, cache_dir=cache_dir, tag=tag, n_batch=n_batch,
        batch_size=batch_size, steady_calls=steady_calls, mixed_precision=mixed_precision,
        isolate=isolate, cold_warm=cold_warm,
    )
    try:
        validate(spec)  # bad flags fail before any database is made
    except ProbeError as exc:
        raise LedgerError(str(exc)) from None
    # Open (and gate) the database before probing: a database at an old revision
    # should stop the probe before minutes of compiling, not after.
    rows: list[dict] = []
    with open_ledger(db, "write") as ledger:

        def on_record(record: dict) -> None:
            add_compile_record(ledger.engine, record)  # committed now: a later crash keeps it
            rows.append(record)

        try:
            with Progress() as progress:
                outcome = run_probe(spec, on_record=on_record, on_progress=progress)
        except ProbeError as exc:
            raise LedgerError(str(exc)) from None
    table = [[_seconds(r.get(c)) if c.endswith("_s") else r.get(c) for c in SUMMARY_COLUMNS] for r in rows]
    typer.echo(format_table(SUMMARY_COLUMNS, table), nl=False)
    where = ledger.display
    if os.path.isabs(where) and os.path.commonpath([where, os.getcwd()]) == os.getcwd():
        where = os.path.join(".", os.path.relpath(where))
    typer.echo(f"run {outcome.run_id}: {len(rows)} rows written to {where}")
    if outcome.failed:
        failed = ", ".join(f"{r['transform']} ({(r.get('error') or '').splitlines()[0][:120]})" for r in outcome.failures)
        raise LedgerError(f"{len(outcome.failures)} transform(s) failed: {failed}")


def objectives_cmd() -> None:
    """List the built-in objectives and the transforms."""
    from probes import describe_builtins, describe_transforms

    typer.echo("objectives (--objective NAME, or package.module:builder):")
    for name, desc in describe_builtins():
        typer.echo(f"  {name:<14} {desc}")
    typer.echo("transforms (--transforms a,b,... or all):")
    for name, desc in describe_transforms():
        typer.echo(f"  {name:<14} {desc}")
