"""`ledger record` overhead, printed plainly (a benchmark, not a timed test).

A program of 300 small distinct compiles runs plain and under `ledger record`, in
fresh processes, interleaved, N runs each, in one run of this script; the bound is
record wall <= 1.10 x plain wall + 1 s (the fixed start: the recorder's imports and
the ledger's creation). Both runs use a fresh JAX cache dir each time (every compile
cold, the cache written as a user's would be), into a fresh ledger per recorded run.

    .venv/bin/python bench/bench_record.py [--runs 3] [--compiles 300]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import BIN, timed_subprocess, verdict

PROGRAM = r'''
import sys
import jax, jax.numpy as jnp
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
x = jnp.ones(8)
for i in range(int(sys.argv[1])):   # each constant makes a distinct program
    jax.jit(lambda v, c=float(i): jnp.sin(v) * c + c)(x).block_until_ready()
'''
FACTOR, START_S = 1.10, 1.0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--compiles", type=int, default=300)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-record-") as tmp:
        tmp = Path(tmp)
        prog = tmp / "prog.py"
        prog.write_text(PROGRAM)
        plain, rec = [], []
        for i in range(args.runs):
            for kind, out in (("plain", plain), ("record", rec)):
                env = {**os.environ, "JAX_PLATFORMS": "cpu",
                       "JAX_COMPILATION_CACHE_DIR": str(tmp / f"cache-{kind}-{i}")}
                cmd = [sys.executable, str(prog), str(args.compiles)]
                if kind == "record":
                    cmd = [str(BIN / "ledger"), "record", "--db", str(tmp / f"ledger-{i}.db"), "--", *cmd]
                out.append(timed_subprocess(cmd, env=env, cwd=tmp)[0])
        import sqlite3

        con = sqlite3.connect(tmp / "ledger-0.db")
        rows = con.execute("SELECT count(*), count(DISTINCT function || input_signature || cache_key)"
                           " FROM compile_records").fetchone()
        con.close()
    p, r = statistics.median(plain), statistics.median(rec)
    bound = FACTOR * p + START_S
    print(f"{args.compiles} small distinct compiles, {args.runs} runs each (median wall):")
    print(f"  plain   {p:.2f} s   ({', '.join(f'{v:.2f}' for v in plain)})")
    print(f"  record  {r:.2f} s   ({', '.join(f'{v:.2f}' for v in rec)})   rows in one run: {rows[0]}")
    print(f"  ratio record/plain {r / p:.3f}x; bound {FACTOR:.2f} x plain + {START_S:.0f} s = {bound:.2f} s:"
          f" {verdict(r, bound)}")
    return 0 if r <= bound else 1


if __name__ == "__main__":
    sys.exit(main())
