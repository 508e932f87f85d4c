"""The `ledger` command, every group and command of it (ledger/cli/__init__.py: the entry).

Each command resolves the database, calls one library function and prints. User
errors are LedgerError, turned into one line on stderr and a non-zero exit at the
root (LedgerGroup); `--traceback` shows the traceback instead. Heavy imports
(SQLAlchemy, alembic, jax) happen inside commands so `ledger --help` stays fast.
"""

from __future__ import annotations

import importlib
from typing import Annotated

import typer

from ledger.cli.group import _TRACEBACK, LedgerGroup

# Every command and group, in the order `ledger --help` lists them: its name, its module in
# ledger/cli/, and its function there (None: a group, the module's `app`).
ENTRIES = (
    ("import", "legacy", "import_cmd"),
    ("export", "legacy", "export_cmd"),
    ("merge", "merge", "merge_cmd"),
    ("sql", "sql", "sql_cmd"),
    ("probe", "probe", "probe_cmd"),
    ("objectives", "probe", "objectives_cmd"),
    ("predict", "predict", "predict_cmd"),
    ("record", "record", "record_cmd"),
    ("db", "db", None),
    ("pins", "pins", None),
    ("sweep", "sweep", None),
    ("check", "watch", "check_cmd"),
    ("explain", "watch", "explain_cmd"),
    ("report", "report", "report_cmd"),
    ("runs", "runs", "runs_cmd"),
    ("diff", "runs", "diff_cmd"),
    ("cache", "cache", None),
)
_SETTINGS = {"record": {"context_settings": {"allow_interspersed_args": False}}}


def _print_version(value: bool) -> None:
    if value:
        import ledger

        typer.echo(f"ledger {ledger.__version__}")
        raise typer.Exit()


def _root(
    ctx: typer.Context,
    traceback: Annotated[bool, typer.Option("--traceback", help="Show tracebacks for errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    ctx.meta[_TRACEBACK] = traceback


def ledger_app(only: str | None = None) -> typer.Typer:
    """The `ledger` app with every command, or with just the one named `only`.

    One run needs one command: Typer reads the signature of every command it holds each
    time it starts (about 40 ms for all of them), and each module imports what it needs."""
    app = typer.Typer(
        cls=LedgerGroup,
        help="Per-transform JAX compile measurements, with a measured cache_state, in SQLite.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )
    app.callback()(_root)
    for name, module_name, function in ENTRIES:
        if only in (None, name):
            module = importlib.import_module(f"ledger.cli.{module_name}")
            if function is None:
                app.add_typer(module.app, name=name)
            else:
                app.command(name, **_SETTINGS.get(name, {}))(getattr(module, function))
    return app


def named_in(argv: list[str]) -> str | None:
    """The command `argv` (without the program) runs, where it names one; else None."""
    words = [a for a in argv if a != "--traceback"]
    return words[0] if words and words[0] in {name for name, _, _ in ENTRIES} else None


def __getattr__(name: str):
    if name == "app":  # the whole app, made on first use and kept (tests add to it)
        globals()["app"] = ledger_app()
        return globals()["app"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
