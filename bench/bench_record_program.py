"""`ledger record` on a program shaped like the field's, cold and warm, and on `import jax`.

The field's programs are not 300 jits of one function (bench_record.py): they run many
small ops EAGERLY (outside jit, each a compile of its own the first time it meets a
shape) and a few LARGE jitted functions whose compile takes seconds. The program here
is generated to be that: about 180 eager compiles (jnp.zeros/ones/arange, x + y, x * 2,
sum, exp, reshape, squeeze, where, ... on small arrays, each shape new) and four large
jitted functions (two unrolled loops of 80 ops, a scan and a fori_loop body of many ops;
about 1-2 s of compile each on the 2-core machine). It sets
jax_persistent_cache_min_compile_time_secs to 0, as the field's libraries do, so every
compile is written to the persistent cache.

Three measurements, each plain against recorded (`ledger record --db <fresh> -- ...`),
fresh processes, interleaved (the order alternates between repetitions), --runs each:

- `python -c "import jax"`; bound: recorded <= plain + 0.2 s;
- the program cold (a fresh, empty JAX_COMPILATION_CACHE_DIR each run);
- the program warm (one cache dir, populated by an unmeasured run first);
  bound for both: recorded <= 1.05 x plain + 0.3 s.

Each recorded run must have recorded: its ledger's compile rows are counted and must
equal the number of compiles the program's own jax.monitoring listener saw (a warm run
must also have hit the cache for every one). A mismatch makes the run worthless and
the bench says so.

    .venv/bin/python bench/bench_record_program.py [--runs 3] [--quick]

--quick: a smaller program (about 60 eager compiles, two smaller large functions),
2 runs unless --runs says otherwise; a smoke test of the bench, not a measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import BIN, median

FACTOR, START_S = 1.05, 0.3  # a recorded program: <= 1.05 x plain + 0.3 s
IMPORT_S = 0.2  # a recorded `import jax`: <= plain + 0.2 s

# argv: EAGER_SHAPES LARGE_OPS. Prints one JSON line on stdout: what it compiled, as its
# own jax.monitoring listener saw it.
PROGRAM = r'''
import json, sys, time
T0 = time.perf_counter()
import jax
import jax.numpy as jnp
from jax import lax

jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
seen = {"compiles": 0, "hits": 0}


def on_duration(event, duration, **kw):
    # fired around every compile_or_get_cached, a persistent-cache hit included
    if event == "/jax/core/compile/backend_compile_duration":
        seen["compiles"] += 1


def on_event(event, **kw):
    if event == "/jax/compilation_cache/cache_hits":
        seen["hits"] += 1


jax.monitoring.register_event_duration_secs_listener(on_duration)
jax.monitoring.register_event_listener(on_event)
T_IMPORT = time.perf_counter() - T0


def eager(n_shapes):
    """Small ops outside jit; every shape is new, so every op compiles once."""
    out = []
    for k in range(n_shapes):
        n = 3 + k
        x = jnp.arange(2 * n, dtype=jnp.float32).reshape(2, n)
        y = jnp.ones((2, n), jnp.float32)
        z = jnp.zeros((1, n), jnp.float32)
        out += [x + y, x * 2, jnp.sum(x), jnp.exp(x), jnp.squeeze(z), jnp.where(x > y, x, y),
                jnp.tanh(x), x.T, jnp.max(x, axis=1), jnp.concatenate([x, y])]
    return jax.block_until_ready(out)


def unrolled(n_ops, salt):
    def f(x):
        for i in range(n_ops):
            m = (i + salt) % 6
            if m == 0:
                x = jnp.sin(x) * (1.0 + i / n_ops)
            elif m == 1:
                x = x + jnp.cos(x[::-1])
            elif m == 2:
                x = jnp.tanh(x @ x.T) * 0.5
            elif m == 3:
                x = x - jnp.mean(x, axis=0, keepdims=True)
            elif m == 4:
                x = jnp.where(x > 0, x, 0.1 * x)
            else:
                x = jnp.roll(x, i % 5, axis=1) + jnp.exp(-x * x)
        return x
    return f


def scanned(n_ops):
    def body(c, t):
        for i in range(n_ops):
            c = jnp.sin(c + t * (i + 1)) if i % 2 else jnp.cos(c) * c + (i + 1.0)
        return c, c.sum()
    return lambda x: lax.scan(body, x, jnp.arange(16.0))


def looped(n_ops):
    def body(i, c):
        for j in range(n_ops):
            c = jnp.log1p(jnp.abs(c)) * (j + 2.0) if j % 3 == 0 else c @ jnp.tanh(c).T / (j + 1.0)
        return c + i
    return lambda x: lax.fori_loop(0, 8, body, x)


def large(n_ops, n_fns):
    fns = [unrolled(n_ops, 0), unrolled(n_ops, 3), scanned(3 * n_ops), looped(n_ops // 12)][:n_fns]
    times = []
    for j, fn in enumerate(fns):
        t = time.perf_counter()
        jax.block_until_ready(jax.jit(fn)(jnp.full((16, 16), j + 1.0, jnp.float32)))
        times.append(round(time.perf_counter() - t, 2))
    return times


t = time.perf_counter()
eager(int(sys.argv[1]))
eager_s, eager_n = time.perf_counter() - t, seen["compiles"]
large_s = large(int(sys.argv[2]), int(sys.argv[3]))
print(json.dumps({**seen, "eager_compiles": eager_n, "eager_s": round(eager_s, 2), "large_s": large_s,
                  "import_s": round(T_IMPORT, 2), "total_s": round(time.perf_counter() - T0, 2)}))
'''
FULL = ("12", "80", "4")  # eager shapes (about 15 compiles each), ops per large function, large functions
QUICK = ("4", "40", "2")


def run(cmd: list[str], env: dict, cwd: Path) -> tuple[float, str]:
    """Wall seconds and stdout of one fresh process; a recorder's complaint on stderr
    is shown (a run that records nothing must not pass unnoticed)."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    for line in p.stderr.splitlines():
        if line.startswith("ledger record"):
            print(f"    ! {line}")
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return wall, p.stdout


def rows_in(db: Path) -> int:
    """Compile rows in a recorded run's ledger (0 when none was made: nothing compiled)."""
    if not db.exists():
        return 0
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT count(*) FROM compile_records").fetchone()[0]
    finally:
        con.close()


class Case:
    """One measurement: plain and recorded walls, and each recorded run's check."""

    def __init__(self, title: str, bound):
        self.title, self.bound = title, bound
        self.walls: dict[str, list[float]] = {"plain": [], "record": []}
        self.checks: list[str] = []
        self.ok_rows = True

    def report(self) -> bool:
        p, r = median(self.walls["plain"]), median(self.walls["record"])
        bound, bound_text = self.bound(p)
        met = r <= bound
        print(f"{self.title}:")
        for kind, med in (("plain", p), ("record", r)):
            xs = self.walls[kind]
            print(f"  {kind:<7} median {med:6.2f} s   min {min(xs):.2f}  max {max(xs):.2f}   "
                  f"({', '.join(f'{v:.2f}' for v in xs)})")
        print(f"  ratio {r / p:.3f}x ({r - p:+.2f} s); bound {bound_text} = {bound:.2f} s: "
              f"{'MET' if met else 'NOT MET'}")
        # the runs of a pair ran back to back: their ratio sees less of the machine's drift
        pairs = [b / a for a, b in zip(self.walls["plain"], self.walls["record"], strict=True)]
        diffs = [b - a for a, b in zip(self.walls["plain"], self.walls["record"], strict=True)]
        print(f"  per pair: ratio median {median(pairs):.3f}x (min {min(pairs):.3f}, max {max(pairs):.3f}), "
              f"difference median {median(diffs):+.2f} s")
        print(f"  recorded: {'; '.join(self.checks)}" + ("" if self.ok_rows else "   <- ROWS != COMPILES: WORTHLESS"))
        return met and self.ok_rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=None, help="repetitions of each measurement (default 3; 2 with --quick)")
    ap.add_argument("--quick", action="store_true", help="a smaller program: a smoke test of the bench")
    args = ap.parse_args()
    runs = args.runs or (2 if args.quick else 3)
    argv = list(QUICK if args.quick else FULL)
    # PYTHONDONTWRITEBYTECODE (set on some build machines) would have every run compile
    # the ledger's own modules from source, as no installed node does (pip writes them)
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("JAX_COMPILATION_CACHE", "LEDGER_")) and k != "PYTHONDONTWRITEBYTECODE"}
    base["JAX_PLATFORMS"] = "cpu"
    ledger = str(BIN / "ledger")

    with tempfile.TemporaryDirectory(prefix="bench-record-program-") as tmp:
        tmp = Path(tmp)
        (tmp / "program.py").write_text(PROGRAM)
        program = [sys.executable, str(tmp / "program.py"), *argv]
        warm_cache = tmp / "cache-warm"
        _, out = run(program, {**base, "JAX_COMPILATION_CACHE_DIR": str(warm_cache)}, tmp)
        shape = json.loads(out)
        print(f"program: {shape['compiles']} compiles, {shape['eager_compiles']} of them eager "
              f"({shape['eager_s']:.2f} s), {len(shape['large_s'])} large jitted "
              f"({', '.join(f'{s:.2f}' for s in shape['large_s'])} s); the warm cache: "
              f"{sum(1 for _ in warm_cache.iterdir())} entries. {runs} runs each, interleaved; "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)

        imp = Case('`python -c "import jax"`', lambda p: (p + IMPORT_S, f"plain + {IMPORT_S} s"))
        cold = Case("the program, cold (a fresh cache dir each run)",
                    lambda p: (FACTOR * p + START_S, f"{FACTOR} x plain + {START_S} s"))
        warm = Case("the program, warm (the populated cache)",
                    lambda p: (FACTOR * p + START_S, f"{FACTOR} x plain + {START_S} s"))
        for i in range(runs):
            kinds = ("plain", "record") if i % 2 == 0 else ("record", "plain")
            for case, name, cmd in ((imp, "import", [sys.executable, "-c", "import jax"]),
                                    (cold, "cold", program), (warm, "warm", program)):
                for kind in kinds:
                    env = dict(base)
                    if case is cold:
                        env["JAX_COMPILATION_CACHE_DIR"] = str(tmp / f"cache-cold-{kind}-{i}")
                    elif case is warm:
                        env["JAX_COMPILATION_CACHE_DIR"] = str(warm_cache)
                    db = tmp / f"ledger-{name}-{i}.db"
                    full = [ledger, "record", "--db", str(db), "--", *cmd] if kind == "record" else cmd
                    wall, out = run(full, env, tmp)
                    case.walls[kind].append(wall)
                    if kind != "record":
                        continue
                    rows = rows_in(db)
                    seen = json.loads(out) if out.strip() else {"compiles": 0, "hits": 0}
                    ok = rows == seen["compiles"] and (case is not warm or seen["hits"] == seen["compiles"])
                    case.ok_rows &= ok
                    hits = f", {seen['hits']} hits" if case is warm else ""
                    case.checks.append(f"{rows} rows / {seen['compiles']} compiles{hits}" + ("" if ok else " MISMATCH"))
            print(f"  run {i + 1}/{runs} done", flush=True)

        print()
        ok = True
        for case in (imp, cold, warm):
            ok &= case.report()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
