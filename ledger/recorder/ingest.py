"""Spooled compiles into the ledger: while the program runs, after it dies, or later.

Three callers, one mechanism (RunIngester):
- the ingester process that ``ledger record`` starts beside the command, and
  ``ledger.recording()`` when its block ends (ledger/recorder/ingester.py);
- the commands that write to a ledger, as an explicit step of their own (ledger/command.py):
  spooled rows that nobody took in (the ledger was locked past the program's end, the
  ingester was killed) are taken in then, and said so (take_in_kept()): only runs whose
  marker names this very ledger, and only while no ingester holds them; a command that
  reads waits, briefly, for a run of its ledger that is still draining (wait_for_draining()).
Opening a ledger takes nothing in: ledger/storage/ knows nothing of the recorder.

A spool line that is not one the recorder wrote (a hand edit, a disk's garbage) is
skipped; once the run is in, its file is set aside (renamed, kept) and named in one
line; the other lines, and the other files, go in.

A row goes in with its record_key (run, host, pid and the process's compile count are
part of it), ON CONFLICT DO NOTHING: a spool file read twice adds nothing twice. A
record waits for its amend line (JAX's own duration) before it goes in, so that a row
is written in one form only.
"""

from __future__ import annotations

import os
import socket
import sys
import time

from ledger.recorder import spool
from ledger.recorder.hook import warn_once
from ledger.recorder.processes import Processes

HOLD_S = 10.0  # a record whose duration event never came goes in with the hook's clock


class RunIngester:
    """One run dir's spool files, taken into one ledger."""

    def __init__(self, opener, run_dir: str, run: dict):
        # opener: () -> an open Ledger; called at the first write and again after a
        # failure to open (a ledger that was not there, or not reachable, yet).
        # run: the run's marker (spool.read_run())
        self.opener, self.run_dir, self.run = opener, run_dir, run
        self.ledger = None
        self.offsets: dict[str, int] = {}
        self.held: dict[tuple[str, int], tuple[float, dict]] = {}  # (file, index) -> record
        self.amends: dict[tuple[str, int], float] = {}
        self.written = self.invalid = 0
        self.states: dict[str, int] = {}
        # here, not at the top: every reading command imports this module to wait for a
        # draining run, and tally imports ledger.probes (JAX's option names)
        from ledger.recorder.tally import CacheTally

        self.cache = CacheTally()  # what the cache did with them, for the closing line
        self.unrecorded: list[str] = []
        self.byes: list[int] = []
        self.bad: dict[str, str] = {}  # spool file -> why its first bad line is not the recorder's
        self.error: BaseException | None = None
        self.processes = Processes(run.get("run_id") or os.path.basename(run_dir))  # each process's wall time

    # -- reading -----------------------------------------------------------------------
    def read(self) -> None:
        for path in spool.spool_files(self.run_dir):
            start = self.offsets.get(path, 0)
            try:
                with open(path, "rb") as f:
                    f.seek(start)
                    data = f.read()
            except OSError:
                continue
            lines, used = spool.parse_lines(data)
            self.offsets[path] = start + used
            for line in lines:
                why = spool.line_problem(line, self.run["run_id"])
                if why is None:
                    self._take(path, line)
                else:
                    self.bad.setdefault(path, why)

    def _take(self, path: str, line: dict) -> None:
        kind = line.get("_line")
        self.processes.take(path, line)
        if kind is None:
            self.held[(path, line.get("compile_index"))] = (time.monotonic(), line)
        elif kind == spool.AMEND:
            self.amends[(path, line.get("index"))] = line.get("backend_compile_s")
        elif kind == spool.UNRECORDED:
            self.unrecorded.append(f"{line.get('why')} (pid {line.get('pid')})")
        elif kind == spool.BYE:
            self.byes.append(line.get("pid"))

    def ready(self, final: bool) -> list[tuple]:
        """The held records that are complete, (key, record): amended, held too long,
        or all of them (final)."""
        now, out = time.monotonic(), []
        for key, (since, rec) in list(self.held.items()):
            backend = self.amends.pop(key, None)
            if backend is None and not final and now - since < HOLD_S:
                continue
            del self.held[key]
            if backend is not None:
                rec["compile_s"] = rec["backend_compile_s"] = backend
            out.append((key, rec))
        return out

    # -- writing -----------------------------------------------------------------------
    def step(self, final: bool = False) -> bool:
        """Read what is new and write what is ready; False while the ledger refuses
        (the records stay held, to be tried again)."""
        self.read()
        records = self.ready(final)
        ended = self.processes.ended()
        if not records and not ended:
            return True
        rows = self._rows([rec for _, rec in records])
        try:
            self._insert(rows, ended)
        except Exception as err:  # noqa: BLE001 - kept in the spool, said once
            self.error = err
            for key, rec in records:  # held again, complete: tried first next time
                self.held[key] = (float("-inf"), rec)
            return False
        self.error = None
        self.processes.mark_written(ended)
        self.written += len(rows)
        for row in rows:
            self.states[row.get("cache_state")] = self.states.get(row.get("cache_state"), 0) + 1
            self.cache.add(row)
        return True

    def _rows(self, records: list[dict]) -> list[dict]:
        from ledger.probes import host
        from ledger.storage.writer import measured_row

        state, rows = host.host_state(), []
        for rec in records:
            try:
                rows.append(measured_row(finish(rec, state)))
            except Exception as err:  # noqa: BLE001 - one bad record is not the run's loss
                self.invalid += 1
                warn_once("a compile was not recorded", err)
        return rows

    def _insert(self, rows: list[dict], processes: list[dict]) -> None:
        from ledger.recorder.processes import insert
        from ledger.storage.bulk import insert_new
        from ledger.storage.models import compile_records

        if rows or processes:
            if self.ledger is None:
                self.ledger = self.opener()
            with self.ledger.engine.begin() as conn:
                insert_new(conn, compile_records, rows)
                insert(conn, processes)

    def last_step(self) -> bool:
        """The run's last take: every process's end as far as known (ledger/recorder/processes.py)."""
        self.processes.close()
        return self.step(final=True)

    @property
    def pending(self) -> int:
        return len(self.held)

    def remove_if_done(self) -> bool:
        """The run dir goes once every record in it is in the ledger, and every process's
        time (a file with a bad line stays, set aside)."""
        if self.held or self.processes.ended():
            return False
        spool.remove_run(self.run_dir, set(self.bad), own=bool(self.run.get("own_root")))
        return True

    def set_aside_lines(self) -> list[str]:
        """One line per spool file set aside, naming it and why."""
        return [f"set aside {path}{spool.SET_ASIDE}: a line in it is not the recorder's ({why}); its other lines"
                " were taken in" for path, why in self.bad.items()]

    # -- what is said ------------------------------------------------------------------
    def summary(self, display: str, run_id: str) -> str:
        parts = []
        if self.written:
            states = ", ".join(f"{n} {s}" for s, n in sorted(self.states.items()))
            parts.append(f"{self.written} compiles recorded into {display} ({states}), run {run_id[:12]}")
            said = self.cache.line()
            if said:
                parts.append(said)
        if self.held:
            why = f"{type(self.error).__name__}: {self.error}" if self.error is not None else "not written yet"
            parts.append(f"{len(self.held)} compiles kept in {self.run_dir} ({_one_line(why)}); "
                         "the next ledger command that writes to this ledger takes them in")
        if self.unrecorded:
            more = f" (and {len(self.unrecorded) - 1} more)" if len(self.unrecorded) > 1 else ""
            parts.append(f"not recorded: {self.unrecorded[0]}{more}")
        if self.invalid:
            parts.append(f"{self.invalid} compiles refused by the record contract")
        if self.bad:
            path, why = next(iter(self.bad.items()))
            more = f" (and {len(self.bad) - 1} more)" if len(self.bad) > 1 else ""
            parts.append(f"set aside {path}{spool.SET_ASIDE}{more}: a line in it is not the recorder's ({why})")
        return ("ledger record: " + "; ".join(parts)) if parts else ""


def finish(record: dict, state: dict) -> dict:
    """A spooled record made a full record: the host state the hook left to the
    ingester (sampled once a batch, by the same host), and provenance."""
    from ledger.probes import host
    from ledger.record import PROBE_RECORD_FIELDS

    rec = dict(record)
    prov = rec.pop("_provenance", {}) or {}
    fields = set(PROBE_RECORD_FIELDS)
    for k, v in state.items():
        if k in fields and rec.get(k) is None:
            rec[k] = v
    rec["provenance"] = host.dumps(prov)
    return rec


def _one_line(text: str) -> str:
    from ledger.errors import one_line
    from ledger.storage.url import redact

    first = str(text).splitlines()[0] if str(text) else ""
    return one_line(redact(first))[:300]


def take_in_kept(ledger) -> None:
    """A writing command's step before it writes: take in the runs of this ledger that
    nobody is taking in (their ingester is gone), and say so in one line each. A run
    of another ledger, or a folder that is no run, is not read."""
    root = spool.spool_root(ledger.target)
    for run_dir, run in spool.runs(root, spool.ledger_identity(ledger.target)):
        lock = spool.take_lock(run_dir)
        if lock is None:
            continue  # its ingester is alive and at it (or another command is)
        try:
            ing = RunIngester(lambda: ledger, run_dir, run)
            if not ing.last_step():
                continue
            if ing.written:
                print(f"ledger: took in {ing.written} compiles kept from `ledger record` run "
                      f"{os.path.basename(run_dir)[:12]}", file=sys.stderr, flush=True)
            if not spooling_alive(run_dir):  # a worker of this host may write more into it
                for line in ing.set_aside_lines():
                    print(f"ledger: {line}", file=sys.stderr, flush=True)
                ing.remove_if_done()
        finally:
            os.close(lock)


def wait_for_draining(target, timeout: float = 10.0) -> None:
    """Before a command reads: a run whose command has just ended (however: a SIGKILL
    too) may still be draining into this ledger; wait for it, briefly, so that the rows
    of a command that just returned are there for the next one."""
    root = spool.spool_root(target)
    if not os.path.isdir(root):
        return
    deadline = time.monotonic() + timeout
    for run_dir, run in spool.runs(root, spool.ledger_identity(target)):
        if run.get("host") != socket.gethostname() or not run.get("main_pid"):
            continue  # another node's run: its command's life cannot be seen from here
        while (not pid_alive(run["main_pid"]) and spool.ingester_alive(run_dir)
               and time.monotonic() < deadline):
            time.sleep(0.01)


def spooling_alive(run_dir: str) -> bool:
    """Whether a process of this host that spools into the run still lives (a worker
    that outlived the command): its rows may still come."""
    host = socket.gethostname().replace(os.sep, "_") + "-"
    for path in spool.spool_files(run_dir):
        name = os.path.basename(path)[: -len(spool.SUFFIX)]
        if name.startswith(host) and name[len(host):].isdigit() and pid_alive(int(name[len(host):])):
            return True
    return False


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X")
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False
