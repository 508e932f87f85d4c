"""Probe overhead, printed plainly (a benchmark, not a timed test).

1. compile_s of the probe vs a bare script doing the same ``lower().compile()``, each
   in a fresh process, interleaved, N runs each: median ratio (target within 5%).
   The bare script builds the same objective, so the programs are identical (the
   fingerprints are compared).
2. The probe's own overhead outside the timed windows, per transform: wall time of
   one in-process measurement minus its timed windows (target < 0.5 s), with an empty
   cache dir and with one holding 10,000 entries.

    .venv/bin/python bench/bench_probe_overhead.py [--runs 5] [--objective mge]
        [--transform jit] [--overhead-objective pixelization]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BARE = r'''
import hashlib, json, sys, time
import jax
from ledger.probes.objectives import BUILTINS
from ledger.probes.transforms import build_transform
cache_dir = sys.argv[3] or None
if cache_dir:
    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
fn, x0 = BUILTINS[sys.argv[1]]({"n_batch": 8, "batch_size": 4})
prep = build_transform(sys.argv[2], fn, x0, 8, 4)
lowered = jax.jit(prep.fn).lower(*prep.args)
t0 = time.perf_counter()
lowered.compile()
dt = time.perf_counter() - t0
print(json.dumps({"compile_s": dt,
                  "fingerprint": hashlib.sha256(lowered.as_text().encode()).hexdigest()}))
'''


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = ROOT + os.pathsep + e.get("PYTHONPATH", "")
    return e


def bare_once(objective, transform, cache_dir):
    out = subprocess.run([sys.executable, "-c", BARE, objective, transform, cache_dir or ""],
                         capture_output=True, text=True, env=env(), check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def probe_once(objective, transform, cache_dir):
    from ledger.probes import ProbeSpec, run_probe

    recs = []
    run_probe(ProbeSpec.make(objective=objective, transforms=[transform], isolate=True,
                             cache_dir=cache_dir, steady_calls=1), on_record=recs.append)
    (r,) = recs
    assert r["status"] == "ok", r["error"]
    return {"compile_s": r["compile_s"], "fingerprint": r["program_fingerprint"],
            "cache_state": r["cache_state"]}


def compile_ratio(objective, transform, runs, with_cache):
    probe, bare, fps = [], [], set()
    for i in range(runs):
        # Interleaved so that drift in host load hits both sides alike; each run gets
        # its own fresh cache dir (a cold compile that writes its entry) if with_cache.
        with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2:
            p = probe_once(objective, transform, d1 if with_cache else None)
            b = bare_once(objective, transform, d2 if with_cache else None)
        probe.append(p["compile_s"])
        bare.append(b["compile_s"])
        fps.update({p["fingerprint"], b["fingerprint"]})
        print(f"  run {i + 1}: probe {p['compile_s']:.3f} s  bare {b['compile_s']:.3f} s  "
              f"ratio {p['compile_s'] / b['compile_s']:.3f}", flush=True)
    ratios = [p / b for p, b in zip(probe, bare)]
    med = statistics.median(ratios)
    print(f"compile_s {objective}/{transform} ({'fresh cache dir' if with_cache else 'no cache dir'}): "
          f"probe median {statistics.median(probe):.3f} s, bare median {statistics.median(bare):.3f} s, "
          f"median ratio {med:.3f} ({(med - 1) * 100:+.1f}%), median-of-medians ratio "
          f"{statistics.median(probe) / statistics.median(bare):.3f}; "
          f"same program: {len(fps) == 1}", flush=True)
    # The host's own noise, for scale: how far apart the bare runs are from each other.
    print(f"  noise floor: bare runs span {min(bare):.3f}..{max(bare):.3f} s "
          f"(max/min {max(bare) / min(bare):.2f}); probe runs span "
          f"{min(probe):.3f}..{max(probe):.3f} s", flush=True)
    return med


def overhead(objective, transforms, cache_dir):
    from ledger.probes import ProbeSpec
    from ledger.probes.measure import Session

    spec = ProbeSpec.make(objective=objective, transforms=transforms, cache_dir=cache_dir)
    s = Session(objective=spec.resolved, cell=spec.cell(), cache_dir=spec.cache_dir, tag=None,
                run_id="bench", phase=None, steady_calls=spec.steady_calls)
    s.built()  # the builder's own time is the objective's, not the probe's
    rows = []
    for t in transforms:
        t0 = time.perf_counter()
        r = s.measure(t)
        wall = time.perf_counter() - t0
        assert r["status"] == "ok", r["error"]
        windows = r["trace_s"] + r["compile_s"] + r["first_s"] + r["steady_s"] * r["steady_calls"]
        rows.append((t, wall - windows, r["cache_state"], r["cache_files_before"]))
    return rows


def overhead_report(objective, transforms, label, cache_dir):
    rows = overhead(objective, transforms, cache_dir)
    worst = max(o for _, o, _, _ in rows)
    detail = "  ".join(f"{t} {o * 1000:.0f}ms" for t, o, _, _ in rows)
    print(f"overhead {objective} [{label}]: max {worst * 1000:.0f} ms/transform, "
          f"median {statistics.median(o for _, o, _, _ in rows) * 1000:.0f} ms  ({detail}); "
          f"cache entries before first compile: {rows[0][3]}", flush=True)
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--objective", default="mge")
    ap.add_argument("--transform", default="jit")
    ap.add_argument("--overhead-objective", default="pixelization")
    ap.add_argument("--skip-ratio", action="store_true")
    ap.add_argument("--skip-overhead", action="store_true")
    ap.add_argument("--cache-variants", default="none,fresh",
                    help="compile-ratio variants: none (no cache dir), fresh (a new cache dir)")
    args = ap.parse_args()

    if not args.skip_overhead:
        # Each configuration in its own process: JAX's persistent cache is per process.
        for label in ("empty cache dir", "10,000-entry cache dir"):
            subprocess.run([sys.executable, os.path.abspath(__file__), "--_overhead", label,
                            args.overhead_objective], env=env(), check=True)
    if not args.skip_ratio:
        for variant in args.cache_variants.split(","):
            with_cache = {"none": False, "fresh": True}[variant.strip()]
            compile_ratio(args.objective, args.transform, args.runs, with_cache)


def _overhead_child(label, objective):
    from ledger.probes import TRANSFORMS

    with tempfile.TemporaryDirectory() as d:
        if label.startswith("10,000"):
            for i in range(10_000):
                with open(os.path.join(d, f"dummy{i:05d}-cache"), "wb") as f:
                    f.write(b"x" * 64)
        overhead_report("toy", list(TRANSFORMS), label, d)
        overhead_report(objective, ["jit", "vag"], label, d)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--_overhead":
        _overhead_child(sys.argv[2], sys.argv[3])
    else:
        main()
