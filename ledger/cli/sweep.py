"""`ledger sweep`: a grid of probe cells, run here or as a SLURM job array, followed
up and resumed. A thin shell over ledger/sweep."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Annotated, Optional

import typer

from ledger.cli.options import DbOpt
from ledger.errors import LedgerError

app = typer.Typer(help="A grid of probe cells: run here, or as a SLURM job array; status and resume.",
                  no_args_is_help=True)

SpecArg = Annotated[Path, typer.Argument(help="The sweep spec (TOML; see the README).")]
SweepArg = Annotated[str, typer.Argument(help="The sweep's directory, or its id under --dir.")]
DirOpt = Annotated[Path, typer.Option("--dir", help="Where sweep directories go.")]


@app.command("plan")
def plan_cmd(spec: SpecArg) -> None:
    """Print the sweep's tasks and its size; run nothing."""
    from ledger.output import format_table
    from ledger.sweep.spec import load

    sweep = load(spec)
    tasks = sweep.tasks()
    typer.echo(format_table(["task", "objective", "cell", "repeat"],
                            [[t.index, t.objective, _cell(t.cell), t.repeat] for t in tasks]), nl=False)
    typer.echo(f"{len(tasks)} tasks x {sweep.rows_per_task()} rows ({', '.join(sweep.transforms)}"
               f"{', cold and warm' if sweep.cold_warm else ''}) = {len(tasks) * sweep.rows_per_task()} rows")


def _cell(cell: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in cell.items()) or "-"


@app.command("run")
def run_cmd(spec: SpecArg, jobs: Annotated[int, typer.Option("-j", "--jobs", min=1, help="Tasks at once.")] = 1,
            root: DirOpt = Path("sweeps"), db: DbOpt = None) -> None:
    """Run every task here, one probe process each, into the ledger (--db)."""
    from ledger.storage.url import resolve
    from ledger.sweep import local
    from ledger.sweep.spec import load
    from ledger.sweep.store import FROM_ENV, LEDGER_FILE, create

    target = resolve(db)
    where = {"kind": LEDGER_FILE, "path": str(target.path)} if target.path else {"kind": FROM_ENV, "path": None}
    loaded = load(spec)
    from ledger.storage.open import open_ledger

    with open_ledger(db, "write"):
        pass  # made (or checked) at head once, before the tasks all open it at once
    sweep = create(root, loaded, "local", where)
    typer.echo(f"sweep {sweep.sweep_id}: {len(sweep.tasks)} tasks, {jobs} at a time, into {target.display}")
    codes = local.run_tasks(sweep, [t.index for t in sweep.tasks], jobs, _report(sweep), _task_env(target))
    _finish(sweep, codes)


def _task_env(target) -> dict | None:
    """A server ledger reaches the tasks in their environment, never in sweep.json."""
    return None if target.path is not None else dict(os.environ, LEDGER_DB=target.value)


def _report(sweep):
    def done(index: int, code: int) -> None:
        typer.echo(f"task {index} ({sweep.tasks[index].label()}): {'ok' if code == 0 else f'failed, see {sweep.log(index)}'}")
    return done


def _finish(sweep, codes: dict[int, int]) -> None:
    failed = sorted(i for i, c in codes.items() if c != 0)
    typer.echo(f"{len(codes) - len(failed)} of {len(codes)} tasks ok; `ledger sweep status {sweep.dir}`")
    if failed:
        raise LedgerError(f"{len(failed)} task(s) failed: {', '.join(map(str, failed))}")


@app.command("submit")
def submit_cmd(
    spec: SpecArg,
    partition: Annotated[Optional[str], typer.Option("--partition")] = None,
    time: Annotated[Optional[str], typer.Option("--time", help="Per task, as sbatch takes it.")] = None,
    cpus_per_task: Annotated[Optional[int], typer.Option("--cpus-per-task", min=1)] = None,
    gpus: Annotated[Optional[str], typer.Option("--gpus")] = None,
    max_parallel: Annotated[Optional[int], typer.Option("--max-parallel", min=1, help="Tasks running at once.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the script; make and submit nothing.")] = False,
    root: DirOpt = Path("sweeps"),
) -> None:
    """One SLURM job array, one task per cell, each a `ledger probe` into the ledger."""
    from ledger.sweep import slurm
    from ledger.sweep.spec import load
    from ledger.sweep.store import FROM_ENV, PER_TASK, Sweep, create, new_id

    loaded = load(spec)
    # a server in LEDGER_DB is shared by every task; else each task its own file, merged after
    env_db = os.environ.get("LEDGER_DB", "")
    where = {"kind": FROM_ENV, "path": None} if env_db.startswith("postgresql") else {"kind": PER_TASK, "path": None}
    options = dict(partition=partition, time=time, cpus_per_task=cpus_per_task, gpus=gpus, max_parallel=max_parallel)
    if dry_run:
        preview = Sweep((root / new_id(loaded)).resolve(), "(not made)", loaded, "slurm", where)
        typer.echo(slurm.script(preview, **options), nl=False)
        return
    slurm.require_sbatch()
    sweep = create(root, loaded, "slurm", where)
    path = sweep.dir / slurm.SCRIPT
    path.write_text(slurm.script(sweep, **options))
    try:
        job = slurm.sbatch(path)
    except LedgerError:
        shutil.rmtree(sweep.dir)  # refused: no sweep that was never queued
        raise
    sweep.submissions.append({"job_id": job, "tasks": [t.index for t in sweep.tasks]})
    sweep.save()
    typer.echo(f"sweep {sweep.sweep_id}: {len(sweep.tasks)} tasks submitted as SLURM job array {job}")
    typer.echo(f"follow it: ledger sweep status {sweep.dir}")


@app.command("status")
def status_cmd(sweep_ref: SweepArg, root: DirOpt = Path("sweeps"), db: DbOpt = None) -> None:
    """Which tasks are done, failed (and why), running, queued or missing."""
    from ledger.output import format_table
    from ledger.sweep.status import task_states, summary
    from ledger.sweep.store import open_sweep

    sweep = open_sweep(sweep_ref, root)
    states = task_states(sweep, db)
    typer.echo(summary(sweep, states))
    typer.echo(format_table(["task", "cell", "state", "rows", "detail"],
                            [[s.index, s.label, s.state, s.rows, s.detail] for s in states]), nl=False)


@app.command("resume")
def resume_cmd(sweep_ref: SweepArg, root: DirOpt = Path("sweeps"), db: DbOpt = None,
               jobs: Annotated[int, typer.Option("-j", "--jobs", min=1, help="Tasks at once (a local sweep).")] = 1
               ) -> None:
    """Run again only the failed and missing tasks: resubmitted, or run here."""
    from ledger.storage.url import resolve
    from ledger.sweep import local, slurm
    from ledger.sweep.status import FAILED, MISSING, task_states
    from ledger.sweep.store import open_sweep

    sweep = open_sweep(sweep_ref, root)
    again = [s.index for s in task_states(sweep, db) if s.state in (FAILED, MISSING)]
    if not again:
        typer.echo(f"sweep {sweep.sweep_id}: nothing to resume")
        return
    if sweep.mode == "local":
        typer.echo(f"sweep {sweep.sweep_id}: running tasks {', '.join(map(str, again))} again")
        target = resolve(db) if db is not None else None
        _finish(sweep, local.run_tasks(sweep, again, jobs, _report(sweep), _task_env(target) if target else None))
        return
    job = slurm.sbatch(sweep.dir / slurm.SCRIPT, slurm.array_spec(again, None))
    sweep.submissions.append({"job_id": job, "tasks": again})
    sweep.save()
    typer.echo(f"sweep {sweep.sweep_id}: tasks {', '.join(map(str, again))} resubmitted as SLURM job array {job}")


@app.command("task", hidden=True)
def task_cmd(sweep_dir: Path, index: int) -> None:
    """One task of a sweep: what a job array task (or `run`) executes."""
    from probes.host import SWEEP_ID_ENV, SWEEP_TASK_ENV

    from ledger.cli.probe import probe_cmd
    from ledger.sweep.spec import probe_options
    from ledger.sweep.store import open_sweep

    sweep = open_sweep(str(sweep_dir))
    if not 0 <= index < len(sweep.tasks):
        raise LedgerError(f"sweep {sweep.sweep_id} has tasks 0 to {len(sweep.tasks) - 1}, not {index}")
    os.environ[SWEEP_ID_ENV], os.environ[SWEEP_TASK_ENV] = sweep.sweep_id, str(index)
    options = probe_options(sweep.spec, sweep.tasks[index], sweep.cache_dir(index))
    options["transforms"] = ",".join(options["transforms"])
    probe_cmd(**options, tag=f"sweep {sweep.sweep_id} task {index}", db=sweep.task_db(index))
