"""``python -m probes.child``: run transforms in this (fresh) process.

Reads one JSON payload on stdin (see ``orchestrate._payload``), streams JSON lines on
the original stdout: ``context`` (the fields a parent needs to write a failed record
if this process dies), ``start`` (a transform began), ``progress``, ``record``, and
``end``. Anything else the objective or JAX prints goes to stderr: the protocol fd is
private, so a stray print cannot corrupt it.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # fd 1 (and so print()) now goes to stderr

    def send(kind: str, **payload) -> None:
        proto.write(json.dumps(dict(payload, type=kind), default=str) + "\n")
        proto.flush()

    payload = json.loads(sys.stdin.read())
    from probes.measure import Session

    try:
        session = Session(
            objective=payload["objective"], cell=payload["cell"],
            cache_dir=payload.get("cache_dir"), tag=payload.get("tag"),
            run_id=payload["run_id"], phase=payload.get("phase"),
            steady_calls=payload["steady_calls"],
            emit_progress=lambda ev: send("progress", event=ev),
        )
        send("context", fields=session._static_fields(payload["transforms"][0]))
    except Exception as err:  # setup failed: the parent records each transform as failed
        send("fatal", error=f"{type(err).__name__}: {err}")
        return 3
    for t in payload["transforms"]:
        send("start", transform=t)
        send("record", record=session.measure(t))
    send("end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
