"""The command group every `ledger` command runs under: a LedgerError (or a database or
migration error) becomes one line on stderr and its exit code; `--traceback` shows
the traceback instead."""

from __future__ import annotations

import typer
from typer.core import TyperGroup

from ledger.errors import LedgerError, first_line, one_line

_TRACEBACK = "ledger.traceback"

def _as_ledger_error(exc: Exception) -> LedgerError | None:
    if isinstance(exc, LedgerError):
        return exc
    module = type(exc).__module__
    if module.startswith("sqlalchemy"):
        from ledger.storage.url import redact

        return LedgerError(f"database error: {redact(first_line(exc))}")
    if module.startswith("alembic") and type(exc).__name__ == "CommandError":
        return LedgerError(f"migration error: {exc}")
    return None


class LedgerGroup(TyperGroup):
    def invoke(self, ctx: typer.Context):
        try:
            return super().invoke(ctx)
        except Exception as exc:
            error = _as_ledger_error(exc)
            if error is None or ctx.meta.get(_TRACEBACK):
                raise
            typer.echo(f"error: {one_line(str(error))}", err=True)
            ctx.exit(error.exit_code)
