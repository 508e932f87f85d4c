"""`ledger pins`: sticky warm-compile pins, one per comparability key."""

from __future__ import annotations

from typing import Annotated

import typer

from ledger.cli.options import DbOpt

app = typer.Typer(help="Sticky warm-compile pins: the expected warm compile of each key.", no_args_is_help=True)

# The filters every watch command takes (ledger.filters.FILTER_FIELDS).
HardwareOpt = Annotated[str | None, typer.Option("--hardware", help="Only this hardware (e.g. local_cpu).")]
HostnameOpt = Annotated[str | None, typer.Option("--hostname", help="Only this host.")]
DatasetOpt = Annotated[str | None, typer.Option("--dataset-class", help="Only this dataset class.")]
ModelOpt = Annotated[str | None, typer.Option("--model-type", help="Only this model type.")]
InstrumentOpt = Annotated[str | None, typer.Option("--instrument", help="Only this instrument.")]
TransformOpt = Annotated[str | None, typer.Option("--transform", help="Only this transform (jit, grad, vag, ...).")]


def filters_of(hardware, hostname, dataset_class, model_type, instrument, transform) -> dict:
    return {"hardware": hardware, "hostname": hostname, "dataset_class": dataset_class,
            "model_type": model_type, "instrument": instrument, "transform": transform}


@app.command("update")
def update_cmd(
    repin: Annotated[bool, typer.Option("--repin", help="Move the matching pins to their newest pinnable row.")] = False,
    check: Annotated[bool, typer.Option("--check", help="Write nothing; exit 1 if pins would change.")] = False,
    allow_loaded: Annotated[bool, typer.Option("--allow-loaded", help="Pin rows measured on a loaded host too.")] = False,
    hardware: HardwareOpt = None, hostname: HostnameOpt = None, dataset_class: DatasetOpt = None,
    model_type: ModelOpt = None, instrument: InstrumentOpt = None, transform: TransformOpt = None,
    db: DbOpt = None,
) -> None:
    """Pin every unpinned key to its newest warm ok row; existing pins move only with --repin."""
    from ledger import command

    filters = filters_of(hardware, hostname, dataset_class, model_type, instrument, transform)
    plan = command.pins_update(db, filters=filters, repin=repin, allow_loaded=allow_loaded, dry_run=check)
    from ledger.output import shown

    for change in plan.changes:
        typer.echo(shown(change.line()))  # a tag or cell stored with a line break stays on its line
    typer.echo(plan.summary() + (" (--check: nothing written)" if check else ""))
    if check and plan.changes:
        raise typer.Exit(1)


@app.command("list")
def list_cmd(
    json: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
    hardware: HardwareOpt = None, hostname: HostnameOpt = None, dataset_class: DatasetOpt = None,
    model_type: ModelOpt = None, instrument: InstrumentOpt = None, transform: TransformOpt = None,
    db: DbOpt = None,
) -> None:
    """List the pins."""
    from ledger import command
    from ledger.output import format_json, format_table

    filters = filters_of(hardware, hostname, dataset_class, model_type, instrument, transform)
    columns, rows = command.pins_list(db, filters=filters)
    typer.echo((format_json if json else format_table)(columns, rows), nl=False)
