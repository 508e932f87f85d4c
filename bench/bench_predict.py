"""`ledger predict` against the cold probe it spares, in one run (a benchmark, not a
timed test).

Predicting all 7 transforms of `mge` on a fresh cache dir, against the cold probe of
the same transforms on another fresh cache dir: both the installed `ledger` entry
point in a subprocess, interleaved, N runs each, medians. Target: predict costs at
most a quarter of the probe (ratio <= 0.25). Each prediction is checked to have left
its cache dir empty, and to have said cold for every transform.

    .venv/bin/python bench/bench_predict.py [--runs 3] [--objective mge]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import BIN, median, verdict

LIMIT = 0.25
LEDGER = shutil.which("ledger", path=str(BIN)) or "ledger"


def timed(args: list, ok=(0,)) -> tuple[float, str]:
    t0 = time.perf_counter()
    run = subprocess.run([LEDGER, *map(str, args)], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if run.returncode not in ok:
        sys.exit(f"ledger {args[0]} failed ({run.returncode}): {run.stderr.strip()[-500:]}")
    return wall, run.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--objective", default="mge")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-predict-"))
    predict_s, probe_s = [], []
    try:
        for i in range(a.runs):
            db = work / f"ledger-{i}.db"
            fresh = work / f"predict-{i}"
            wall, out = timed(["predict", "-o", a.objective, "-t", "all", "--cache-dir", fresh,
                               "--db", db, "--json"], ok=(1,))
            said = json.loads(out)
            assert [p["predicted"] for p in said] == ["cold"] * 7 and not any(fresh.iterdir())
            predict_s.append(wall)
            wall, _ = timed(["probe", "-o", a.objective, "-t", "all", "--cache-dir", work / f"probe-{i}",
                             "--db", db])
            probe_s.append(wall)
            print(f"run {i}: predict {predict_s[-1]:.2f} s, cold probe {probe_s[-1]:.2f} s", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratio = median(predict_s) / median(probe_s)
    print(f"predict all 7 transforms of {a.objective} on a fresh cache dir: median {median(predict_s):.2f} s; "
          f"cold probe of the same: median {median(probe_s):.2f} s ({a.runs} runs each)")
    print(f"ratio predict/probe = {ratio:.3f} (target <= {LIMIT}): {verdict(ratio, LIMIT)}")


if __name__ == "__main__":
    main()
