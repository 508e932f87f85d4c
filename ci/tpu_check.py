"""The ledger on an accelerator: `make probe`'s pair, `ledger record` of a small jitted
program (cold, then warm) and `ledger predict`, each checked against JAX's own word.

Run by ci/tpu.sh on a TPU machine (no network: the wheels travel with it); it runs here
too, on the CPU, with ``--backend cpu`` (how the script itself is tested). Writes its
ledger, the commands' output (tpu.log) and a summary (check.json) to OUTDIR, four files at
most (what a device machine sends back is counted); the cache dirs and the program go to a
temporary dir. Exit 1 on a failed check, each one named.

    python ci/tpu_check.py OUTDIR [--backend tpu]
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# A small program as the field writes one: two jitted functions of its own, one at two
# shapes, a value-and-grad, eager ops around them. Its own jax.monitoring listeners are
# the oracle: compiles (backend_compile_duration), cache hits, and written misses.
PROGRAM = r'''
import json, sys
import jax, jax.numpy as jnp

# JAX's event -> what it counts (a written miss fires cache_misses; a hit, cache_hits)
COUNTED = {"/jax/core/compile/backend_compile_duration": "compiles", "/jax/compilation_cache/cache_hits": "hits",
           "/jax/compilation_cache/cache_misses": "written"}
seen = dict.fromkeys(COUNTED.values(), 0)
def count(event, *_, **__):
    if event in COUNTED:
        seen[COUNTED[event]] += 1
jax.monitoring.register_event_duration_secs_listener(count)
jax.monitoring.register_event_listener(count)

@jax.jit
def image(params, grid):
    r2 = ((grid - params[:2]) ** 2).sum(-1)
    return params[2] * jnp.exp(-r2 / params[3] ** 2)

def chi2(params, grid, data):
    return ((image(params, grid) - data) ** 2).sum()

grid = jnp.stack(jnp.meshgrid(jnp.linspace(-1, 1, 64), jnp.linspace(-1, 1, 64)), -1)
truth = jnp.array([0.1, -0.2, 2.0, 0.3])
data = image(truth, grid)
p = truth * 1.1
step = jax.jit(jax.value_and_grad(chi2))
for _ in range(3):
    value, g = step(p, grid, data)
    p = p - 1e-3 * g
print(float(image(p, grid[:32, :32]).sum()), float(value))  # a second shape of image
json.dump({**seen, "platform": jax.devices()[0].platform, "device_kind": jax.devices()[0].device_kind},
          open(sys.argv[1], "w"))
'''


class Checks:
    def __init__(self, out: Path, work: Path):
        self.out, self.work, self.results, self.log = out, work, [], (out / "tpu.log").open("a")

    def say(self, text: str) -> None:
        print(text, flush=True)
        self.log.write(text + "\n")
        self.log.flush()

    def check(self, name: str, ok: bool, detail="") -> None:
        self.results.append({"check": name, "ok": bool(ok), "detail": str(detail)[:2000]})
        self.say(f"{'ok  ' if ok else 'FAIL'} {name}" + (f": {detail}" if detail != "" else ""))

    def ledger(self, *args, env=None, cwd=None, timeout=900) -> subprocess.CompletedProcess:
        cmd = [shutil.which("ledger") or "ledger", *map(str, args)]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, cwd=cwd,
                           timeout=timeout, check=False)
        self.say(f"$ ledger {' '.join(map(str, args))}   ({time.perf_counter() - t0:.1f} s, exit {p.returncode})")
        self.say((p.stdout + p.stderr).rstrip()[-6000:])
        return p


def rows(db: Path, sql: str, *params) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def probe_pair(c: Checks, db: Path, backend: str) -> None:
    """`make probe`: mge, every transform, a cold process then a warm one on a fresh dir."""
    p = c.ledger("probe", "--objective", "mge", "--cold-warm", "--tag", "tpu-probe", "--db", db,
                 "--cache-dir", c.work / "probe-cache")
    c.check("make probe's pair ran", p.returncode == 0)
    got = rows(db, "SELECT phase, cache_state, backend, device_kind, count(*) FROM compile_records"
                   " WHERE tag = 'tpu-probe' AND status = 'ok' GROUP BY 1, 2, 3, 4 ORDER BY 1, 2")
    c.check("probe rows: the cold phase cold, the warm phase warm, on the backend with its device kind",
            {(ph, st) for ph, st, *_ in got} == {("cold", "cold"), ("warm", "warm")}
            and all(b == backend and kind for _, _, b, kind, _ in got), got)


def predict(c: Checks, db: Path) -> None:
    """One transform into a cache dir, then a prediction for it (warm) and another (cold)."""
    cache = c.work / "predict-cache"
    c.ledger("probe", "--objective", "mge", "-t", "jit", "--tag", "tpu-fill", "--db", db, "--cache-dir", cache)
    p = c.ledger("predict", "--objective", "mge", "-t", "jit", "-t", "vag", "--cache-dir", cache, "--json",
                 "--db", db)
    said = {}
    try:
        said = {x["transform"]: x["predicted"] for x in json.loads(p.stdout)}
    except (ValueError, KeyError, TypeError):
        pass
    c.check("predict: jit warm (its entry is in the dir), vag cold", said == {"jit": "warm", "vag": "cold"}, said)


def record(c: Checks, db: Path, backend: str) -> None:
    """The program recorded cold, then warm, every compile persisted: the rows against its oracle."""
    work = c.work / "record"
    work.mkdir(exist_ok=True)
    (work / "fit.py").write_text(PROGRAM)
    env = {"JAX_COMPILATION_CACHE_DIR": str(work / "cache"), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
           "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1"}
    for run, state in (("cold", "cold"), ("warm", "warm")):
        oracle = work / f"oracle-{run}.json"
        p = c.ledger("record", "--db", db, "--tag", f"tpu-{run}", "--", sys.executable, "fit.py", oracle,
                     env=env, cwd=work)
        c.check(f"record {run}: the program ran", p.returncode == 0 and oracle.exists())
        if not oracle.exists():
            continue
        seen = json.loads(oracle.read_text())
        got = rows(db, "SELECT cache_state, backend, device_kind, call_site, run_id FROM compile_records"
                       " WHERE tag = ?", f"tpu-{run}")
        states = [r[0] for r in got]
        c.check(f"record {run}: one row per compile JAX saw ({seen['compiles']})", len(got) == seen["compiles"], len(got))
        expected = seen["written"] if state == "cold" else seen["hits"]  # JAX's own events
        c.check(f"record {run}: {state} rows equal JAX's {'written misses' if state == 'cold' else 'hits'} ({expected})",
                states.count(state) == expected == len(got), {s: states.count(s) for s in set(states)})
        c.check(f"record {run}: backend {backend}, device kind {seen['device_kind']!r}",
                seen["platform"] == backend and {(r[1], r[2]) for r in got} == {(backend, seen["device_kind"])},
                {(r[1], r[2]) for r in got})
        c.check(f"record {run}: every row has its call site", all(r[3] for r in got) and any(
            (r[3] or "").startswith("fit.py:") for r in got), sorted({r[3] for r in got})[:6])
        run_ids = {r[4] for r in got}
        procs = rows(db, "SELECT wall_s, ended_by FROM recorded_processes WHERE run_id = ?", *run_ids) \
            if len(run_ids) == 1 else []
        c.check(f"record {run}: the run's time (its process, seen to its exit)",
                len(procs) == 1 and procs[0][0] > 0 and procs[0][1] == "exit", procs)
    runs = c.ledger("runs", "--json", "--db", db)
    listed = json.loads(runs.stdout) if runs.returncode == 0 else []
    warm = next((r for r in listed if r["warm"] and r["time"]), None)
    c.check("runs: the warm run's time, compile share and seconds saved", warm is not None
            and warm["share"] is not None and warm["saved"]["known"] + warm["saved"]["unknown"] == warm["warm"],
            warm and {k: warm[k] for k in ("time", "share", "trace_s", "compile_s", "saved")})


def main() -> int:
    out = Path(sys.argv[1]).resolve()
    backend = sys.argv[sys.argv.index("--backend") + 1] if "--backend" in sys.argv else "tpu"
    out.mkdir(parents=True, exist_ok=True)
    c, db = Checks(out, Path(tempfile.mkdtemp(prefix="ledger-tpu-"))), out / "ledger.db"
    import platform

    c.say(f"python {platform.python_version()}, {platform.platform()}; glibc {platform.libc_ver()}")
    c.ledger("--version")
    probe_pair(c, db, backend)
    record(c, db, backend)
    predict(c, db)
    c.ledger("report", "--db", db)
    failed = [r for r in c.results if not r["ok"]]
    (out / "check.json").write_text(json.dumps({"backend": backend, "checks": c.results}, indent=1))
    c.say(f"{len(c.results) - len(failed)} of {len(c.results)} checks passed" + (
        f"; failed: {', '.join(r['check'] for r in failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
