"""What a recorded process is told: one environment variable, read once, at jax import.

`ledger record` (ledger/recorder/launch.py) writes it; every Python process the command
starts inherits it (a spawned multiprocessing child, each process of a jax.distributed
job, a console script), so each records into the same ledger under the same run id.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

ENV = "LEDGER_RECORD"
# Where the ledger's own code lives, for a program whose Python path lacks it: appended
# (never prepended) at jax import, so the program's own packages still win.
ENV_PATH = "LEDGER_RECORD_PATH"
CELL = ("dataset_class", "model_type", "instrument")


@dataclass
class RecordConfig:
    db: str | None  # the ledger's URL or absolute path, resolved by the launcher
    run_id: str
    tag: str | None = None
    command: str | None = None
    cell: dict = field(default_factory=dict)  # dataset_class, model_type, instrument

    def to_env(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_env(cls, environ=os.environ) -> RecordConfig | None:
        text = environ.get(ENV)
        if not text:
            return None
        data = json.loads(text)
        return cls(db=data.get("db"), run_id=str(data["run_id"]), tag=data.get("tag"),
                   command=data.get("command"), cell={k: data.get("cell", {}).get(k) for k in CELL})
