"""`ledger cache`: what a JAX cache dir holds and what it saves (`ledger cache DIR`, short
for `ledger cache inventory DIR`, read-only), and `ledger cache prune DIR`."""

from __future__ import annotations

import json as jsonlib
from typing import Annotated

import typer
from typer.core import TyperGroup

from ledger.cli.options import DbOpt
from ledger.errors import LedgerError

INVENTORY = "inventory"


class CacheGroup(TyperGroup):
    """`ledger cache DIR ...` is `ledger cache inventory DIR ...`: a first word that names no
    subcommand (a dir, an option) goes to the inventory, as before there were subcommands.
    A dir named like a subcommand is given as ./prune."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = [INVENTORY, *args]
        return super().parse_args(ctx, args)


app = typer.Typer(cls=CacheGroup, no_args_is_help=True,
                  help="A JAX cache dir: `ledger cache DIR` (inventory, read-only), `ledger cache prune DIR`.")

COLUMNS = ("function", "key", "bytes", "jax s", "hits", "saved s", "last used", "dead weight")
SHOWN = 20


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


def _days(value: str | None) -> int | None:
    from ledger.cache.prune import parse_days

    return None if value is None else parse_days(value)


def _size(value: str | None) -> int | None:
    from ledger.cache.prune import parse_size

    return None if value is None else parse_size(value)


@app.command(INVENTORY, short_help="What the dir holds and what each entry saved (read-only); the default.")
def cache_cmd(
    cache_dir: Annotated[str, typer.Argument(help="A JAX persistent-cache dir (jax_compilation_cache_dir).")],
    json: Annotated[bool, typer.Option("--json", help="One JSON object: entries and totals.")] = False,
    unused_days: Annotated[str, typer.Option("--unused-days", callback=_days, metavar="N",
                                             help="An entry unused for N days is dead weight.")] = "30",
    db: DbOpt = None,
) -> None:
    """Inventory a JAX cache dir: each entry's function, size, the compile seconds JAX recorded
    in it, and from the ledger its warm hits, the seconds they saved, its last use; the dead
    weight. Reads only: the dir and the ledger stay as they are. `ledger cache DIR` is short
    for this."""
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
                   f" rows; their warm hits saved {t['saved_s']:.2f} s, {t['saved_7d_s']:.2f} s in the last 7 days"
                   + (f" (+{t['saved_unknown']} hits of unknown saving" if t["saved_unknown"] else "")
                   + (f"; {t['saved_loaded_s']:.2f} s by cold rows on a loaded host" if t["saved_loaded_s"] else "")
                   + (")" if t["saved_unknown"] else ""))
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


@app.command("prune", short_help="Remove the entries that save least per byte, never one used within N days.")
def prune_cmd(
    cache_dir: Annotated[str, typer.Argument(help="A JAX persistent-cache dir (jax_compilation_cache_dir).")],
    unused_days: Annotated[str | None, typer.Option(
        "--unused-days", callback=_days, metavar="N",
        help="Never remove an entry used within N days; alone: remove every entry unused for N days."
             " (Default with --max-size: 7.)")] = None,
    max_size: Annotated[str | None, typer.Option(
        "--max-size", callback=_size, metavar="SIZE",
        help="Remove the entries that save least per byte until the dir's entries total at most SIZE"
             " (500M, 2G, 1.5GB, 3GiB, 1000: bytes).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; change nothing anywhere.")] = False,
    json: Annotated[bool, typer.Option("--json", help="One JSON object: the plan and what was removed.")] = False,
    db: DbOpt = None,
) -> None:
    """Remove the entries that save least per byte by the ledger's evidence, never one used
    within N days; print each removal, the bytes freed and the compile seconds given up.
    Safe beside running jobs (docs/cache.md); each removal is recorded in the ledger, so a
    later cold compile of it is explained as pruned."""
    from ledger import command

    plan = command.cache_prune(cache_dir, db, unused_days=unused_days, max_size=max_size, dry_run=dry_run)
    if plan.stopped and not plan.removed:
        raise LedgerError(f"{plan.stopped}; nothing was removed")
    if json:
        typer.echo(jsonlib.dumps(plan.as_json(), indent=1))
    else:
        for line in prune_lines(plan):
            typer.echo(line)
    if plan.stopped:  # what was removed is said above, and recorded; the rest stayed
        raise LedgerError(plan.stopped)


def prune_lines(plan) -> list[str]:
    from ledger.cache.prune import mb
    from ledger.output import shown

    verb = "would remove" if plan.dry_run else "removed"
    out = [_removal_line(verb, r) for r in plan.removals]
    inv, done = plan.inventory, plan.removed
    if not plan.removals:
        out.append(f"nothing to prune: {_why_nothing(plan)}")
    else:
        out.append(f"{verb} {len(done)} entries, {mb(sum(r.item.entry.bytes for r in done))} freed,"
                   f" {sum(r.item.entry.jax_compile_s or 0 for r in done)} s of compiles given up (JAX's seconds)")
    if plan.max_size is not None and plan.remaining_bytes() > plan.max_size:
        out.append(f"the dir's entries stay at {mb(plan.remaining_bytes())}, above --max-size {mb(plan.max_size)}:"
                   f" {plan.protected} entries used within {plan.unused_days} days are kept")
    if inv.ledger is None:
        out.append("no ledger (--db, LEDGER_DB or ./ledger.db): nothing recorded, every entry saved 0 s per byte")
    elif not plan.dry_run and done:
        out.append(f"recorded in {shown(inv.ledger)} (cache_prunes)")
    return out


def _removal_line(verb: str, r) -> str:
    """One planned removal: done (or would be), or kept after all, and why."""
    from ledger.output import shown

    entry = f"{shown(r.item.entry.function)} {r.item.entry.key.rsplit('-', 1)[-1][:12]}"
    if r.skipped:  # a writer rewrote it, JAX's lock was held, the system refused, or it went meanwhile
        return f"not removed {entry} ({_mb(r.item.entry.bytes)}): {r.skipped}"
    return (f"{verb} {entry}: {_mb(r.item.entry.bytes)}, {_seconds(r.item.entry.jax_compile_s)} s of compile given up"
            f" ({r.reason})" + (f"; {r.note}" if r.note else ""))


def _seconds(value: int | None) -> str:
    return "?" if value is None else str(value)


def _why_nothing(plan) -> str:
    from ledger.cache.prune import mb

    n = len(plan.inventory.items)
    if plan.max_size is not None and plan.remaining_bytes() <= plan.max_size:
        return f"{n} entries, {mb(plan.remaining_bytes())}, within --max-size {mb(plan.max_size)}"
    return f"{n} entries, none unused for {plan.unused_days} days"
