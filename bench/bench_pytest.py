"""`pytest --ledger` against the plain session, on a JAX test suite.

The suite: generated to be shaped like a JAX library's tests (a conftest that imports
jax, modules of small tests each running a few eager ops and a jitted function or two,
some parametrized over shapes, a fixture that compiles), or any suite given with
--suite (optax's slice: `--suite $(python -c 'import optax,os;print(os.path.dirname(optax.__file__))')/_src/update_test.py ...`,
run with that venv's python). Plain (`pytest -p no:cacheprovider`) against recorded
(`... --ledger --ledger-db <a file>`), fresh processes, interleaved (the order
alternates between repetitions), --runs each; bound: recorded <= 1.05 x plain + 0.3 s.
Each recorded session gets a ledger of its own, made at head before the clock starts: a
suite's ledger is made once (its revisions, about 0.5 s here) and then written to by
every session (--fresh-ledger times the first session's making of it too).

Each recorded session must have recorded: on the generated suite its ledger's rows must
equal the compiles the suite's own jax.monitoring listener heard (a mismatch makes the
run worthless and the bench says so); on a suite of --suite, at least one row.

    .venv/bin/python bench/bench_pytest.py [--runs 3] [--modules 8] [--suite PATH ...]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import median

FACTOR, START_S = 1.05, 0.3

CONFTEST = r'''
import os
import jax
import jax.numpy as jnp
import pytest

def _heard(event, seconds, **kw):
    if event == "/jax/core/compile/backend_compile_duration" and os.environ.get("BENCH_HEARD"):
        with open(os.environ["BENCH_HEARD"], "a") as f:
            f.write("c\n")

jax.monitoring.register_event_duration_secs_listener(_heard)

@pytest.fixture
def params():
    return jax.jit(lambda k: jax.random.normal(k, (16,)))(jax.random.key(0))
'''

MODULE = r'''
import jax
import jax.numpy as jnp
import pytest

SCALE = {k}.0


def model(p, x):
    return jnp.tanh(x @ jnp.outer(p, p)[: x.shape[-1], : x.shape[-1]]) * SCALE


@pytest.mark.parametrize("n", [3, 5, 7])
def test_model_shapes_{k}(params, n):
    x = jnp.ones((2, n)) * SCALE
    y = jax.jit(model)(params, x)
    assert y.shape == (2, n)


def test_grad_{k}(params):
    g = jax.jit(jax.grad(lambda p: jnp.sum(model(p, jnp.arange(6.0).reshape(2, 3)) ** 2)))(params)
    assert g.shape == params.shape


def test_eager_ops_{k}():
    x = jnp.arange(10.0 + {k})
    assert float(jnp.sum(jnp.exp(x) - x * 2 + jnp.where(x > 3, x, 0))) != 0.0


def test_scan_{k}():
    def body(c, x):
        return c * 0.9 + jnp.sin(x), c
    c, ys = jax.jit(lambda xs: jax.lax.scan(body, 0.0, xs))(jnp.linspace(0, 1, 20 + {k}))
    assert ys.shape == (20 + {k},)
'''


def _write_suite(root: Path, modules: int) -> list[str]:
    root.mkdir(parents=True, exist_ok=True)
    (root / "conftest.py").write_text(CONFTEST)
    for k in range(modules):
        (root / f"test_m{k}.py").write_text(MODULE.replace("{k}", str(k)))
    return [str(root)]


def _session(paths: list[str], cwd: Path, db: Path | None, heard: Path | None) -> float:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("LEDGER_DB", None)
    if heard is not None:
        env["BENCH_HEARD"] = str(heard)
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *paths]
    if db is not None:
        args += ["--ledger", f"--ledger-db={db}"]
    t0 = time.perf_counter()
    done = subprocess.run(args, check=False, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"bench_pytest: the session failed (exit {done.returncode}):\n{done.stdout[-2000:]}")
    return seconds


def _make_ledger(db: Path) -> None:
    subprocess.run([str(Path(sys.executable).with_name("ledger")), "db", "upgrade", "--db", str(db)], check=True,
                   capture_output=True)


def _rows(db: Path) -> int:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT count(*) FROM compile_records").fetchone()[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--modules", type=int, default=8, help="modules of the generated suite (6 tests each)")
    ap.add_argument("--suite", nargs="+", help="run this suite instead of the generated one")
    ap.add_argument("--fresh-ledger", action="store_true", help="time the making of each session's ledger too")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-pytest-") as tmp:
        tmp = Path(tmp)
        paths = a.suite or _write_suite(tmp / "suite", a.modules)
        _session(paths, tmp, None, None)  # unmeasured: the first import of everything from disk
        plain, recorded, rows = [], [], []
        for i in range(a.runs):
            db, heard = tmp / f"ledger-{i}.db", (None if a.suite else tmp / f"heard-{i}.txt")
            if not a.fresh_ledger:
                _make_ledger(db)
            order = [False, True] if i % 2 == 0 else [True, False]
            for rec in order:
                seconds = _session(paths, tmp, db if rec else None, heard if rec else None)
                (recorded if rec else plain).append(seconds)
            n = _rows(db)
            if heard is not None and n != len(heard.read_text().splitlines()):
                raise SystemExit(f"bench_pytest: run {i} recorded {n} rows of {len(heard.read_text().splitlines())}"
                                 " compiles its suite heard: the measurement is worthless")
            if n == 0:
                raise SystemExit(f"bench_pytest: run {i} recorded no row: the measurement is worthless")
            rows.append(n)
    p, r = median(plain), median(recorded)
    bound = FACTOR * p + START_S
    what = ("a generated suite" if not a.suite else f"{len(a.suite)} paths") + (", fresh ledgers" if a.fresh_ledger else "")
    print(f"pytest --ledger on {what} ({rows[0]} compiles a session), median of {a.runs}: plain {p:.2f} s,"
          f" recorded {r:.2f} s: {r / p:.3f}x, {r - p:+.2f} s; bound {FACTOR} x plain + {START_S} s = {bound:.2f} s:"
          f" {'met' if r <= bound else 'NOT MET'}")


if __name__ == "__main__":
    main()
