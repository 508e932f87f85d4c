"""Shared bits of the bench scripts: synthetic legacy records and timing helpers.

Benchmarks print a ratio against a floor measured in the same run on the same
machine, never an absolute number compared with a constant.
"""

from __future__ import annotations

import os
import random
import resource
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

BIN = Path(sys.executable).parent


def _bytecode() -> None:
    """Every `ledger` a bench times imports the package's bytecode, as a wheel's install
    leaves it. Where PYTHONDONTWRITEBYTECODE is set (this machine, CI's) nothing writes the
    checkout's, so each timed command compiled every module changed since from source
    again: 5-7 ms each for the four modules of the watch a daily check's change had touched
    (-X importtime), and probes/ (the package `ledger.probes`) every time: 8-11 ms of each
    check's start-up for probes/jax_internals.py alone, which a wheel never pays. The
    Makefile's BYTECODE does the same before a test run."""
    import compileall

    import ledger

    root = Path(ledger.__file__).parent
    for where in (root, root.parent / "migrations", root.parent / "probes"):
        if where.is_dir():
            compileall.compile_dir(where, quiet=2)


_bytecode()
TAGS = ["census-cold", "census-warm", "census-warm2", "prodigy-census-warm-retry", "mb_homo_cold_laxmap_gpu",
        "smoke", "a100-census-cold", "wiring-smoke", "matrix", "cache-warm"]
TRANSFORMS = ["jit", "grad", "vag", "vmap", "vmap_vag", "laxmap_vag", "pyloop_vag"]


def legacy_records(n: int, seed: int = 0) -> list[dict]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        out.append({
            "transform": TRANSFORMS[i % 7], "trace_s": rnd.random() * 30, "compile_s": rnd.random() * 300,
            "first_s": rnd.random(), "steady_s": rnd.random() / 10, "dataset_class": "imaging",
            "model_type": ("mge", "pixelization", "knn")[i % 3], "instrument": "hst", "ndim": 15,
            "n_batch": 16, "batch_size": 4, "hardware": "local_cpu", "jax_version": "0.10.2",
            "cache_dir": "" if i % 5 == 0 else f"/tmp/cache{i % 17}", "mixed_precision": False,
            "tag": TAGS[i % len(TAGS)], "hostname": f"node{i % 50}",
            "timestamp": f"2026-07-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:{(i // 60) % 60:02d}.{i}",
        })
    return out


def timed_subprocess(cmd, **kw) -> tuple[float, int]:
    """Wall seconds and the child's peak RSS in MB (ru_maxrss of the children, so run
    one measured child per bench process or compare against the previous max)."""
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    wall = time.perf_counter() - t0
    return wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024


def median(xs):
    return statistics.median(xs)


def verdict(ratio: float, limit: float) -> str:
    return "PASS" if ratio <= limit else "FAIL"


class PgDatabases:
    """Databases a bench makes on the server of $LEDGER_TEST_PG_URL (ci/postgres.sh start
    prints it; a password comes from PGPASSFILE), each named with `prefix` and a random tag,
    and every one dropped at drop(). create() returns its URL as the ledger takes it."""

    def __init__(self, prefix: str):
        import psycopg

        self._psycopg, self.base = psycopg, os.environ["LEDGER_TEST_PG_URL"]
        self._admin = self.base.replace("postgresql+psycopg://", "postgresql://", 1)
        self._prefix, self._made = f"{prefix}_{uuid.uuid4().hex[:8]}", []

    def name(self, name: str) -> str:
        return f"{self._prefix}_{name}"

    def create(self, name: str, template: str | None = None) -> str:
        """The database `name` made anew (a copy of `template`, another of these, if given)."""
        full = self.name(name)
        with self._psycopg.connect(self._admin, autocommit=True) as con:
            con.execute(f'DROP DATABASE IF EXISTS "{full}" WITH (FORCE)')
            con.execute(f'CREATE DATABASE "{full}"' + (f' TEMPLATE "{self.name(template)}"' if template else ""))
        if full not in self._made:
            self._made.append(full)
        return self.base.rsplit("/", 1)[0] + "/" + full

    def drop(self) -> None:
        with self._psycopg.connect(self._admin, autocommit=True) as con:
            for full in self._made:
                con.execute(f'DROP DATABASE IF EXISTS "{full}" WITH (FORCE)')
