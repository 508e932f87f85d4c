"""The pytest leg (ci/pytest_leg.sh): `pytest --ledger` on a third-party JAX library's own
tests, run from its installed wheel: a slice of optax's `*_test.py` files, twice, on one
persistent cache. Every compile the session's own jax.monitoring listener heard
(ledger_oracle.py) is a row with that test's node id and phase, and the second
session's warm rows are JAX's hits, test by test."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
# about a minute on a 2-core CPU, every test passing on CPU (_clipping_test's block-RMS case does not)
SLICE = ["_src/update_test.py", "transforms/_adding_test.py", "_src/numerics_test.py", "_src/utils_test.py",
         "losses/_regression_test.py"]


def _optax_dir() -> Path:
    optax = pytest.importorskip("optax")
    return Path(optax.__file__).resolve().parent


def _session(tmp: Path, name: str, cache: Path, db: Path) -> tuple[int, Path, float, str]:
    oracle = tmp / f"oracle-{name}.txt"
    site = _optax_dir().parent
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_COMPILATION_CACHE_DIR": str(cache),
           "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0", "ORACLE_FILE": str(oracle),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))}
    env.pop("LEDGER_DB", None)
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "ledger_oracle",
                           f"--rootdir={site}", f"--ledger-db={db}", "--ledger-tag", f"optax-{name}",
                           *(str(site / "optax" / f) for f in SLICE)],
                          check=False, cwd=tmp, env=env, capture_output=True, text=True)
    (tmp / f"pytest-{name}.log").write_text(done.stdout + done.stderr)
    return done.returncode, oracle, time.monotonic() - t0, done.stdout


def _oracle(path: Path, kind: str) -> Counter:
    seen = Counter()
    for line in path.read_text().splitlines():
        k, _, now = line.partition("|")
        if k == kind:
            test, _, phase = now.rpartition(" (")
            seen[(test, phase.rstrip(")")) if now != "-" else ("-", "-")] += 1
    return seen


def _rows(db: Path, tag: str, where: str = "1 = 1") -> Counter:
    with sqlite3.connect(db) as con:
        rows = con.execute(f"SELECT test_id, test_phase FROM compile_records WHERE tag = ? AND {where}", (tag,))
        return Counter((t, p) if p != "collect" else ("-", "-") for t, p in rows)


def test_optax_sessions_rows_are_what_its_listener_heard(tmp_path):
    cache, db = tmp_path / "jax-cache", tmp_path / "ledger.db"
    report = {}
    for name in ("cold", "warm"):
        rc, oracle, seconds, out = _session(tmp_path, name, cache, db)
        assert rc == 0, out[-3000:]
        rows, heard = _rows(db, f"optax-{name}"), _oracle(oracle, "c")
        assert rows == heard, (rows - heard, heard - rows)
        warm, hits = _rows(db, f"optax-{name}", "cache_state = 'warm'"), _oracle(oracle, "h")
        assert warm == hits, (warm - hits, hits - warm)
        tests = {t for t, p in rows if p == "call"}
        report[name] = {"compiles": sum(rows.values()), "tests": len(tests), "warm": sum(warm.values()),
                        "hits": sum(hits.values()), "seconds": round(seconds, 1),
                        "line": next((x for x in out.splitlines() if x.startswith("ledger: ")), "")}
    path = os.environ.get("LEDGER_PYTEST_LEG_REPORT")
    if path:
        Path(path).write_text(json.dumps(report))
    # the first session hits too, where a test compiles again what an earlier one wrote
    assert report["warm"]["warm"] > max(report["cold"]["warm"], 0.9 * report["warm"]["compiles"]), report
    assert report["cold"]["tests"] >= 120, report
