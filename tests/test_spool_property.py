"""Random interleavings over two ledgers that share one LEDGER_SPOOL_DIR, a folder that also
holds a user's own files and a third ledger's run: `ledger record` runs start (the launcher's
own code: RecordConfig.create), spool compiles, end cleanly (their ingester drains them) or
are killed (their ingester dies, part-drained or not), get a line the recorder never wrote,
while the ledgers are locked and unlocked, checked, merged into and pruned (a JAX cache dir
each, entries written as JAX writes them).

Whatever the order: no file or folder of the user's (or of the third ledger's run) is
touched; once everything is taken in, every compile spooled for a ledger is a row of that
ledger, exactly once, and of no other; every entry a prune removed has its cache_prunes row,
and no entry that stayed has one. The ingester is its real class (ingest.RunIngester), in
this process: a process of its own would cost a second an example."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import tempfile
import time
import uuid
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import command
from ledger.record import blank_record, now_timestamp
from ledger.recorder import spool
from ledger.recorder.config import RecordConfig
from ledger.recorder.ingest import RunIngester
from ledger.storage.errors import as_ledger_error
from ledger.storage.open import open_ledger
from ledger.storage.url import resolve

from .conftest import examples, query
from .helpers import SETTINGS

MONTH_AGO = time.time() - 30 * 86400
DEAD_PID = 2**22 + 7  # above any pid_max Linux allows: the spooling process is gone


@pytest.fixture(scope="module")
def templates(tmp_path_factory) -> dict[str, Path]:
    """A ledger at head, and a merge source holding two probe rows: copied per example (a
    fresh ledger's fourteen revisions cost more than the whole example)."""
    root = tmp_path_factory.mktemp("templates")
    empty, source = root / "empty.db", root / "source.db"
    command.upgrade(str(empty))
    rows = [dict(blank_record(), transform="jit", objective="toy", status="ok", hardware="local_cpu",
                 hostname="node9", jax_version="0.10.2", mixed_precision=False, compile_s=1.5 + i,
                 cache_state="cold", cache_state_source="measured_events", run_id=f"s{i}",
                 timestamp="2026-07-01T10:00:00") for i in range(2)]
    (root / "rows.json").write_text(json.dumps(rows))
    command.import_json([root / "rows.json"], str(source))
    return {"empty": empty, "source": source}


@dataclass
class Run:
    ledger: int
    run_dir: str
    marker: dict
    lock: int | None  # the live ingester's lock; None once it ended or died
    pid: int
    spooled: int = 0

    def write(self, line: dict) -> None:
        with open(spool.process_file(self.run_dir, self.pid), "a", encoding="utf-8") as f:
            f.write(json.dumps(line, separators=(",", ":")) + "\n")

    def compile(self, amend: bool) -> tuple[str, int]:
        """One compile as the hook spools it (and, ``amend``, its duration line): its identity."""
        rec = dict(blank_record(), transform="recorded", status="ok", hardware="local_cpu",
                   hostname=socket.gethostname(), jax_version="0.10.2", mixed_precision=False,
                   run_id=self.marker["run_id"], pid=self.pid, compile_index=self.spooled, function="jit_f",
                   input_signature=f"f32[{self.spooled}] -> f32[]", timestamp=now_timestamp(), compile_s=0.02,
                   cache_state="cold", cache_state_source="measured_events")
        self.write(rec)
        if amend:
            self.write({"_line": spool.AMEND, "pid": self.pid, "index": self.spooled, "backend_compile_s": 0.01})
        self.spooled += 1
        return self.marker["run_id"], self.spooled - 1


@dataclass
class World:
    root: Path
    dbs: list[Path]
    caches: list[Path]
    source: Path
    runs: list[Run] = field(default_factory=list)
    made: list[set] = field(default_factory=lambda: [set(), set()])  # each ledger's spooled compiles
    locks: dict[int, sqlite3.Connection] = field(default_factory=dict)
    entries: list[Path] = field(default_factory=list)

    # -- a recorded program and its ingester ------------------------------------------------
    def start(self, i: int, n: int) -> None:
        config = RecordConfig(run_dir="", run_id=uuid.uuid4().hex, command="python fit.py", main_pid=DEAD_PID,
                              host=socket.gethostname())
        lock = config.create(resolve(str(self.dbs[i])))
        run = Run(i, config.run_dir, spool.read_run(config.run_dir), lock, DEAD_PID - len(self.runs))
        self.runs.append(run)
        self.spool_some(run, n)

    def spool_some(self, run: Run, n: int) -> None:
        if os.path.isdir(run.run_dir) and os.path.exists(os.path.join(run.run_dir, spool.MARKER)):
            for k in range(n):
                self.made[run.ledger].add(run.compile(amend=k % 2 == 0))

    def end(self, run: Run, killed: bool) -> None:
        """The ingester ends: it drains and removes the run, or it dies (a partial drain
        first, or none), leaving the rest kept for the next command that writes."""
        if run.lock is None:
            return
        db = str(self.dbs[run.ledger])
        ing = RunIngester(lambda: open_ledger(db, "write"), run.run_dir, run.marker)
        try:
            if not killed and ing.step(final=True):
                ing.remove_if_done()
            elif killed and run.spooled % 2:
                ing.step(final=False)  # the amended records went in before it died
        finally:
            if ing.ledger is not None:
                ing.ledger.close()
            os.close(run.lock)
            run.lock = None

    def corrupt(self, run: Run) -> None:
        if os.path.exists(os.path.join(run.run_dir, spool.MARKER)):
            run.write({"compile_index": [1]})  # one line the recorder never writes

    # -- the ledgers' other users ---------------------------------------------------------------
    def toggle_lock(self, i: int) -> None:
        if i in self.locks:
            self.locks.pop(i).execute("COMMIT")
            return
        con = sqlite3.connect(self.dbs[i], isolation_level=None, check_same_thread=False)
        con.execute("BEGIN EXCLUSIVE")
        self.locks[i] = con

    def entry(self, i: int) -> None:
        """JAX writes an entry into ledger i's cache dir (a month old: prunable)."""
        path = self.caches[i] / f"jit_f{len(self.entries)}-{uuid.uuid4().hex}{uuid.uuid4().hex}-cache"
        path.write_bytes(zlib.compress((2).to_bytes(4, "big") + os.urandom(64)))
        os.utime(path, (MONTH_AGO, MONTH_AGO))
        self.entries.append(path)

    def do(self, what: str, i: int) -> None:
        db = str(self.dbs[i])
        try:
            if what == "check":
                command.check(db=db)
            elif what == "merge":
                command.merge([str(self.source)], db=db)
            elif what == "prune":
                command.cache_prune(str(self.caches[i]), db=db, unused_days=0)
        except Exception as exc:
            if as_ledger_error(exc) is None:
                raise


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def _users_files(shared: Path) -> None:
    (shared / "results").mkdir()
    (shared / "results" / "fit.npz").write_bytes(b"\x00 mine")
    (shared / "results" / "log.jsonl").write_text('{"step": 1}\n')
    (shared / "0123456789abcdef0123456789abcdef").mkdir()  # named like a run, no marker
    (shared / "0123456789abcdef0123456789abcdef" / "h-1.jsonl").write_text('{"compile_index": 0, "pid": 1}\n')
    (shared / "notes.txt").write_text("mine\n")


# weighted by repeats: starts and the commands that take runs in come more often
ACTION = st.tuples(st.sampled_from(["start", "start", "spool", "end", "kill", "kill", "corrupt", "lock", "check", "check",
                                    "merge", "prune", "prune", "entry"]),
                   st.integers(0, 1), st.integers(0, 7), st.integers(1, 3))


@pytest.mark.slow
@settings(max_examples=examples(60), **SETTINGS)
@given(actions=st.lists(ACTION, min_size=3, max_size=14))
def test_two_ledgers_one_spool_dir_any_order(templates, monkeypatch, actions):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shared = root / "scratch"
        shared.mkdir()
        _users_files(shared)
        monkeypatch.setenv("LEDGER_SPOOL_DIR", str(shared))
        monkeypatch.setenv("LEDGER_BUSY_TIMEOUT", "0.05")
        dbs = [root / "a.db", root / "b.db"]
        for db in dbs:
            shutil.copy(templates["empty"], db)
        caches = [root / "cache-a", root / "cache-b"]
        world = World(root, dbs, caches, templates["source"])
        for i, cache in enumerate(caches):
            cache.mkdir()
            world.entry(i)
        # a third ledger's run, kept in the same folder: as much the user's as their files
        other = RecordConfig(run_dir="", run_id=uuid.uuid4().hex)
        os.close(other.create(resolve(str(root / "c.db"))))
        Run(2, other.run_dir, spool.read_run(other.run_dir), None, DEAD_PID - 99).compile(amend=True)
        theirs = _tree(shared)
        for i in (0, 1):
            world.start(i, 1)  # each ledger has a run in flight from the start
        try:
            for what, i, pick, n in actions:
                run = world.runs[pick % len(world.runs)] if world.runs else None
                if what == "start":
                    world.start(i, n)
                elif what in ("spool", "end", "kill", "corrupt") and run is not None:
                    if what == "spool" and run.lock is not None:
                        world.spool_some(run, n)
                    elif what in ("end", "kill"):
                        world.end(run, killed=what == "kill")
                    elif what == "corrupt":
                        world.corrupt(run)
                elif what == "lock":
                    world.toggle_lock(i)
                elif what == "entry":
                    world.entry(i)
                elif what in ("check", "merge", "prune"):
                    world.do(what, i)
        finally:
            for con in world.locks.values():
                con.execute("COMMIT")
                con.close()
            world.locks.clear()
        for run in world.runs:
            world.end(run, killed=False)
        for i in (0, 1):
            world.do("check", i)  # takes in whatever was kept
        _holds(world, shared, theirs)


def _holds(world: World, shared: Path, theirs: dict) -> None:
    after = _tree(shared)
    assert {k: v for k, v in after.items() if k in theirs} == theirs  # nothing of theirs touched
    left = set(after) - set(theirs)  # of ours, only what was set aside (and its dir) may stay
    assert all(k.endswith(spool.SET_ASIDE) or after[k] is None for k in left), sorted(left)
    for i, db in enumerate(world.dbs):
        rows = query(db, "SELECT run_id, compile_index, count(*) FROM compile_records WHERE transform = 'recorded'"
                         " GROUP BY run_id, compile_index")
        assert all(n == 1 for *_, n in rows)  # exactly once
        assert {(r, c) for r, c, _ in rows} == world.made[i]  # every compile made for it, none of the other's
        prunes = {Path(e) for e, in query(db, "SELECT entry FROM cache_prunes")}
        mine = {e for e in world.entries if e.parent == world.caches[i]}
        assert prunes == {e for e in mine if not e.exists()}  # each removal recorded, nothing else
