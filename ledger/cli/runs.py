"""`ledger runs` and `ledger diff`: what each run compiled and saved, and what changed."""

from __future__ import annotations

import json as jsonlib
from typing import Annotated

import typer

from ledger.cli.options import DbOpt, count
from ledger.cli.pins import DatasetOpt, HardwareOpt, HostnameOpt, InstrumentOpt, ModelOpt, TransformOpt, filters_of

COLUMNS = ("run", "started", "host", "what", "compiles", "cold", "warm", "compile_s", "saved_s")


def _saved(run) -> str:
    if run.saved_s is None:
        return "unknown"
    return f"{run.saved_s:.2f}" + (f" (+{run.saved_unknown} unknown)" if run.saved_unknown else "")


def runs_cmd(
    json: Annotated[bool, typer.Option("--json", help="A JSON list, one object per run.")] = False,
    limit: Annotated[int, typer.Option("--limit", callback=count, metavar="N", help="At most N runs; 0: all.")] = 20,
    hardware: HardwareOpt = None, hostname: HostnameOpt = None, dataset_class: DatasetOpt = None,
    model_type: ModelOpt = None, instrument: InstrumentOpt = None, transform: TransformOpt = None,
    db: DbOpt = None,
) -> None:
    """One line per run, newest first: what ran, its compiles cold and warm, and the seconds
    the cache saved (each warm compile against its cell's median cold one)."""
    from ledger import command
    from ledger.output import format_table, shown
    from ledger.report.runs import SAVED_FROM

    filters = filters_of(hardware, hostname, dataset_class, model_type, instrument, transform)
    found, unrun = command.runs(db, filters=filters, limit=limit or None)
    if json:
        typer.echo(jsonlib.dumps([r.as_dict() for r in found], indent=1))
        return
    rows = [[r.run_id, r.started, r.host, shown(r.what)[:80], r.compiles, r.cold, r.warm, f"{r.compile_s:.2f}",
             _saved(r)] for r in found]
    typer.echo(format_table(COLUMNS, rows), nl=False)
    typer.echo(f"{len(found)} runs; saved_s: {SAVED_FROM}"
               + (f"; {unrun} rows belong to no run (no run id: legacy imports)" if unrun else ""))


def diff_cmd(
    run_a: Annotated[str | None, typer.Argument(help="The earlier run id (both left out: the last two runs).")] = None,
    run_b: Annotated[str | None, typer.Argument(help="The later run id.")] = None,
    json: Annotated[bool, typer.Option("--json", help="One JSON object with a functions list.")] = False,
    show_all: Annotated[bool, typer.Option("--all", help="List the functions that did not change too.")] = False,
    db: DbOpt = None,
) -> None:
    """What changed between two runs, function by function: new, gone, went-cold (and why),
    went-warm, slower, faster, same. Exit 1 when anything went cold or slower."""
    from ledger import command
    from ledger.output import shown
    from ledger.report.diff import SAME, line

    result = command.diff(db, run_a, run_b)
    if json:
        typer.echo(jsonlib.dumps(result.as_json(), indent=1))
    else:
        for f in result.functions:
            if show_all or f["change"] != SAME:
                typer.echo(shown(line(f)))
        counts = ", ".join(f"{n} {c}" for c, n in result.counts().items() if n)
        typer.echo(f"run {result.a} -> run {result.b}: {len(result.functions)} functions: {counts}")
    if result.exit_code:
        raise typer.Exit(result.exit_code)
