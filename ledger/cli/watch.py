"""`ledger check` and `ledger explain`: is the cache still applying, and if not, why."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated

import typer

from ledger.cli.options import DbOpt
from ledger.cli.pins import DatasetOpt, HardwareOpt, HostnameOpt, InstrumentOpt, ModelOpt, TransformOpt, filters_of


def _tolerance(value: float) -> float:
    if not math.isfinite(value) or value < 1.0:
        raise typer.BadParameter("must be a factor of at least 1.0 (1.5: 50% slower than the pin)")
    return value


def _min_diff(value: float) -> float:
    if not math.isfinite(value) or value < 0:
        raise typer.BadParameter("must be a number of seconds, 0 or more (0.05: a regression is at least 50 ms slower)")
    return value


def _below(value: float) -> float:
    if not math.isfinite(value) or value < 0:
        raise typer.BadParameter("must be a number of seconds, 0 or more (5: what a run's unwritten compiles may cost)")
    return value


def _since(value: str | None) -> str | None:
    if value is not None:
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise typer.BadParameter(f"{value!r} is not an ISO timestamp (e.g. 2026-07-28 or 2026-07-28T17:42)") from None
    return value


def check_cmd(
    tolerance: Annotated[float, typer.Option("--tolerance", callback=_tolerance,
                                             help="A warm row slower than this times its pin is a regression.")] = 1.5,
    min_diff: Annotated[float, typer.Option("--min-diff", callback=_min_diff,
                                            help="Seconds a warm row must be slower than what it is judged against"
                                                 " to be a regression (whatever the ratio).")] = 0.05,
    json: Annotated[bool, typer.Option("--json", help="A JSON document (for CI) instead of lines.")] = False,
    since: Annotated[str | None, typer.Option("--since", callback=_since,
                                                 help="Only rows from this timestamp on (ISO).")] = None,
    below_threshold_s: Annotated[float, typer.Option(
        "--below-threshold-s", callback=_below, metavar="SECONDS",
        help="below-threshold: a run's compiles too quick for JAX to write (its min compile time) cost more than"
             " this.")] = 5.0,
    allow_loaded: Annotated[bool, typer.Option(
        "--allow-loaded", help="Judge warm rows measured on a loaded host too (else inconclusive).")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="A line per finding (per cell), not per root cause.")] = False,
    hardware: HardwareOpt = None, hostname: HostnameOpt = None, dataset_class: DatasetOpt = None,
    model_type: ModelOpt = None, instrument: InstrumentOpt = None, transform: TransformOpt = None,
    db: DbOpt = None,
) -> None:
    """Check warm rows against their pins, and whether the cache still applies: a line per
    root cause (--verbose: per cell), findings unchanged since the last check counted.

    Exit 1 on a regression, went-cold, cache-off, cache-not-written, evicted, or a
    cache-not-reused that is not by design; 0 when clean (jax-changed and below-threshold
    only inform). Each run is stored (check_runs, verdicts)."""
    from ledger import command
    from ledger.output import shown

    filters = filters_of(hardware, hostname, dataset_class, model_type, instrument, transform)
    result = command.check(db, tolerance=tolerance, filters=filters, since=since, min_diff=min_diff,
                           below_s=below_threshold_s, allow_loaded=allow_loaded)
    if json:
        typer.echo(result.as_json(), nl=False)
    else:
        for line in result.lines(verbose):
            typer.echo(shown(line))  # a cell or cache dir stored with a line break stays on its line
        typer.echo(result.summary())
    if result.exit_code:
        raise typer.Exit(result.exit_code)


def explain_cmd(
    row_id: Annotated[int, typer.Argument(help="A cold row's id, or a row's without a cache dir (compile_records.id).")],
    db: DbOpt = None,
) -> None:
    """Why a cold row was cold (what differs from its cell's last warm row, a jax bump, a cache
    never reused), or why a row had no cache (cache-off)."""
    from ledger import command

    diagnosis = command.explain(row_id, db)
    from ledger.output import shown

    typer.echo("\n".join(map(shown, diagnosis.lines())))
