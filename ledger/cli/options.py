"""Options shared by every command group, and the cell options that probe, predict and
record share (one definition each: a cell named the same way everywhere)."""

from __future__ import annotations

from typing import Annotated

import typer

# Not envvar=LEDGER_DB: the resolver reads the environment itself, and only a URL
# typed on the command line is refused for carrying a password.
DbOpt = Annotated[
    str | None,
    typer.Option("--db", help="Database file or SQLAlchemy URL (else $LEDGER_DB, else ./ledger.db)."),
]

TagOpt = Annotated[str | None, typer.Option("--tag", help="Free-text label kept on the rows.")]
ObjectiveOpt = Annotated[str | None, typer.Option(
    "--objective", "-o",
    help="A built-in (see `ledger objectives`) or package.module:builder, importable from the working directory.")]
TransformsOpt = Annotated[list[str] | None, typer.Option(
    "--transforms", "-t", help="Comma-separated or repeated (-t jit -t grad), or 'all'.")]
NBatchOpt = Annotated[int | None, typer.Option("--n-batch", help="Inputs per batched call (vmap, laxmap, pyloop).")]
BatchSizeOpt = Annotated[int | None, typer.Option("--batch-size", help="Chunk size for laxmap_vag and pyloop_vag.")]
DatasetClassOpt = Annotated[str | None, typer.Option(
    "--dataset-class", help="The cell's dataset class, kept on the rows (a probe also gives it to the builder).")]
InstrumentOpt = Annotated[str | None, typer.Option(
    "--instrument", help="The cell's instrument, kept on the rows (a probe also gives it to the builder).")]
ModelTypeOpt = Annotated[str | None, typer.Option(
    "--model-type", help="The cell's model type (unset: the objective's own).")]
MixedPrecisionOpt = Annotated[bool, typer.Option(
    "--mixed-precision", help="Passed to the objective's builder and recorded.")]
