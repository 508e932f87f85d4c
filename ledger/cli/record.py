"""`ledger record -- COMMAND`: every XLA compile of an unchanged program, one row each."""

from __future__ import annotations

from typing import Annotated

import typer

from ledger.cli.options import DbOpt


def record_cmd(
    command: Annotated[list[str], typer.Argument(help="The command to run, after --: ledger record -- python fit.py")],
    tag: Annotated[str | None, typer.Option("--tag", help="Free-text label kept on the rows.")] = None,
    dataset_class: Annotated[str | None, typer.Option("--dataset-class", help="The cell's dataset class, kept on the rows.")] = None,
    model_type: Annotated[str | None, typer.Option("--model-type", help="The cell's model type, kept on the rows.")] = None,
    instrument: Annotated[str | None, typer.Option("--instrument", help="The cell's instrument, kept on the rows.")] = None,
    db: DbOpt = None,
) -> None:
    """Run COMMAND unchanged and record each XLA compile it makes (one row per compile).

    The command's output, exit code and signals are its own: the ledger becomes it."""
    from ledger.recorder.launch import exec_recorded

    exec_recorded(list(command), db, tag,
                  {"dataset_class": dataset_class, "model_type": model_type, "instrument": instrument})
