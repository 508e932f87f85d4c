"""`ledger record` overhead, printed plainly (a benchmark, not a timed test).

A program of 300 small distinct compiles runs plain and under `ledger record`, in
fresh processes, interleaved, N runs each, in one run of this script; the bound is
record wall <= 1.10 x plain wall + 1 s (the fixed start: the recorder's imports and
the ledger's creation). Both runs use a fresh JAX cache dir each time (every compile
cold, the cache written as a user's would be), into a fresh ledger per recorded run.

    .venv/bin/python bench/bench_record.py [--runs 3] [--compiles 300] [--large]

--large adds the other half of the bound: one large compile (the `mge` builder's `vag`,
run as a plain script, no cache) shows no difference beyond the same fixed start.
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
LARGE = r'''
import jax
from ledger.probes.objectives import BUILTINS
from ledger.probes.transforms import build_transform
fn, x0 = BUILTINS["mge"]({"n_batch": 8, "batch_size": 4})
prep = build_transform("vag", fn, x0, 8, 4)
jax.block_until_ready(jax.jit(prep.fn)(*prep.args))
'''
FACTOR, START_S = 1.10, 1.0
ROOT = Path(__file__).resolve().parents[1]


def interleaved(tmp: Path, name: str, argv: list[str], runs: int, cache: bool) -> tuple[list[float], list[float]]:
    """Wall seconds of `python <name> argv` plain and recorded, alternating, fresh each time."""
    plain, rec = [], []
    for i in range(runs):
        for kind, out in (("plain", plain), ("record", rec)):
            env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
            if cache:
                env["JAX_COMPILATION_CACHE_DIR"] = str(tmp / f"cache-{name}-{kind}-{i}")
            cmd = [sys.executable, str(tmp / name), *argv]
            if kind == "record":
                cmd = [str(BIN / "ledger"), "record", "--db", str(tmp / f"ledger-{name}-{i}.db"), "--", *cmd]
            out.append(timed_subprocess(cmd, env=env, cwd=tmp)[0])
    return plain, rec


def report(title: str, plain: list[float], rec: list[float], extra: str = "") -> bool:
    p, r = statistics.median(plain), statistics.median(rec)
    bound = FACTOR * p + START_S
    print(f"{title} (median wall):")
    print(f"  plain   {p:.2f} s   ({', '.join(f'{v:.2f}' for v in plain)})")
    print(f"  record  {r:.2f} s   ({', '.join(f'{v:.2f}' for v in rec)}){extra}")
    print(f"  ratio record/plain {r / p:.3f}x, difference {r - p:+.2f} s; bound {FACTOR:.2f} x plain + {START_S:.0f} s"
          f" = {bound:.2f} s: {verdict(r, bound)}")
    return r <= bound


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--compiles", type=int, default=300)
    ap.add_argument("--large", action="store_true", help="also one large compile (mge vag), 2 runs each")
    args = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="bench-record-") as tmp:
        tmp = Path(tmp)
        (tmp / "small.py").write_text(PROGRAM)
        plain, rec = interleaved(tmp, "small.py", [str(args.compiles)], args.runs, cache=True)
        import sqlite3

        con = sqlite3.connect(tmp / "ledger-small.py-0.db")
        rows = con.execute("SELECT count(*) FROM compile_records").fetchone()[0]
        con.close()
        ok &= report(f"{args.compiles} small distinct compiles, {args.runs} runs each", plain, rec,
                     f"   rows in one recorded run: {rows}")
        if args.large:
            (tmp / "large.py").write_text(LARGE)
            plain, rec = interleaved(tmp, "large.py", [], 2, cache=False)
            ok &= report("one large compile (mge vag, no cache), 2 runs each", plain, rec)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
