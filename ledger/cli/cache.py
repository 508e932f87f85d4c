"""`ledger cache DIR`: what a JAX cache dir holds and what it saves, read-only."""

from __future__ import annotations

import json as jsonlib
from pathlib import Path
from typing import Annotated

import typer

from ledger.cli.options import DbOpt

COLUMNS = ("function", "key", "bytes", "jax s", "hits", "saved s", "last used", "dead weight")
SHOWN = 20


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


def cache_cmd(
    cache_dir: Annotated[Path, typer.Argument(help="A JAX persistent-cache dir (jax_compilation_cache_dir).")],
    json: Annotated[bool, typer.Option("--json", help="One JSON object: entries and totals.")] = False,
    unused_days: Annotated[int, typer.Option("--unused-days", min=1, metavar="N",
                                             help="An entry unused for N days is dead weight.")] = 30,
    db: DbOpt = None,
) -> None:
    """Inventory a JAX cache dir: each entry's function, size, the compile seconds JAX recorded
    in it, and from the ledger its warm hits, the seconds they saved, its last use; the dead
    weight. Reads only: the dir and the ledger stay as they are."""
    from ledger import command
    from ledger.output import format_table, shown

    inv = command.cache(cache_dir, db, unused_days=unused_days)
    if json:
        typer.echo(jsonlib.dumps(inv.as_json(), indent=1))
        return
    t = inv.totals()
    typer.echo(f"cache dir {shown(str(cache_dir))}: {t['entries']} entries, {_mb(t['bytes'])};"
               f" JAX recorded {t['jax_compile_s']} s of compiles in them (whole seconds)")
    if inv.ledger is None:
        typer.echo("no ledger here (--db, LEDGER_DB or ./ledger.db): what the files hold, nothing of hits or savings")
    else:
        typer.echo(f"{shown(inv.ledger)} names {sum(1 for i in inv.items if i.serves)} of them in {t['ledger_rows']}"
                   f" rows; their warm hits saved {t['saved_s']:.2f} s, {t['saved_7d_s']:.2f} s in the last 7 days")
    dead = t["dead_by_reason"]
    typer.echo(f"dead weight: {t['dead_entries']} entries, {_mb(t['dead_bytes'])} ({dead['never hit']} never hit,"
               f" {dead['unused']} unused {unused_days}+ days, {dead['old jax']} of an older jax than the dir's newest)")
    biggest = sorted(inv.items, key=lambda i: -i.entry.bytes)[:SHOWN]
    rows = [[shown(i.entry.function)[:40], i.entry.key.rsplit("-", 1)[-1][:12], i.entry.bytes,
             "?" if i.entry.jax_compile_s is None else i.entry.jax_compile_s, i.hits, f"{i.saved_s:.2f}",
             (i.as_json()["last_used"] or "-")[:16], ", ".join(i.dead) or "-"] for i in biggest]
    if rows:
        typer.echo(format_table(COLUMNS, rows), nl=False)
    if len(inv.items) > SHOWN:
        typer.echo(f"({SHOWN} largest of {len(inv.items)} entries shown; --json lists every one)")
