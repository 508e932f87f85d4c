"""Options shared by every command group, and the cell options that probe, predict and
record share (one definition each: a cell named the same way everywhere).

The tag and the cell's text are checked here, as they are parsed, by the record
contract's own rule (ledger/record_validation.check_text_value: storable, one line of
printable text, at most TEXT_VALUE_MAX characters), so every command that takes one
refuses a bad value before it does any work: before jax is imported, a probe runs or
a recorded command starts. The refusal is a LedgerError (one line on stderr); its
exit code is 1, or the command's own for a usage error where 1 means something else
(`ledger predict`: a cold transform; see usage_exit_code).
"""

from __future__ import annotations

from typing import Annotated

import typer

from ledger.errors import LedgerError

USAGE_EXIT = "usage_exit_code"


def usage_exit_code(code: int):
    """Mark a command whose usage errors exit with `code` rather than 1."""

    def mark(command):
        setattr(command, USAGE_EXIT, code)
        return command

    return mark


def _text_value(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    if value is None:
        return None
    from ledger.record_validation import RecordError, check_text_value

    try:
        return check_text_value(param.opts[0], value)
    except RecordError as exc:
        error = LedgerError(str(exc))
        error.exit_code = getattr(ctx.command.callback, USAGE_EXIT, LedgerError.exit_code)
        raise error from None


class OptionError(LedgerError):
    """A value its option cannot take: one line and exit 2 (a usage error), never a traceback."""

    exit_code = 2


COUNT_MAX = 2**63 - 1  # the largest integer SQLite and PostgreSQL take (and islice)


def count(_ctx: typer.Context, param: typer.CallbackParam, value: int | None) -> int | None:
    """A whole number of things, 0 to COUNT_MAX (a number past it was a traceback)."""
    if value is None or 0 <= value <= COUNT_MAX:
        return value
    text = str(value)
    shown = text if len(text) <= 40 else f"{text[:20]}... ({len(text)} digits)"
    raise OptionError(f"{param.opts[0]} must be a whole number from 0 to {COUNT_MAX}, not {shown}")


# Not envvar=LEDGER_DB: the resolver reads the environment itself, and only a URL
# typed on the command line is refused for carrying a password.
DbOpt = Annotated[
    str | None,
    typer.Option("--db", help="Database file or SQLAlchemy URL (else $LEDGER_DB, else ./ledger.db)."),
]

TagOpt = Annotated[str | None, typer.Option(
    "--tag", callback=_text_value, help="Free-text label kept on the rows (one line, at most 200 characters).")]
ObjectiveOpt = Annotated[str | None, typer.Option(
    "--objective", "-o",
    help="A built-in (see `ledger objectives`) or package.module:builder, importable from the working directory.")]
TransformsOpt = Annotated[list[str] | None, typer.Option(
    "--transforms", "-t", help="Comma-separated or repeated (-t jit -t grad), or 'all'.")]
NBatchOpt = Annotated[int | None, typer.Option("--n-batch", help="Inputs per batched call (vmap, laxmap, pyloop).")]
BatchSizeOpt = Annotated[int | None, typer.Option("--batch-size", help="Chunk size for laxmap_vag and pyloop_vag.")]
DatasetClassOpt = Annotated[str | None, typer.Option(
    "--dataset-class", callback=_text_value, help="The cell's dataset class, kept on the rows (a probe also gives it to the builder).")]
InstrumentOpt = Annotated[str | None, typer.Option(
    "--instrument", callback=_text_value, help="The cell's instrument, kept on the rows (a probe also gives it to the builder).")]
ModelTypeOpt = Annotated[str | None, typer.Option(
    "--model-type", callback=_text_value, help="The cell's model type (unset: the objective's own).")]
MixedPrecisionOpt = Annotated[bool, typer.Option(
    "--mixed-precision", help="Passed to the objective's builder and recorded.")]
