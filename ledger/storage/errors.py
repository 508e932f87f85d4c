"""What an exception means to the person at the command line: a LedgerError as it is, a
database or migration error as the one line it means (its password redacted), a bug as
None (it keeps its traceback). Both command-line paths use it: Typer's (ledger/cli/group.py)
and `ledger record`'s own (ledger/recorder/argv.py), which is below the CLI and so finds it
here, beside the database whose errors it reads."""

from __future__ import annotations

from ledger.errors import LedgerError, first_line


def as_ledger_error(exc: Exception) -> LedgerError | None:
    """The user's error in ``exc``: a LedgerError, or what a database or migration error
    means to them (redacted); None for a bug, which keeps its traceback."""
    if isinstance(exc, LedgerError):
        return exc
    from ledger.output import output_error  # imported on an error only: the start stays light

    said = output_error(exc)  # stdout refused the output (a full device)
    if said is not None:
        return LedgerError(said)
    module = type(exc).__module__
    if module.startswith("sqlalchemy"):
        from ledger.storage.url import redact

        return LedgerError(f"database error: {redact(first_line(exc))}")
    if module.startswith("alembic") and type(exc).__name__ == "CommandError":
        return LedgerError(f"migration error: {exc}")
    return None
