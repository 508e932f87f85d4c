"""`ledger probe` and `ledger objectives`: the main job, as a thin shell.

probes/ validates the request (ProbeSpec.make), measures and hands over plain
records; this writes each one the moment it arrives (its own transaction), shows live
progress on stderr, and prints a summary. Options left unset take ProbeSpec's
defaults, the one definition of them: `ledger --help` imports neither probes nor jax,
so the defaults are not repeated here.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ledger.cli.options import (
    BatchSizeOpt,
    DatasetClassOpt,
    DbOpt,
    InstrumentOpt,
    MixedPrecisionOpt,
    ModelTypeOpt,
    NBatchOpt,
    ObjectiveOpt,
    TagOpt,
    TransformsOpt,
)
from ledger.errors import LedgerError

SUMMARY_COLUMNS = ("phase", "transform", "status", "cache_state", "cache_state_source",
                   "trace_s", "compile_s", "first_s", "steady_s")


def _seconds(value):
    return None if value is None else f"{value:.4f}"


def probe_cmd(
    objective: ObjectiveOpt = None,
    transforms: TransformsOpt = None,
    cache_dir: Annotated[str | None, typer.Option("--cache-dir", help="JAX persistent compilation cache dir (unset: none, unless JAX_COMPILATION_CACHE_DIR is set).")] = None,
    tag: TagOpt = None,
    n_batch: NBatchOpt = None,
    batch_size: BatchSizeOpt = None,
    steady_calls: Annotated[int | None, typer.Option("--steady-calls", help="Calls averaged into steady_s.")] = None,
    dataset_class: DatasetClassOpt = None,
    instrument: InstrumentOpt = None,
    model_type: ModelTypeOpt = None,
    mixed_precision: MixedPrecisionOpt = False,
    isolate: Annotated[bool, typer.Option("--isolate", help="Each transform in a fresh process.")] = False,
    cold_warm: Annotated[bool, typer.Option("--cold-warm", help="A fresh cache dir, then the same transforms again in a new process.")] = False,
    db: DbOpt = None,
) -> None:
    """Measure an objective under JAX transforms; one row per transform."""
    from ledger import command
    from ledger.probes import Progress

    # a repeated -t adds to the list (it used to keep only the last, silently)
    transforms = ",".join(transforms) if transforms else None
    with Progress() as progress:
        run = command.probe(db, on_progress=progress, objective=objective, transforms=transforms,
                            cache_dir=cache_dir, tag=tag, n_batch=n_batch, batch_size=batch_size,
                            steady_calls=steady_calls, dataset_class=dataset_class, instrument=instrument,
                            model_type=model_type, mixed_precision=mixed_precision or None,
                            isolate=isolate or None, cold_warm=cold_warm or None)
    show(run)


def show(run) -> None:
    """A probe run for people (`ledger probe`, a sweep task's log): its rows, where they
    went, JAX internals it could not use; a failed transform is the command's error."""
    from ledger.output import format_table

    table = [[_seconds(r.get(c)) if c.endswith("_s") else r.get(c) for c in SUMMARY_COLUMNS] for r in run.rows]
    typer.echo(format_table(SUMMARY_COLUMNS, table), nl=False)
    typer.echo(f"run {run.run_id}: {len(run.rows)} rows written to {run.display}")
    for line in run.notes:  # a JAX internal the probe could not use: once each
        typer.echo(line, err=True)
    if run.failures:
        failed = ", ".join(f"{r['transform']} ({(r.get('error') or '').splitlines()[0][:120]})" for r in run.failures)
        raise LedgerError(f"{len(run.failures)} transform(s) failed: {failed}")


def objectives_cmd() -> None:
    """List the built-in objectives and the transforms."""
    from ledger.probes import describe_builtins, describe_transforms

    typer.echo("objectives (--objective NAME, or package.module:builder):")
    for name, desc in describe_builtins():
        typer.echo(f"  {name:<14} {desc}")
    typer.echo("transforms (--transforms a,b,... or all):")
    for name, desc in describe_transforms():
        typer.echo(f"  {name:<14} {desc}")
