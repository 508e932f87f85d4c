"""`ledger record -- COMMAND`: every XLA compile of an unchanged program, one row each."""

from __future__ import annotations

from typing import Annotated

import typer

from ledger.cli.options import (
    DatasetClassOpt,
    DbOpt,
    InstrumentOpt,
    ModelTypeOpt,
    TagOpt,
)


def record_cmd(
    command: Annotated[list[str], typer.Argument(help="The command to run, after --: ledger record -- python fit.py")],
    tag: TagOpt = None,
    dataset_class: DatasetClassOpt = None,
    model_type: ModelTypeOpt = None,
    instrument: InstrumentOpt = None,
    db: DbOpt = None,
) -> None:
    """Run COMMAND unchanged and record each XLA compile it makes (one row per compile).

    The command's output, exit code and signals are its own: the ledger becomes it.
    A command that cannot be run exits as a shell would (127 not found, 126 not runnable)."""
    from ledger.recorder.launch import exec_recorded

    status = exec_recorded(list(command), db, tag,
                           {"dataset_class": dataset_class, "model_type": model_type, "instrument": instrument})
    raise typer.Exit(status)


def record_alone(args: list[str]) -> None:
    """`ledger record ...` without loading every other command: the same command,
    options and error handling, in a group of one."""
    from ledger.cli.group import LedgerGroup

    app = typer.Typer(cls=LedgerGroup, pretty_exceptions_enable=False, add_completion=False)
    app.callback()(lambda: None)  # a group, as in the full app: `record` is a command name
    app.command("record", context_settings={"allow_interspersed_args": False})(record_cmd)
    app(args=["record", *args], prog_name="ledger")
