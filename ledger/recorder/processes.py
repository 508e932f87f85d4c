"""Each recorded process's wall time, from its spool lines: a run's time (`ledger runs`).

A recorded process says when it started (its ``started`` line: its interpreter's start,
or its fork) and, at a normal exit, when it ended (an ``exit`` line, or the ``at`` of the
command's own goodbye). A process that says nothing at the end (killed, or a
multiprocessing worker leaving by os._exit) is seen gone by the ingester, which polls
this host's processes while the command runs (``gone``: within POLL_S); one whose end is
never seen (the ingester went first, a process on another node) ends at its spool file's
last write (``last seen``: a lower bound). Each process becomes one row of
recorded_processes once its end is known, or when the run is taken in for the last time.
"""

from __future__ import annotations

import os
import socket
import time
from datetime import datetime, timezone

from ledger.record import ENDED_EXIT, ENDED_GONE, ENDED_LAST_SEEN, PROCESS_FIELDS
from ledger.recorder import spool

POLL_S = 1.0  # how often the ingester looks for this host's processes that ended without a word


def iso(t: float) -> str:
    """A process's start or end: aware UTC with microseconds (a run's span is short)."""
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="microseconds")


class Processes:
    """The processes of one run dir, as their lines come in (one spool file each)."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.known: dict[str, dict] = {}  # spool file -> host, pid, started, ended, ended_by
        self.written: set[str] = set()
        self._polled = 0.0

    def take(self, path: str, line: dict) -> None:
        """A spool line of the process writing ``path`` (other kinds are not its start or end)."""
        kind, pid = line.get("_line"), line.get("pid")
        if not isinstance(pid, int) or kind not in (spool.STARTED, spool.EXIT, spool.BYE):
            return
        p = self.known.get(path)
        if kind == spool.STARTED:
            started, host = line.get("started"), line.get("host")
            if isinstance(started, (int, float)) and p is None:
                self.known[path] = {"host": host if isinstance(host, str) else _host_of(path, pid), "pid": pid,
                                    "started": float(started), "ended": None, "ended_by": None}
        elif p is not None and isinstance(line.get("at"), (int, float)) and p["ended_by"] != ENDED_EXIT:
            p["ended"], p["ended_by"] = float(line["at"]), ENDED_EXIT

    def _mine(self):
        host = socket.gethostname()
        return [p for p in self.known.values() if p["host"] == host and p["ended_by"] is None]

    def gone(self, pid: int, at: float) -> None:
        """This host's ``pid`` was seen gone at ``at`` (its own exit line, if it comes, wins)."""
        for p in self._mine():
            if p["pid"] == pid:
                p["ended"], p["ended_by"] = at, ENDED_GONE

    def poll(self, alive) -> None:
        """Every POLL_S: this host's processes not known ended, looked up (``alive(pid)``)."""
        now = time.monotonic()
        if now - self._polled < POLL_S:
            return
        self._polled = now
        for p in self._mine():
            if not alive(p["pid"]):
                p["ended"], p["ended_by"] = time.time(), ENDED_GONE

    def close(self) -> None:
        """The run is taken in for the last time: an end never seen is the last write."""
        for path, p in self.known.items():
            if p["ended_by"] is None:
                try:
                    p["ended"] = os.stat(path).st_mtime
                except OSError:
                    p["ended"] = p["started"]
                p["ended_by"] = ENDED_LAST_SEEN

    def ended(self) -> list[dict]:
        """The rows of processes whose end is known and that are not written yet."""
        out = []
        for path, p in self.known.items():
            if p["ended_by"] is None or path in self.written:
                continue
            ended = max(p["ended"], p["started"])  # a clock stepped back is no negative life
            out.append({"run_id": self.run_id, "hostname": p["host"], "pid": p["pid"], "started": iso(p["started"]),
                        "ended": iso(ended), "wall_s": ended - p["started"], "ended_by": p["ended_by"],
                        "_path": path})
        return out

    def mark_written(self, rows: list[dict]) -> None:
        self.written.update(r["_path"] for r in rows)


def _host_of(path: str, pid: int) -> str:
    """The host in a spool file's name (``<host>-<pid>.jsonl``, as spool.process_file names it)."""
    name = os.path.basename(path)
    tail = f"-{pid}{spool.SUFFIX}"
    return name[: -len(tail)] if name.endswith(tail) else socket.gethostname()


def insert(conn, rows: list[dict]) -> None:
    """Rows of recorded_processes; one the ledger holds already (its run, host and pid) is
    left as it is: taking a spool in twice adds nothing."""
    if not rows:
        return
    import sqlalchemy as sa

    cols = list(PROCESS_FIELDS)
    rows = [{c: r[c] for c in cols} for r in rows]
    conn.execute(sa.text(f"INSERT INTO recorded_processes ({', '.join(cols)}) VALUES"
                         f" ({', '.join(':' + c for c in cols)}) ON CONFLICT (run_id, hostname, pid) DO NOTHING"),
                 rows)
