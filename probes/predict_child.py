"""``python -m ledger.probes.predict_child``: one fresh process that computes the persistent-cache
key of each transform without compiling, and says whether its entry is in the cache dir.

A fresh process because JAX's in-memory caches return before any persistent-cache
lookup in a process that saw the program. The payload is probes/predict.py's; the
answer is one JSON document on the private protocol fd (what JAX or the objective print
goes to stderr). The cache is configured exactly as the probe configures it
(probes/measure.configure_jax), so the key is the one the probe will compute.

Nothing is compiled and nothing is written into the cache dir: the compile path is
stopped at its cache read (probes/jax_internals.cache_key_without_compiling), and the
ledger's own jax.monitoring listeners are muted while JAX fires its events. The cache
dir is JAX's only for that key lookup: whatever the builder and the transform compile
eagerly (a `jnp.ones(3)` is a `jit_broadcast_in_dim`) runs with no cache dir set, so it
goes nowhere persistent.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import sys

from ledger.probes import jax_internals as ji

FATAL_EXIT = 3


@contextlib.contextmanager
def muted_ledger_listeners():
    """The probe's event counts as they were before: whatever JAX fires while a key is
    predicted is not a compile, and must not count as one in this process."""
    from ledger.probes import evidence

    saved = dict(evidence._EVENTS.counts), dict(evidence._EVENTS.durations)
    try:
        yield
    finally:
        evidence._EVENTS.counts, evidence._EVENTS.durations = saved


def point_cache(cache_dir: str | None) -> None:
    """JAX's persistent cache at ``cache_dir``, or at nowhere (None), from the next compile
    on (the cache is set up at the first compile after a reset, on jax 0.4.30 to 0.12)."""
    ji.set_option(ji.OPT_CACHE_DIR, cache_dir)
    ji.reset_cache()


@contextlib.contextmanager
def cache_for_the_key(cache_dir: str):
    """The cache dir, seen by the key lookup alone; no cache dir before and after."""
    point_cache(cache_dir)
    try:
        yield
    finally:
        point_cache(None)


def predict_one(session, transform: str) -> dict:
    """The key, its components and the program's fingerprint of one transform."""
    import jax
    from ledger.probes import evidence
    from ledger.probes.transforms import build_transform

    fn, x0 = session.built()
    prep = build_transform(transform, fn, x0, session.cell["n_batch"], session.cell["batch_size"])
    jax.clear_caches()  # a fresh process already; an earlier transform's program must not answer
    lowered = jax.jit(prep.fn).lower(*prep.args)
    with cache_for_the_key(session.cache_dir), muted_ledger_listeners(), evidence.CompileWatch() as watch:
        key = ji.cache_key_without_compiling(lowered)
    if key is None:
        raise ji.Unpredictable(f"jax {ji.jax_version()}: no persistent-cache key computed for "
                               f"{transform} with cache dir {session.cache_dir} (the cache is "
                               "not used on this backend)")
    components = ji.parse_key_lines(watch.messages)["components"]
    name = ji.entry_name(key)
    if name is None:
        raise ji.Unpredictable(f"jax {ji.jax_version()}: {ji.LRU_CACHE_LOGGER} is gone; "
                               "cache entries cannot be named")
    return {
        "transform": transform, "cache_key": key,
        "cache_key_components": json.dumps(components, sort_keys=True) if components else None,
        "program_fingerprint": hashlib.sha256(lowered.as_text().encode()).hexdigest(),
        "entry": name, "entry_exists": os.path.isfile(os.path.join(session.cache_dir, name)),
    }


def caveats(cache_dir: str) -> list[str]:
    """Where a present entry is not a promised hit."""
    out = []
    max_size = ji.option("jax_compilation_cache_max_size")
    if max_size not in (None, -1):
        out.append(f"jax_compilation_cache_max_size is {max_size}: eviction may remove an entry "
                   "before the run reads it")
    if (index := ji.process_index()) not in (0, None):
        out.append(f"process index {index}: only process 0 reads the persistent cache")
    return out


def predict_job(job: dict) -> dict:
    from ledger.probes.measure import Session
    from ledger.probes.objectives import resolve_objective

    session = Session(objective=resolve_objective(job["objective"]), cell=job["cell"],
                      cache_dir=job["cache_dir"], tag=None, run_id="predict", phase=None,
                      steady_calls=1)
    if not session.cache_dir:
        raise ji.Unpredictable("no cache dir: give --cache-dir or set "
                               f"{ji.ENV_CACHE_DIR} (without one nothing is cached)")
    point_cache(None)  # configured as the probe configures it, but used by the key lookup only
    env = session.env
    context = {k: env[k] for k in ("hardware", "jax_version", "jaxlib_version", "backend",
                                   "device_kind")}
    context.update(hostname=socket.gethostname(), cache_dir=session.cache_dir,
                   xla_flags=os.environ.get("XLA_FLAGS"), x64=ji.x64_enabled(),
                   cache_entries=ji.count_entries(session.cache_dir))
    results = [predict_one(session, t) for t in job["transforms"]]
    return {"context": context, "predictions": results,
            "notes": caveats(session.cache_dir) + ji.notes()}


def main() -> int:
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # print() from the objective or JAX goes to stderr
    job = json.loads(sys.stdin.read())
    try:
        answer = predict_job(job)
    except ji.Unpredictable as err:
        answer = {"unpredictable": str(err)}
    except Exception as err:  # noqa: BLE001 - the objective or its builder failed
        answer = {"fatal": f"{type(err).__name__}: {err}"}
    proto.write(json.dumps(answer, default=str))
    proto.close()
    return FATAL_EXIT if "fatal" in answer else 0


if __name__ == "__main__":
    sys.exit(main())
