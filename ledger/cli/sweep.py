"""`ledger sweep`: a grid of probe cells, run here or as a SLURM job array, followed
up and resumed. A thin shell over ledger/sweep."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path
from time import monotonic, sleep
from typing import Annotated

import typer

from ledger.cli.options import DbOpt
from ledger.errors import LedgerError
from ledger.record import now_timestamp

app = typer.Typer(help="A grid of probe cells: run here, or as a SLURM job array; status and resume.",
                  no_args_is_help=True)

SpecArg = Annotated[Path, typer.Argument(help="The sweep spec (TOML; see the README).")]
SweepArg = Annotated[str, typer.Argument(help="The sweep's directory, or its id under --dir.")]
DirOpt = Annotated[Path, typer.Option("--dir", help="Where sweep directories go.")]
# No envvar= nor min/max here: spec.max_tasks reads LEDGER_SWEEP_MAX_TASKS itself and
# refuses a value out of range in one line, naming where it came from.
MaxTasksOpt = Annotated[int | None, typer.Option(
    "--max-tasks", help="Refuse a sweep of more tasks (else $LEDGER_SWEEP_MAX_TASKS, else 10000; at most 100000).")]


@app.command("plan")
def plan_cmd(spec: SpecArg, max_tasks: MaxTasksOpt = None,
             predict: Annotated[bool, typer.Option("--predict", help="Also say which tasks will compile cold on this node, and their expected cost (compiles nothing).")] = False,
             db: DbOpt = None) -> None:
    """Print the sweep's tasks and its size; run nothing."""
    from ledger.output import format_table
    from ledger.sweep.spec import displayed, load

    sweep = load(spec, max_tasks)
    if predict:
        return _plan_predicted(sweep, db)
    tasks = sweep.tasks()
    typer.echo(format_table(["task", "objective", "cell", "repeat"],
                            [[t.index, displayed(t.objective), _cell(t.cell), t.repeat] for t in tasks]),
               nl=False)
    typer.echo(f"{len(tasks)} tasks x {sweep.rows_per_task()} rows ({', '.join(sweep.transforms)}"
               f"{', cold and warm' if sweep.cold_warm else ''}) = {len(tasks) * sweep.rows_per_task()} rows")


def _plan_predicted(sweep, db) -> None:
    """One line per task and transform that will compile cold, and the expected total."""
    from ledger.output import format_table
    from ledger.sweep.predict import predict_tasks
    from ledger.sweep.spec import displayed

    planned = predict_tasks(sweep, db)
    rows = [[p.task.index, displayed(p.task.objective), _cell(p.task.cell), r["transform"], r["cause"],
             "-" if r["expected_compile_s"] is None else f"{r['expected_compile_s']:.4g}"]
            for p in planned for r in p.cold]
    if rows:
        typer.echo(format_table(["task", "objective", "cell", "transform", "cause", "expected_s"], rows), nl=False)
    known = [r["expected_compile_s"] for p in planned for r in p.cold if r["expected_compile_s"] is not None]
    cold_tasks = [p.task.index for p in planned if p.cold]
    typer.echo(f"{len(cold_tasks)} of {len(planned)} tasks will compile cold ({len(rows)} cold compiles"
               + (f", {sum(known):.4g} s expected for {len(known)} of them" if known else "") + ")"
               + (f"; warm them first: tasks {', '.join(map(str, cold_tasks))}" if cold_tasks else ""))


def _cell(cell: dict) -> str:
    from ledger.sweep.spec import displayed

    # each value escaped and cut short: a row stays one line, and a plan of 10^4 tasks
    # of a 100k value a few MB
    return " ".join(f"{k}={displayed(v)}" for k, v in cell.items()) or "-"


@app.command("run")
def run_cmd(spec: SpecArg, jobs: Annotated[int, typer.Option("-j", "--jobs", min=1, help="Tasks at once.")] = 1,
            root: DirOpt = Path("sweeps"), db: DbOpt = None, max_tasks: MaxTasksOpt = None) -> None:
    """Run every task here, one probe process each, into the ledger (--db)."""
    from ledger.storage.url import resolve
    from ledger.sweep import local
    from ledger.sweep.spec import load
    from ledger.sweep.store import FROM_ENV, LEDGER_FILE, create

    target = resolve(db)
    where = {"kind": LEDGER_FILE, "path": str(target.path)} if target.path else {"kind": FROM_ENV, "path": None}
    loaded = load(spec, max_tasks)
    if loaded.setup:
        typer.echo("the spec's setup lines are for SLURM jobs: a sweep run here runs in this shell's environment")
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


# The sbatch options of submit and resume (resume: only those given change).
PartitionOpt = Annotated[str | None, typer.Option("--partition", help="SLURM partition.")]
TimeOpt = Annotated[str | None, typer.Option("--time", help="Per task, as sbatch takes it (00:30:00).")]
CpusOpt = Annotated[int | None, typer.Option("--cpus-per-task", min=1, max=100_000)]
MemOpt = Annotated[str | None, typer.Option("--mem", help="Per task, as sbatch takes it (8G).")]
GpusOpt = Annotated[str | None, typer.Option("--gpus", help="As sbatch takes it (1, a100:1).")]
AccountOpt = Annotated[str | None, typer.Option("--account")]
QosOpt = Annotated[str | None, typer.Option("--qos")]
ConstraintOpt = Annotated[str | None, typer.Option("--constraint", help="Node features (a100&ib).")]
MaxParallelOpt = Annotated[int | None, typer.Option("--max-parallel", min=1, max=100_000,
                                                       help="Tasks running at once.")]
SbatchArgOpt = Annotated[list[str] | None, typer.Option(
    "--sbatch-arg", help="Any other sbatch option, one token each, repeatable: --sbatch-arg=--exclusive.")]


def _sbatch_options(**given) -> dict:
    return {k: v for k, v in given.items() if v is not None and v != []}


def _tasks_ledger(db: str | None):
    """Where a SLURM sweep's tasks write, and the environment sbatch hands them.

    A server (from --db or LEDGER_DB): every task writes to it; its URL travels in the
    job's environment as LEDGER_DB, never in a file. A SQLite ledger: tasks on other
    nodes cannot share one file safely, so each writes its own in db/, and the ledger
    is where `ledger merge` gathers them."""
    from ledger.storage.url import ENV_VAR, resolve
    from ledger.sweep.store import FROM_ENV, PER_TASK

    target = resolve(db)
    if target.path is None and not target.value.startswith("sqlite"):
        return target, {"kind": FROM_ENV, "path": None}, dict(os.environ, **{ENV_VAR: target.value})
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    return target, {"kind": PER_TASK, "path": None, "merge_into": str(target.path) if target.path else None}, env


def _db_option(db: str | None) -> str:
    """' --db X' to repeat in a suggested command, as the user gave it."""
    from ledger.storage.url import resolve

    return f" --db {shlex.quote(resolve(db).display)}" if db is not None else ""


@app.command("submit")
def submit_cmd(
    spec: SpecArg, partition: PartitionOpt = None, time: TimeOpt = None, cpus_per_task: CpusOpt = None,
    mem: MemOpt = None, gpus: GpusOpt = None, account: AccountOpt = None, qos: QosOpt = None,
    constraint: ConstraintOpt = None, max_parallel: MaxParallelOpt = None, sbatch_arg: SbatchArgOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the script; make and submit nothing.")] = False,
    root: DirOpt = Path("sweeps"), db: DbOpt = None, max_tasks: MaxTasksOpt = None,
) -> None:
    """One SLURM job array, one task per cell, each a `ledger probe` into the ledger."""
    from ledger.sweep import slurm
    from ledger.sweep.spec import load
    from ledger.sweep.store import FROM_ENV, make, new

    loaded = load(spec, max_tasks)
    target, where, env = _tasks_ledger(db)
    options = _sbatch_options(partition=partition, time=time, cpus_per_task=cpus_per_task, mem=mem, gpus=gpus,
                              account=account, qos=qos, constraint=constraint, max_parallel=max_parallel,
                              sbatch_args=sbatch_arg)
    sweep = new(root, loaded, "slurm", where)
    text = slurm.script(sweep, options)  # every value checked before anything is made
    if dry_run:
        typer.echo(text, nl=False)
        return
    slurm.require_sbatch()
    if where["kind"] == FROM_ENV:
        from ledger.storage.open import open_ledger

        with open_ledger(db, "write"):  # db as given: a password may come only from LEDGER_DB
            pass  # made (or checked) at head once, before the tasks all open it at once
    sweep.slurm = options
    make(sweep)
    try:
        job = _sbatch(sweep, text, options, [t.index for t in sweep.tasks], env)
    except LedgerError:
        shutil.rmtree(sweep.dir)  # refused: no sweep that was never queued
        raise
    typer.echo(f"sweep {sweep.sweep_id}: {len(sweep.tasks)} tasks submitted as SLURM job array {job}")
    if where["kind"] == FROM_ENV:
        typer.echo(f"every task writes to {target.display}")
    else:
        typer.echo(f"each task writes its own ledger file in {sweep.dir / 'db'}: SLURM tasks do not share "
                   f"a SQLite ledger{f' ({target.display})' if target.path else ''}")
    typer.echo(f"follow it: ledger sweep status {shlex.quote(str(sweep.dir))} --wait{_db_option(db)}")
    if sweep.merge_command():
        typer.echo(f"then: {sweep.merge_command()}")


def _sbatch(sweep, text: str, options: dict, indices: list[int], env: dict) -> str:
    """Write the script, submit it and record the submission; the job id."""
    from ledger.sweep import slurm

    path = sweep.dir / slurm.SCRIPT
    path.write_text(text)
    job = slurm.sbatch(path, env)
    sweep.submissions.append({"job_id": job, "tasks": indices, "options": options})
    sweep.save()
    return job


class StillQueued(LedgerError):
    """`status --wait` ran out of time: exit 124, as timeout(1) does."""

    exit_code = 124


@app.command("status")
def status_cmd(
    sweep_ref: SweepArg, root: DirOpt = Path("sweeps"), db: DbOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object: counts, next step, every task.")] = False,
    wait: Annotated[bool, typer.Option("--wait", help="Poll until no task is queued or running.")] = False,
    timeout: Annotated[float | None, typer.Option("--timeout", min=0, help="Seconds --wait waits at most "
                                                     "(then exit 124); unset: for ever.")] = None,
    interval: Annotated[float, typer.Option("--interval", min=0.1, help="Seconds between polls.")] = 10.0,
) -> None:
    """Which tasks are done, failed (and why), running, queued (and why) or missing.
    Exit 1 when a task failed or is missing; the last line names the next step."""
    from ledger.sweep.status import next_step, pending, summary, task_states, unfinished
    from ledger.sweep.store import open_sweep

    sweep = open_sweep(sweep_ref, root)
    states = task_states(sweep, db)
    deadline = None if timeout is None else monotonic() + timeout
    seen = summary(sweep, states)
    while wait and pending(states) and (deadline is None or monotonic() < deadline):
        sleep(interval if deadline is None else max(0.0, min(interval, deadline - monotonic())))
        states = task_states(sweep, db)
        if summary(sweep, states) != seen and pending(states):
            seen = summary(sweep, states)
            typer.echo(seen, err=True)  # progress on stderr: stdout stays the final answer
    timed_out = wait and bool(pending(states))
    _print_status(sweep, states, next_step(sweep, states, _db_option(db)), as_json, timed_out)
    if timed_out:
        raise StillQueued(f"still {pending(states)} task(s) queued or running after {timeout:g} s")
    if unfinished(states):
        raise typer.Exit(1)


def _print_status(sweep, states, next_command: str | None, as_json: bool, timed_out: bool) -> None:
    from ledger.output import format_table
    from ledger.sweep.status import as_json as status_json
    from ledger.sweep.status import summary

    if as_json:
        typer.echo(json.dumps(status_json(sweep, states, next_command, timed_out), indent=1))
        return
    typer.echo(summary(sweep, states))
    typer.echo(format_table(["task", "cell", "state", "rows", "detail"],
                            [[s.index, s.label, s.shown_state(), s.rows, s.detail] for s in states]), nl=False)
    if next_command:
        typer.echo(f"next: {next_command}")


@app.command("cancel")
def cancel_cmd(sweep_ref: SweepArg, root: DirOpt = Path("sweeps")) -> None:
    """scancel the sweep's tasks still queued or running; `resume` runs them again."""
    from ledger.sweep import slurm
    from ledger.sweep.store import open_sweep

    sweep = open_sweep(sweep_ref, root)
    if sweep.mode != "slurm":
        raise LedgerError(f"sweep {sweep.sweep_id} runs here, not on SLURM: stop its `ledger sweep run` (Ctrl-C)")
    live = slurm.queue([s["job_id"] for s in sweep.submissions])
    jobs = sorted({job for job, _ in live}, key=lambda j: (len(j), j))
    if not jobs:
        typer.echo(f"sweep {sweep.sweep_id}: no task queued or running, nothing to cancel")
        return
    slurm.cancel(jobs)
    stamp = now_timestamp()
    for submission in sweep.submissions:
        if submission["job_id"] in jobs:
            submission["cancelled"] = stamp
    sweep.save()
    typer.echo(f"sweep {sweep.sweep_id}: cancelled SLURM job array{'s' if len(jobs) > 1 else ''} "
               f"{', '.join(jobs)} ({len(live)} task(s) queued or running)")
    typer.echo(f"run them again: ledger sweep resume {shlex.quote(str(sweep.dir))}")


@app.command("resume")
def resume_cmd(
    sweep_ref: SweepArg, root: DirOpt = Path("sweeps"), db: DbOpt = None,
    jobs: Annotated[int, typer.Option("-j", "--jobs", min=1, help="Tasks at once (a local sweep).")] = 1,
    partition: PartitionOpt = None, time: TimeOpt = None, cpus_per_task: CpusOpt = None, mem: MemOpt = None,
    gpus: GpusOpt = None, account: AccountOpt = None, qos: QosOpt = None, constraint: ConstraintOpt = None,
    max_parallel: MaxParallelOpt = None, sbatch_arg: SbatchArgOpt = None,
) -> None:
    """Run again only the failed and missing tasks: run here, or resubmitted, with the
    sbatch options given here changed (--sbatch-arg replaces the earlier ones)."""
    from ledger.storage.url import resolve
    from ledger.sweep import local, slurm
    from ledger.sweep.status import FAILED, MISSING, task_states
    from ledger.sweep.store import FROM_ENV, open_sweep

    sweep = open_sweep(sweep_ref, root)
    given = _sbatch_options(partition=partition, time=time, cpus_per_task=cpus_per_task, mem=mem, gpus=gpus,
                            account=account, qos=qos, constraint=constraint, max_parallel=max_parallel,
                            sbatch_args=sbatch_arg)
    if given and sweep.mode != "slurm":
        raise LedgerError(f"sweep {sweep.sweep_id} runs here: --{next(iter(given)).replace('_', '-')} is for SLURM sweeps")
    options = {**sweep.slurm, **given}
    if sweep.mode == "slurm":
        slurm.script(sweep, options)  # a bad option (given, or hand-edited in sweep.json) is refused before SLURM is asked
    again = [s.index for s in task_states(sweep, db) if s.state in (FAILED, MISSING)]
    if not again:
        typer.echo(f"sweep {sweep.sweep_id}: nothing to resume")
        return
    if sweep.mode == "local":
        typer.echo(f"sweep {sweep.sweep_id}: running tasks {', '.join(map(str, again))} again")
        target = resolve(db) if db is not None else None
        _finish(sweep, local.run_tasks(sweep, again, jobs, _report(sweep), _task_env(target) if target else None))
        return
    target, where, env = _tasks_ledger(db)
    if sweep.db["kind"] == FROM_ENV and where["kind"] != FROM_ENV:
        raise LedgerError(f"sweep {sweep.sweep_id}'s tasks write to a server ledger: give it with --db or LEDGER_DB")
    text = slurm.script(sweep, options, again)
    sweep.slurm = options
    job = _sbatch(sweep, text, options, again, env)
    typer.echo(f"sweep {sweep.sweep_id}: tasks {', '.join(map(str, again))} resubmitted as SLURM job array {job}")
    typer.echo(f"follow it: ledger sweep status {shlex.quote(str(sweep.dir))} --wait{_db_option(db)}")


@app.command("task", hidden=True)
def task_cmd(sweep_dir: Path, index: int) -> None:
    """One task of a sweep: what a job array task (or `run`) executes."""
    from ledger import command
    from ledger.cli.probe import show
    from ledger.probes.host import SWEEP_ID_ENV, SWEEP_TASK_ENV
    from ledger.sweep.spec import probe_options
    from ledger.sweep.store import open_sweep

    sweep = open_sweep(str(sweep_dir))
    if not 0 <= index < len(sweep.tasks):
        raise LedgerError(f"sweep {sweep.sweep_id} has tasks 0 to {len(sweep.tasks) - 1}, not {index}")
    os.environ[SWEEP_ID_ENV], os.environ[SWEEP_TASK_ENV] = sweep.sweep_id, str(index)
    options = probe_options(sweep.spec, sweep.tasks[index], sweep.cache_dir(index))
    options["transforms"] = ",".join(options["transforms"])
    show(command.probe(sweep.task_db(index), **options, tag=f"sweep {sweep.sweep_id} task {index}"))
