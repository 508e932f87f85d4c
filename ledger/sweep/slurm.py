"""A sweep as one SLURM job array: the script, `sbatch`, `squeue` and `scancel`.

We write the script and let the scheduler schedule; nothing here waits on jobs.

Every value that reaches the script is checked here, where the script is written,
whatever it came from (a file name, an option, sweep.json):
- an #SBATCH value is read by sbatch, never by bash, so it cannot be shell-quoted: it
  must be one token of a safe charset (a blank would start another sbatch option, a
  line break another line of the script), else it is refused in one line;
- a shell word (the `ledger` path, the sweep directory) is shlex-quoted;
- a setup line is the user's own shell, written as it is, but refused unless it is one
  complete line on its own (`bash -n`).
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from ledger.errors import LedgerError
from ledger.sweep.spec import check_name, check_setup, shown
from ledger.sweep.store import Sweep

SCRIPT = "sweep.sbatch"
# squeue's states of an array task that has not finished
QUEUED, RUNNING = "queued", "running"
_QUEUE_STATES = {"PENDING": QUEUED, "CONFIGURING": RUNNING, "RUNNING": RUNNING, "COMPLETING": RUNNING,
                 "SUSPENDED": RUNNING, "REQUEUED": QUEUED, "RESIZING": RUNNING}

# The sbatch options `submit` and `resume` take, in the order the script writes them.
# cpus_per_task and max_parallel are whole numbers (WHOLE_NUMBERS); the rest are text.
RESOURCES = ("partition", "time", "cpus_per_task", "mem", "gpus", "account", "qos", "constraint")
# One #SBATCH token: letters, digits and punctuation sbatch reads literally ('&|[]*()!'
# for --constraint expressions). No blank, quote, backslash, '#' or line break.
_VALUE = re.compile(r"[A-Za-z0-9_.,:=+/@&|*()\[\]!-]{1,256}")
# A path in an #SBATCH line (--output): no '%' either, which sbatch expands.
_PATH = re.compile(r"/[A-Za-z0-9_.,:=+/@-]{0,999}")
WHOLE_NUMBERS = ("cpus_per_task", "max_parallel")
_VALUE_CHARS = "letters, digits and _ . , : = + / @ & | * ( ) [ ] ! -"
# What the script sets itself: a --sbatch-arg may not change these.
_OURS = ("array", "output", "error", "wrap", "job-name", "parsable")
_OURS_SHORT = ("-a", "-o", "-e", "-J")


def sbatch_value(option: str, value) -> str:
    if option in WHOLE_NUMBERS and not (type(value) is int and 1 <= value <= 100_000):
        raise LedgerError(f"--{option.replace('_', '-')} {shown(value)}: a whole number from 1 to 100000")
    text = str(value)
    if not _VALUE.fullmatch(text):
        raise LedgerError(f"--{option.replace('_', '-')} {shown(text)}: not a safe #SBATCH value "
                          f"({_VALUE_CHARS}; at most 256)")
    return text


def sbatch_arg(token: str) -> str:
    """A free-form --sbatch-arg: one option token, e.g. --exclusive or --nodelist=n01."""
    if not (isinstance(token, str) and token.startswith("-") and _VALUE.fullmatch(token)):
        raise LedgerError(f"--sbatch-arg {shown(token)}: one sbatch option token, like --exclusive or "
                          f"--nodelist=node01 ({_VALUE_CHARS}; at most 256)")
    name = token[2:].split("=", 1)[0] if token.startswith("--") else None
    # sbatch takes an unambiguous prefix of a long option (--arr for --array)
    if (name is not None and any(o.startswith(name) for o in _OURS)) or token[:2] in _OURS_SHORT:
        raise LedgerError(f"--sbatch-arg {shown(token)}: the sweep sets --{', --'.join(_OURS)} itself")
    return token


def _tokens(value) -> list:
    if not isinstance(value, list):  # sweep.json read back: a list, or nothing
        raise LedgerError(f"--sbatch-arg {shown(value)}: expected a list of tokens")
    return value


def _path(what: str, path: Path) -> str:
    text = str(path)
    if not _PATH.fullmatch(text):
        raise LedgerError(f"{what} {shown(text)}: an #SBATCH path must be absolute, of letters, digits and "
                          f"_ . , : = + / @ - (no blank or %), at most 1000")
    return text


def _one_line(what: str, value: str) -> str:
    if "\x00" in value or value.splitlines() != [value]:
        raise LedgerError(f"{what} {shown(value)}: holds a line break")
    return value


def _shell_word(what: str, value: str) -> str:
    return shlex.quote(_one_line(what, value))


def check_setup_line(number: int, line: str) -> None:
    """A setup line must parse on its own: an open quote, `&&`, `if` or here-document
    would run into the lines after it."""
    done = subprocess.run(["bash", "-n"], check=False, input=line, capture_output=True, text=True)
    if done.returncode != 0 or done.stderr.strip():
        problem = re.sub(r"^bash: (line \d+: )?", "", (done.stderr.strip().splitlines() or ["not complete"])[0])
        raise LedgerError(f"setup line {number} {shown(line)}: not one complete shell line ({problem})")


def array_spec(indices: list[int], max_parallel: int | None) -> str:
    """'0-3' for a run, '1,3' otherwise; '%K' caps how many run at once."""
    if not indices:
        raise ValueError("no tasks")
    runs, start = [], indices[0]
    for prev, cur in zip(indices, [*indices[1:], None]):
        if cur is not None and cur == prev + 1:
            continue  # the run goes on
        runs.append(f"{start}-{prev}" if prev != start else f"{start}")
        start = cur
    return ",".join(runs) + (f"%{max_parallel}" if max_parallel else "")


def ledger_command() -> str:
    """The `ledger` a task runs: the one beside this Python (the job sees the same
    filesystem), else the one on PATH."""
    beside = Path(sys.executable).with_name("ledger")
    return str(beside) if beside.exists() else (shutil.which("ledger") or "ledger")


def directives(sweep: Sweep, indices: list[int], options: dict) -> list[str]:
    """The #SBATCH lines. The user's --sbatch-args come before the sweep's own lines,
    so that where sbatch takes the last of an option, the sweep's stands."""
    resources = [f"#SBATCH --{k.replace('_', '-')}={sbatch_value(k, options[k])}"
                 for k in RESOURCES if options.get(k) is not None]
    extra = [f"#SBATCH {sbatch_arg(t)}" for t in _tokens(options.get("sbatch_args") or [])]
    name = sbatch_value("job-name", f"ledger-{check_name(sweep.spec.name)}")
    cap = options.get("max_parallel")
    if cap is not None:
        sbatch_value("max_parallel", cap)
    return [*resources, *extra, f"#SBATCH --job-name={name}",
            f"#SBATCH --array={array_spec(indices, cap)}",
            f"#SBATCH --output={_path('sweep directory', sweep.dir)}/logs/%A_%a.out"]


def script(sweep: Sweep, options: dict, indices: list[int] | None = None) -> str:
    """The job array script of `indices` (all tasks by default) under `options`
    (RESOURCES, max_parallel, sbatch_args)."""
    indices = [t.index for t in sweep.tasks] if indices is None else indices
    _one_line("sweep id", sweep.sweep_id)
    setup = check_setup(list(sweep.spec.setup))
    for number, line in enumerate(setup, 1):
        check_setup_line(number, line)
    logs = _shell_word("sweep directory", str(sweep.dir / "logs"))
    lines = ["#!/bin/bash",
             f"# ledger sweep {sweep.sweep_id}: one array task per task of sweep.json.",
             "# No password here: a task writes to its own file in db/, or to the ledger that",
             "# LEDGER_DB names in the environment sbatch hands on from the submitting shell.",
             *directives(sweep, indices, options),
             "# the task's exit code beside its log, for `ledger sweep status` (no accounting needed)",
             f"LEDGER_SWEEP_LOGS={logs}",
             """trap 'echo "$?" >"$LEDGER_SWEEP_LOGS/${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}.exit"' EXIT"""]
    if setup:
        lines.append("# the spec's setup lines, as written; one that fails ends the task with its status")
        for line in setup:
            lines += [line, 'LEDGER_SETUP_STATUS=$?; [ "$LEDGER_SETUP_STATUS" -eq 0 ] || exit "$LEDGER_SETUP_STATUS"']
    task = (f"{_shell_word('ledger command', ledger_command())} sweep task "
            f"{_shell_word('sweep directory', str(sweep.dir))} \"$SLURM_ARRAY_TASK_ID\"")
    lines += [task, ""]
    return "\n".join(lines)


def require_sbatch() -> None:
    if shutil.which("sbatch") is None:
        raise LedgerError("sbatch not found: this machine has no SLURM client (ledger sweep run runs a sweep here)")


def sbatch(script_path: Path, env: dict | None = None) -> str:
    """Submit; the array's job id. `env`: the job's environment (sbatch hands it on)."""
    require_sbatch()
    done = subprocess.run(["sbatch", "--parsable", str(script_path)], check=False, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise LedgerError(f"sbatch failed: {((done.stderr or done.stdout).strip().splitlines() or ['?'])[-1]}")
    return done.stdout.strip().split(";")[0]


SQUEUE_TIMEOUT_S = 60


def queue(job_ids: list[str]) -> dict[tuple[str, int], tuple[str, str]]:
    """{(job id, task index): (queued | running, squeue's reason)} for the array tasks
    still in the queue; empty where there is no squeue (a finished task leaves it)."""
    if not job_ids or shutil.which("squeue") is None:
        return {}
    try:  # squeue retries a controller that is down for as long as it likes: not ours to wait out
        done = subprocess.run(["squeue", "-h", "-r", "-j", ",".join(job_ids), "-o", "%i|%T|%r"],
                              check=False, capture_output=True, text=True, timeout=SQUEUE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise LedgerError(f"squeue did not answer in {SQUEUE_TIMEOUT_S} s: is SLURM's controller up?") from None
    out = {}
    for line in done.stdout.splitlines():
        ident, state, reason = (line.split("|", 2) + ["", ""])[:3]
        job, _, task = ident.partition("_")
        if task.isdigit() and state in _QUEUE_STATES:
            out[(job, int(task))] = (_QUEUE_STATES[state], "" if reason == "None" else reason)
    return out


def cancel(job_ids: list[str]) -> None:
    if shutil.which("scancel") is None:
        raise LedgerError("scancel not found: this machine has no SLURM client")
    done = subprocess.run(["scancel", *job_ids], check=False, capture_output=True, text=True)
    if done.returncode != 0:
        raise LedgerError(f"scancel failed: {((done.stderr or done.stdout).strip().splitlines() or ['?'])[-1]}")
