"""`ledger predict`: warm or cold, per transform, before anything is compiled.

Takes the objective and cell options of `ledger probe` (ProbeSpec's defaults, the one
definition). Exit 0 when all are warm, 1 when any is cold, 2 on a usage error, a JAX
that cannot be predicted on, or keys not computed within --timeout (nothing stored).
"""

from __future__ import annotations

import json
import math
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
    TransformsOpt,
    usage_exit_code,
)

DEFAULT_TIMEOUT = "600"  # ledger/predict/run.DEFAULT_TIMEOUT_S, spelled for --help (tests hold them equal)
MAX_TIMEOUT_S = 1e6  # 11.6 days; the OS's wait takes at most 2**31 ms


def _timeout(value: str) -> float:
    """--timeout's seconds: positive and finite (at most MAX_TIMEOUT_S), else one line and exit 2."""
    from ledger.predict.run import UsageError

    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= MAX_TIMEOUT_S:  # NaN fails both comparisons
        raise UsageError(f"--timeout must be a number of seconds over 0 and at most {MAX_TIMEOUT_S:.0f}, "
                         f"not {value!r}")
    return seconds


TimeoutOpt = Annotated[str, typer.Option(
    "--timeout", callback=_timeout, metavar="SECONDS",
    help="Stop, exit 2 and store nothing if building the objective and tracing take longer.")]


@usage_exit_code(2)  # exit 1 says a transform will compile cold
def predict_cmd(
    objective: ObjectiveOpt = None,
    transforms: TransformsOpt = None,
    cache_dir: Annotated[str | None, typer.Option("--cache-dir", help="The exact cache dir the real run will use (else JAX_COMPILATION_CACHE_DIR).")] = None,
    n_batch: NBatchOpt = None,
    batch_size: BatchSizeOpt = None,
    dataset_class: DatasetClassOpt = None,
    instrument: InstrumentOpt = None,
    model_type: ModelTypeOpt = None,
    mixed_precision: MixedPrecisionOpt = False,
    as_json: Annotated[bool, typer.Option("--json", help="A JSON list, one object per transform.")] = False,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT,
    db: DbOpt = None,
) -> None:
    """Say warm or cold for each transform before compiling, and why; compiles nothing."""
    from ledger import command
    from ledger.predict import run

    outcome, report = command.predict(
        db, timeout=timeout, timeout_flag="--timeout", objective=objective,
        transforms=",".join(transforms) if transforms else None, cache_dir=cache_dir, n_batch=n_batch,
        batch_size=batch_size, dataset_class=dataset_class, instrument=instrument, model_type=model_type,
        mixed_precision=mixed_precision or None)
    if as_json:
        typer.echo(json.dumps([run.as_json(p) for p in outcome.results], indent=2))
    else:
        ctx = report.context
        typer.echo(f"{outcome.objective} on {ctx['hostname']}, jax {ctx['jax_version']}, "
                   f"cache dir {ctx['cache_dir']} ({ctx['cache_entries']} entries)")
        for p in outcome.results:
            typer.echo(run.line(p))
            for d in p["details"]:
                typer.echo(f"  {d}")
    for note in outcome.notes:
        typer.echo(f"note: {note}", err=True)
    raise typer.Exit(outcome.exit_code)
