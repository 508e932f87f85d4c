"""What a recorded process is told: the run's spool dir, in one environment variable.

`ledger record` (ledger/recorder/launch.py) writes the run into its marker in that
dir (ledger/recorder/spool.py); every Python process the command starts inherits the variable (a forked or
spawned multiprocessing child, each process of a jax.distributed job, a console
script), so each spools into the same run. Nothing about the ledger itself travels:
no URL, so no password, in any process's environment; the command line stays in the
file, so an argv as long as the system takes is not copied into the environment.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

from ledger.record import CELL_LABELS

ENV = "LEDGER_RECORD"
# Where the ledger's own code lives, for a program whose Python path lacks it: appended
# (never prepended) at jax import, so the program's own packages still win.
ENV_PATH = "LEDGER_RECORD_PATH"
# The directory of the recorder's sitecustomize, put first on the command's PYTHONPATH.
SITE_DIR = os.path.join(os.path.dirname(os.path.realpath(__file__)), "site")
CELL = CELL_LABELS
COMMAND_CAP = 2000  # characters of the command line kept on each row


def command_text(argv: list[str]) -> str:
    """The command line as each row keeps it: quoted as a shell would, an argument that
    is not UTF-8 (Python carries its bytes as lone surrogates, which no ledger stores)
    with those bytes escaped (\\xff), and cut at COMMAND_CAP characters."""
    import shlex

    text = shlex.join(os.fsencode(a).decode("utf-8", "backslashreplace") for a in argv)
    if len(text) <= COMMAND_CAP:
        return text
    return f"{text[:COMMAND_CAP]}... ({len(text)} characters)"


@dataclass
class RecordConfig:
    run_dir: str  # the run's spool dir (ledger/recorder/spool.py); "" until create()
    run_id: str
    tag: str | None = None
    command: str | None = None
    cell: dict = field(default_factory=dict)  # dataset_class, model_type, instrument
    main_pid: int | None = None  # the command's own process: it waits for its rows at exit
    host: str | None = None  # where main_pid runs

    def create(self, target) -> int:
        """Make the run's spool dir for the ledger ``target``, its marker naming that
        ledger: the descriptor of the run's lock, held (spool.create_run())."""
        from ledger.recorder import spool

        run = {k: v for k, v in asdict(self).items() if k != "run_dir"}
        run |= {"ledger": spool.ledger_identity(target), "own_root": spool.own_root()}
        self.run_dir, lock = spool.create_run(spool.spool_root(target), run)
        return lock

    @classmethod
    def from_env(cls, environ=os.environ) -> RecordConfig | None:
        from ledger.recorder.spool import read_run

        run_dir = environ.get(ENV)
        if not run_dir:
            return None
        data = read_run(run_dir)
        return cls(run_dir=run_dir, run_id=str(data["run_id"]), tag=data.get("tag"),
                   command=data.get("command"), main_pid=data.get("main_pid"),
                   cell={k: (data.get("cell") or {}).get(k) for k in CELL})
