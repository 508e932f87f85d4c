"""The `ledger` command: a thin shell over the library.

Each command resolves the database, calls one library function and prints. User
errors are LedgerError, turned into one line on stderr and a non-zero exit at the
root (ledger/cli/group.py); `--traceback` shows the traceback instead. Heavy imports
(SQLAlchemy, alembic, jax) happen inside commands so `ledger --help` stays fast.

The app and its commands are in ledger/cli/commands.py, loaded on first use; a run builds
just the command it names (commands.ledger_app), not every command's parameters. `ledger record`
starts alone (ledger/cli/record.py), since what it costs before the program runs is
added to every recorded run.
"""

from __future__ import annotations

import sys


def __getattr__(name: str):
    if name == "app":
        from ledger.cli.commands import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    if sys.argv[1:2] == ["record"]:
        from ledger.recorder import argv

        argv.run(sys.argv[2:])  # the plain form, without Typer; else Typer reads it
        from ledger.cli.record import record_alone

        record_alone(sys.argv[2:])
        return
    from ledger.cli import commands
    from ledger.output import end_output, mark_stdout

    named = commands.named_in(sys.argv[1:])
    app = commands.ledger_app(named) if named else commands.app

    mark_stdout()  # a write error of stdout is one line (ledger/output.py), not a traceback
    try:
        app()
        code = 0
    except SystemExit as exc:
        code = exc.code
    said = end_output()  # the interpreter's own flush at exit would fail with a traceback
    if said is not None:
        if said:
            print(f"error: {said}", file=sys.stderr)
        code = code or 1
    sys.exit(code)
