"""`ledger predict`: warm or cold, per transform, before anything is compiled.

Takes the objective and cell options of `ledger probe` (ProbeSpec's defaults, the one
definition). Exit 0 when all are warm, 1 when any is cold, 2 on a usage error or a JAX
that cannot be predicted on.
"""

from __future__ import annotations

import json
import os
from typing import Annotated

import typer

from ledger.cli.options import DbOpt


def predict_cmd(
    objective: Annotated[str | None, typer.Option("--objective", "-o", help="A built-in (see `ledger objectives`) or package.module:builder, as `ledger probe` takes it.")] = None,
    transforms: Annotated[list[str] | None, typer.Option("--transforms", "-t", help="Comma-separated or repeated, or 'all'.")] = None,
    cache_dir: Annotated[str | None, typer.Option("--cache-dir", help="The exact cache dir the real run will use (else JAX_COMPILATION_CACHE_DIR).")] = None,
    n_batch: Annotated[int | None, typer.Option("--n-batch", help="Inputs per batched call, as the probe's.")] = None,
    batch_size: Annotated[int | None, typer.Option("--batch-size", help="Chunk size, as the probe's.")] = None,
    dataset_class: Annotated[str | None, typer.Option("--dataset-class", help="The cell's dataset class.")] = None,
    instrument: Annotated[str | None, typer.Option("--instrument", help="The cell's instrument.")] = None,
    model_type: Annotated[str | None, typer.Option("--model-type", help="The cell's model type (unset: the objective's own).")] = None,
    mixed_precision: Annotated[bool, typer.Option("--mixed-precision", help="Passed to the builder, as the probe's.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="A JSON list, one object per transform.")] = False,
    db: DbOpt = None,
) -> None:
    """Say warm or cold for each transform before compiling, and why; compiles nothing."""
    from ledger.predict import run
    from ledger.storage.open import open_ledger
    from probes import ProbeError, ProbeSpec
    from probes.jax_internals import ENV_CACHE_DIR

    given = {"objective": objective, "transforms": ",".join(transforms) if transforms else None,
             "cache_dir": cache_dir, "n_batch": n_batch, "batch_size": batch_size,
             "dataset_class": dataset_class, "instrument": instrument, "model_type": model_type,
             "mixed_precision": mixed_precision or None}
    if not cache_dir and not os.environ.get(ENV_CACHE_DIR):
        raise run.UsageError(f"no cache dir: give --cache-dir or set {ENV_CACHE_DIR} "
                             "(without one nothing is cached, and there is nothing to predict)")
    try:
        spec = ProbeSpec.make(**{k: v for k, v in given.items() if v is not None})
    except ProbeError as exc:
        raise run.UsageError(str(exc)) from None
    report = run.compute(spec)  # before the database is made: a JAX that cannot be predicted on writes nothing
    with open_ledger(db, "write") as ledger:
        outcome = run.predict(spec, ledger.engine, report)
    if as_json:
        typer.echo(json.dumps([run.as_json(p) for p in outcome.results], indent=2))
    else:
        ctx = report.context
        typer.echo(f"{spec.objective} on {ctx['hostname']}, jax {ctx['jax_version']}, "
                   f"cache dir {ctx['cache_dir']} ({ctx['cache_entries']} entries)")
        for p in outcome.results:
            typer.echo(run.line(p))
            for d in p["details"]:
                typer.echo(f"  {d}")
    for note in outcome.notes:
        typer.echo(f"note: {note}", err=True)
    raise typer.Exit(outcome.exit_code)
