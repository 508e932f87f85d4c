"""In-process measurement: configure JAX's cache, then measure transforms one by one.

Each timed window holds only JAX work. Host sampling, cache-entry counting, progress
events, fingerprinting and record building all happen between the windows.
"""

from __future__ import annotations

import hashlib
import os
import time
import traceback
from typing import Callable

from probes import evidence, host
from probes.errors import ProbeError
from probes.objectives import resolve_objective
from probes.records import blank_record, local_timestamp, RECORD_KEYS

ENV_MIN_TIME = "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"
ENV_MIN_SIZE = "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"
ENV_CACHE_DIR = "JAX_COMPILATION_CACHE_DIR"

# Captured at import, before configure_jax() writes to jax.config: an env-configured
# cache dir is honoured (and recorded) when no --cache-dir is given.
_ENV_CACHE_DIR_AT_IMPORT = os.environ.get(ENV_CACHE_DIR) or None

ERROR_MAX_CHARS = 4000


def configure_jax(cache_dir: str | None) -> dict:
    """Point JAX's persistent cache at ``cache_dir`` (or the env's, or none) and make
    every compile cacheable unless the user set the thresholds in the environment.

    JAX initialises its cache once per process, at the first compile; resetting it here
    makes a later configuration take effect in a process that already compiled.
    Returns what was decided, for provenance.
    """
    import jax
    from jax._src import compilation_cache as _cc

    if cache_dir:
        cache_dir = os.path.abspath(os.path.expanduser(cache_dir))
        os.makedirs(cache_dir, exist_ok=True)
    effective = cache_dir or _ENV_CACHE_DIR_AT_IMPORT
    source = "argument" if cache_dir else ("environment" if effective else None)
    jax.config.update("jax_compilation_cache_dir", effective)
    if os.environ.get(ENV_MIN_TIME) is None:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    if os.environ.get(ENV_MIN_SIZE) is None:
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    _cc.reset_cache()
    evidence.install_listeners()
    return {
        "cache_dir": effective,
        "cache_dir_source": source,
        "min_compile_time_from_env": os.environ.get(ENV_MIN_TIME) is not None,
        "min_entry_size_from_env": os.environ.get(ENV_MIN_SIZE) is not None,
    }


def format_error(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}".strip()
    return text if len(text) <= ERROR_MAX_CHARS else text[: ERROR_MAX_CHARS - 3] + "..."


class Session:
    """One process's probe context: the objective built once, shared by its transforms."""

    def __init__(self, *, objective: str, cell: dict, cache_dir: str | None, tag: str | None,
                 run_id: str, phase: str | None, steady_calls: int,
                 emit_progress: Callable[[dict], None] | None = None):
        self.objective_spec = objective
        self.cell = dict(cell)
        self.tag = tag
        self.run_id = run_id
        self.phase = phase
        self.steady_calls = int(steady_calls)
        self.emit_progress = emit_progress
        self.config = configure_jax(cache_dir)
        self.cache_dir = self.config["cache_dir"]
        self.env = host.jax_environment()
        self._built = None
        self._build_error: BaseException | None = None

    # -- objective ----------------------------------------------------------------
    def _objective(self):
        if self._built is None and self._build_error is None:
            obj = resolve_objective(self.objective_spec)
            self.model_type = obj.model_type
            self.cell["model_type"] = obj.model_type
            cell = dict(self.cell)
            try:
                fn, x0 = obj.builder(cell)
            except Exception as err:  # the user's builder failed: every transform fails
                self._build_error = err
                self._build_tb = traceback.format_exc()
            else:
                import numpy as np
                self._built = (fn, np.asarray(x0))
        if self._build_error is not None:
            raise self._build_error
        return self._built

    def _progress(self, transform: str, stage: str, t_start: float) -> None:
        if self.emit_progress is not None:
            self.emit_progress({"transform": transform, "phase": stage,
                                "elapsed_s": round(time.perf_counter() - t_start, 3),
                                "run_phase": self.phase})

    # -- one transform -------------------------------------------------------------
    def measure(self, transform: str) -> dict:
        import jax
        from probes.transforms import build_transform

        rec = blank_record()
        t_start = time.perf_counter()
        rec["timestamp"] = local_timestamp()
        hs = host.host_state()
        rec.update({k: v for k, v in hs.items() if k in RECORD_KEYS})
        rec.update(self._static_fields(transform))
        timings: dict[str, float] = {}
        prov: dict = {"stage_reached": "build"}
        watch = None
        files_before = files_after = None
        try:
            fn, x0 = self._objective()
            rec["ndim"] = int(x0.size)
            prep = build_transform(transform, fn, x0, self.cell["n_batch"], self.cell["batch_size"])
            # JAX's in-memory caches would hide the persistent cache from this compile
            # (and make trace_s a cache lookup) if this process saw the program before.
            jax.clear_caches()

            self._progress(transform, "tracing", t_start)
            prov["stage_reached"] = "tracing"
            t0 = time.perf_counter()
            lowered = jax.jit(prep.fn).lower(*prep.args)
            timings["trace_s"] = time.perf_counter() - t0

            files_before = count = evidence.count_cache_entries(self.cache_dir)
            rec["cache_files_before"] = count
            rec["jax_cache_settings"] = host.dumps(host.cache_settings())
            rec["xla_flags"] = os.environ.get("XLA_FLAGS")
            self._progress(transform, "compiling", t_start)
            prov["stage_reached"] = "compiling"
            with evidence.CompileWatch() as watch:
                t0 = time.perf_counter()
                compiled = lowered.compile()
                timings["compile_s"] = time.perf_counter() - t0
            files_after = evidence.count_cache_entries(self.cache_dir)
            rec["host_load_avg_1m_after"] = host.load_avg()[0]
            self._fill_evidence(rec, watch, files_before, files_after, prov)

            self._progress(transform, "first call", t_start)
            prov["stage_reached"] = "first call"
            t0 = time.perf_counter()
            jax.block_until_ready(prep.sweep(compiled))
            timings["first_s"] = time.perf_counter() - t0

            self._progress(transform, "steady", t_start)
            prov["stage_reached"] = "steady"
            steady = []
            for _ in range(self.steady_calls):
                t0 = time.perf_counter()
                jax.block_until_ready(prep.sweep(compiled))
                steady.append(time.perf_counter() - t0)
            timings["steady_s"] = sum(steady) / len(steady) if steady else None
            prov["stage_reached"] = "done"

            rec["program_fingerprint"] = hashlib.sha256(lowered.as_text().encode()).hexdigest()
        except Exception as err:
            rec["status"] = "failed"
            rec["error"] = format_error(err)
            prov["partial_timings"] = {k: round(v, 6) for k, v in timings.items()}
            prov["traceback_tail"] = traceback.format_exc()[-2000:]
            if watch is not None and rec["cache_state"] is None and hasattr(watch, "counts"):
                self._fill_evidence(rec, watch, files_before, files_after, prov)
        else:
            rec["status"] = "ok"
            rec.update({k: v for k, v in timings.items()})
        rec["provenance"] = host.dumps(dict(prov, **self._provenance_extra()))
        self._progress(transform, "done" if rec["status"] == "ok" else "failed", t_start)
        return rec

    # -- pieces ---------------------------------------------------------------------
    def _static_fields(self, transform: str) -> dict:
        import jax

        env = self.env
        return {
            "transform": transform,
            "dataset_class": self.cell.get("dataset_class"),
            "model_type": getattr(self, "model_type", None) or _model_type(self.objective_spec),
            "instrument": self.cell.get("instrument"),
            "n_batch": self.cell.get("n_batch"),
            "batch_size": self.cell.get("batch_size"),
            "mixed_precision": bool(self.cell.get("mixed_precision")),
            "hardware": env["hardware"],
            "jax_version": env["jax_version"],
            "jaxlib_version": env["jaxlib_version"],
            "backend": env["backend"],
            "device_kind": env["device_kind"],
            "cache_dir": self.cache_dir,
            "tag": self.tag,
            "run_id": self.run_id,
            "phase": self.phase,
            "objective": self.objective_spec,
            "steady_calls": self.steady_calls,
            "cache_min_compile_time_s": float(jax.config.jax_persistent_cache_min_compile_time_secs),
            "cache_min_entry_size_bytes": int(jax.config.jax_persistent_cache_min_entry_size_bytes),
        }

    def _fill_evidence(self, rec, watch, files_before, files_after, prov) -> None:
        s = watch.summary()
        rec["cache_files_after"] = files_after
        for k in ("cache_requests", "cache_hits", "cache_misses", "backend_compile_s",
                  "cache_key", "cache_key_components"):
            rec[k] = s[k]
        if not self.cache_dir:
            # No cache: there were no requests and nothing to count.
            rec["cache_requests"] = rec["cache_requests"] or 0
        state, source = evidence.decide_cache_state(
            self.cache_dir, s["cache_requests"], s["cache_hits"], s["cache_misses"],
            files_before, files_after)
        rec["cache_state"], rec["cache_state_source"] = state, source
        prov["xla_flags_in_cache_key"] = s["xla_flags_in_key"]

    def _provenance_extra(self) -> dict:
        import jax

        extra = host.static_provenance()
        extra.update({
            "device_count": self.env.get("device_count"),
            "jax_enable_x64": bool(jax.config.jax_enable_x64),
            "cache_config": self.config,
            "cell": self.cell,
        })
        if self._build_error is not None:
            extra["builder_traceback_tail"] = getattr(self, "_build_tb", "")[-2000:]
        return extra


def _model_type(spec: str) -> str:
    try:
        return resolve_objective(spec).model_type
    except ProbeError:
        return spec
