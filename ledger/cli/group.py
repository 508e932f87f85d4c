"""The command group every `ledger` command runs under: a LedgerError (or a database or
migration error) becomes one line on stderr and its exit code; `--traceback` shows
the traceback instead."""

from __future__ import annotations

import typer
from typer.core import TyperGroup

from ledger.errors import one_line
from ledger.storage.errors import as_ledger_error

_TRACEBACK = "ledger.traceback"

class LedgerGroup(TyperGroup):
    def invoke(self, ctx: typer.Context):
        try:
            return super().invoke(ctx)
        except Exception as exc:
            error = as_ledger_error(exc)
            if error is None or ctx.meta.get(_TRACEBACK):
                raise
            typer.echo(f"error: {one_line(str(error))}", err=True)
            ctx.exit(error.exit_code)
