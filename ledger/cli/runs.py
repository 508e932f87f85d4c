"""`ledger runs` and `ledger diff`: what each run compiled and saved, and what changed."""

from __future__ import annotations

import json as jsonlib
from typing import Annotated

import typer

from ledger.cli.options import DbOpt, count
from ledger.cli.pins import DatasetOpt, HardwareOpt, HostnameOpt, InstrumentOpt, ModelOpt, TransformOpt, filters_of

COLUMNS = ("run", "started", "host", "what", "compiles", "cold", "warm", "time s", "compiling", "trace+lower s",
           "XLA s", "saved s")
WHAT = COLUMNS.index("what")
MIN_WHAT = 30  # the command wraps in a column at least this wide, whatever the terminal
NOT_EXACT = {"gone": "*", "last seen": ">="}  # how a run's time reads where a process's end was not said


def _saved(run) -> str:
    if run.saved_s is None:
        return "unknown" if run.warm else "-"
    return f"{run.saved_s:.2f}" + (f" (+{run.saved_unknown} unknown)" if run.saved_unknown else "")


def _time(run) -> tuple[str, str]:
    """The run's time and the share of it spent compiling, as table cells."""
    t = run.time
    if t is None:
        return "-", "-"
    mark = NOT_EXACT.get(t.ended_by[-1], "") if t.ended_by else ""
    shown = f">={t.wall_s:.1f}" if mark == ">=" else f"{t.wall_s:.1f}{mark}"
    return shown, "-" if run.share is None else f"{100 * run.share:.0f}%"


def _wrapped(rows: list[list], width: int) -> list[list]:
    """Each row's command wrapped into lines of ``width``, never cut: the lines after the
    first hold only the command."""
    import textwrap

    out = []
    for row in rows:
        parts = textwrap.wrap(row[WHAT], width, break_on_hyphens=False, drop_whitespace=False) or [""]
        out.append([*row[:WHAT], parts[0].strip(), *row[WHAT + 1:]])
        out += [[None] * WHAT + [p.strip()] + [None] * (len(row) - WHAT - 1) for p in parts[1:]]
    return out


def _what_width(rows: list[list]) -> int:
    import shutil

    from ledger.output import format_table

    others = format_table(COLUMNS, [[*r[:WHAT], "", *r[WHAT + 1:]] for r in rows]).splitlines()[1]
    return max(MIN_WHAT, shutil.get_terminal_size((160, 24)).columns - len(others) - 2)


def runs_cmd(
    json: Annotated[bool, typer.Option("--json", help="A JSON list, one object per run.")] = False,
    limit: Annotated[int, typer.Option("--limit", callback=count, metavar="N", help="At most N runs; 0: all.")] = 20,
    hardware: HardwareOpt = None, hostname: HostnameOpt = None, dataset_class: DatasetOpt = None,
    model_type: ModelOpt = None, instrument: InstrumentOpt = None, transform: TransformOpt = None,
    db: DbOpt = None,
) -> None:
    """One line per run, newest first: what ran, its compiles cold and warm, its time and the
    share of it spent compiling (tracing and lowering, XLA), and the seconds the cache saved
    (each warm compile against its cell's median cold one)."""
    from ledger import command
    from ledger.output import format_table, shown
    from ledger.report.runs import SAVED_FROM

    filters = filters_of(hardware, hostname, dataset_class, model_type, instrument, transform)
    found, unrun = command.runs(db, filters=filters, limit=limit or None)
    if json:
        typer.echo(jsonlib.dumps([r.as_dict() for r in found], indent=1))
        return
    rows = [[r.run_id, r.started, r.host, shown(r.what), r.compiles, r.cold, r.warm, *_time(r), f"{r.trace_s:.2f}",
             f"{r.compile_s:.2f}", _saved(r)] for r in found]
    typer.echo(format_table(COLUMNS, _wrapped(rows, _what_width(rows))), nl=False)
    notes = [(f"{len(found)} runs; compiling: tracing and lowering (no cache removes them) and XLA's compile or"
             " cache read, over the run's processes' time")]
    ends = {e for r in found if r.time for e in r.time.ended_by}
    if "gone" in ends:
        notes.append("* a process ended without a word (killed?): its end is when it was seen gone")
    if "last seen" in ends:
        notes.append(">= a process's end was never seen: the run took at least this long")
    notes.append(f"saved s: {SAVED_FROM}")
    if unrun:
        notes.append(f"{unrun} rows belong to no run (no run id: legacy imports)")
    typer.echo("\n".join(notes))


def diff_cmd(
    run_a: Annotated[str | None, typer.Argument(help="The earlier run id (both left out: the last two runs).")] = None,
    run_b: Annotated[str | None, typer.Argument(help="The later run id.")] = None,
    json: Annotated[bool, typer.Option("--json", help="One JSON object with a functions list.")] = False,
    show_all: Annotated[bool, typer.Option("--all", help="List the functions that did not change too.")] = False,
    by_function: Annotated[bool, typer.Option("--by-function", help="Two pytest sessions function by function,"
                                              " not test by test.")] = False,
    db: DbOpt = None,
) -> None:
    """What changed between two runs, function by function: new, gone, went-cold (and why),
    went-warm, slower, faster, same. Exit 1 when anything went cold or slower. Two pytest
    sessions (`pytest --ledger`) go test by test: a test that compiles a function more
    times, or recompiles one, or whose compiles went cold or slower (exit 1 too)."""
    from ledger import command
    from ledger.output import shown
    from ledger.report.diff import line, listed

    result = command.diff(db, run_a, run_b, by_test=False if by_function else None)
    if not hasattr(result, "functions"):
        _print_test_diff(result, json)
        return
    if json:
        typer.echo(jsonlib.dumps(result.as_json(), indent=1))
    else:
        for f in result.functions:
            if show_all or listed(f):
                typer.echo(shown(line(f)))
        counts = ", ".join(f"{n} {c}" for c, n in result.counts().items() if n)
        typer.echo(f"run {result.a} -> run {result.b}: {len(result.functions)} functions: {counts};"
                   f" {result.saved_words()}")
    if result.exit_code:
        raise typer.Exit(result.exit_code)


def _print_test_diff(result, json: bool) -> None:
    from ledger.output import shown
    from ledger.report.diff_tests import line

    if json:
        typer.echo(jsonlib.dumps(result.as_json(), indent=1))
    else:
        for f in result.findings:
            typer.echo(shown(line(f)))
        typer.echo(result.summary())
    if result.exit_code:
        raise typer.Exit(result.exit_code)
