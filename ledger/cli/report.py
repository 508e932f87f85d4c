"""`ledger report`: the ledger per comparability key, as markdown, HTML or a README block."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ledger.cli.options import DbOpt
from ledger.errors import LedgerError


def report_cmd(
    html: Annotated[Path | None, typer.Option(
        "--html", help="Write a self-contained HTML page with charts (instead of markdown on stdout).",
        dir_okay=False)] = None,
    update: Annotated[Path | None, typer.Option(
        "--update", help="Rewrite the report between <!-- ledger-report:start/end --> in this file"
        " (only those bytes; a symlink's target is updated).")] = None,
    check: Annotated[bool, typer.Option("--check", help="With --update: write nothing, exit 1 if the block is stale.")]
    = False,
    model_type: Annotated[str | None, typer.Option("--model-type", help="Only this model type.")] = None,
    hostname: Annotated[str | None, typer.Option("--hostname", help="Only this host.")] = None,
    db: DbOpt = None,
) -> None:
    """Markdown report: one table per host key (hardware, hostname, jax, precision), never ranked across keys."""
    from ledger import command

    if check and update is None:
        raise typer.BadParameter("--check needs --update FILE", param_hint="--check")
    filters = {"model_type": model_type, "hostname": hostname}
    if html is not None:
        tables, charts = command.report_html(html, db, filters=filters)
        typer.echo(f"wrote {html} ({_count(tables, 'table')}, {_count(charts, 'chart')})")
        if update is None:
            return  # who asked for a file wants to hear what was written, not the report again
    # how often `ledger predict` held: on stdout, not in a README block
    report = command.report(db, filters=filters, predictions=update is None)
    if update is None:
        typer.echo(report, nl=False)
    else:
        _update(update, report, check)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _update(path: Path, text: str, check: bool) -> None:
    from ledger.report.readme_block import update as update_block

    try:
        stale = update_block(path, text, check=check)
    except OSError as exc:
        raise LedgerError(f"cannot write {path}: {exc.strerror}") from None
    if check:
        typer.echo(f"{path}: report block is {'stale: run ledger report --update' if stale else 'up to date'}")
        if stale:
            raise typer.Exit(1)
    else:
        typer.echo(f"{path}: report block {'updated' if stale else 'already up to date'}")
