"""In-process measurement: configure JAX's cache, then measure transforms one by one.

Each timed window holds only JAX work. Host sampling, cache-entry counting, progress
events, fingerprinting and record building all happen between the windows.
"""

from __future__ import annotations

import hashlib
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ledger.probes import evidence, host
from ledger.probes import jax_internals as ji
from ledger.probes.objectives import Objective
from ledger.probes.progress import COMPILING, DONE, FAILED, FIRST_CALL, STEADY, TRACING

from ledger.record import PROBE_RECORD_FIELDS, STATUS_FAILED, STATUS_OK, blank_record, stored_cache_dir

# Captured at import, before configure_jax() writes to jax.config: an env-configured
# cache dir is honoured (and recorded) when no --cache-dir is given.
_ENV_CACHE_DIR_AT_IMPORT = os.environ.get(ji.ENV_CACHE_DIR) or None

ERROR_MAX_CHARS = 4000
_FIELDS = frozenset(PROBE_RECORD_FIELDS)


def record_fields(values: dict) -> dict:
    """The items of ``values`` that are record fields."""
    return {k: v for k, v in values.items() if k in _FIELDS}


def configure_jax(cache_dir: str | None) -> dict:
    """Point JAX's persistent cache at ``cache_dir`` (already absolute and created by
    the spec; else the env's, or none) and make every compile cacheable unless the
    user set the thresholds in the environment.

    JAX initialises its cache once per process, at the first compile; resetting it here
    makes a later configuration take effect in a process that already compiled.
    Returns what was decided, for provenance.
    """
    effective = cache_dir or stored_cache_dir(_ENV_CACHE_DIR_AT_IMPORT)
    source = "argument" if cache_dir else ("environment" if effective else None)
    ji.set_option(ji.OPT_CACHE_DIR, effective)
    time_from_env = os.environ.get(ji.ENV_MIN_COMPILE_TIME) is not None
    size_from_env = os.environ.get(ji.ENV_MIN_ENTRY_SIZE) is not None
    if not time_from_env:
        ji.set_option(ji.OPT_MIN_COMPILE_TIME, 0.0)
    if not size_from_env:
        ji.set_option(ji.OPT_MIN_ENTRY_SIZE, -1)
    ji.reset_cache()
    evidence.install_listeners()
    return {
        "cache_dir": effective,
        "cache_dir_source": source,
        "min_compile_time_from_env": time_from_env,
        "min_entry_size_from_env": size_from_env,
    }


def _number(kind, value):
    return None if value is None else kind(value)


def format_error(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}".strip()
    return text if len(text) <= ERROR_MAX_CHARS else text[: ERROR_MAX_CHARS - 3] + "..."


@dataclass
class _Attempt:
    """One transform's measurement in progress."""

    transform: str
    rec: dict
    t_start: float = field(default_factory=time.perf_counter)
    timings: dict[str, float] = field(default_factory=dict)
    prov: dict = field(default_factory=lambda: {"stage_reached": "build"})
    watch: Any = None
    files_before: int | None = None
    files_after: int | None = None


class Session:
    """One process's probe context: the objective built once, shared by its transforms.

    ``cell`` carries the resolved model_type; ``objective`` is already resolved."""

    def __init__(self, *, objective: Objective, cell: dict, cache_dir: str | None,
                 tag: str | None, run_id: str, phase: str | None, steady_calls: int,
                 emit_progress: Callable[[dict], None] | None = None):
        self.objective = objective
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
        self._build_tb = ""

    def built(self):
        """(fn, x0) from the builder, called once; its error, re-raised, if it failed."""
        if self._built is None and self._build_error is None:
            try:
                fn, x0 = self.objective.builder(dict(self.cell))
            except Exception as err:  # the user's builder failed: every transform fails  # noqa: BLE001
                self._build_error, self._build_tb = err, traceback.format_exc()
            else:
                import numpy as np
                self._built = (fn, np.asarray(x0))
        if self._build_error is not None:
            raise self._build_error
        return self._built

    def static_fields(self, transform: str) -> dict:
        """The fields every record of this session has, whatever happens to it."""
        env, cell = self.env, self.cell
        return {
            "transform": transform, "dataset_class": cell.get("dataset_class"),
            "model_type": cell.get("model_type"), "instrument": cell.get("instrument"),
            "n_batch": cell.get("n_batch"), "batch_size": cell.get("batch_size"),
            "mixed_precision": bool(cell.get("mixed_precision")),
            **{k: env[k] for k in ("hardware", "jax_version", "jaxlib_version", "backend",
                                   "device_kind")},
            "cache_dir": self.cache_dir, "tag": self.tag, "run_id": self.run_id,
            "phase": self.phase, "objective": self.objective.spec,
            "steady_calls": self.steady_calls,
            "cache_min_compile_time_s": _number(float, ji.option(ji.OPT_MIN_COMPILE_TIME)),
            "cache_min_entry_size_bytes": _number(int, ji.option(ji.OPT_MIN_ENTRY_SIZE)),
        }

    # -- one transform, stage by stage ------------------------------------------------
    def measure(self, transform: str) -> dict:
        a = _Attempt(transform, blank_record())
        a.rec["timestamp"] = host.timestamp()
        a.rec.update(record_fields(host.host_state()))
        a.rec.update(self.static_fields(transform))
        try:
            prep = self._prepare(a)
            lowered = self._trace(a, prep)
            compiled = self._compile(a, lowered)
            self._first_call(a, prep, compiled)
            self._steady(a, prep, compiled)
            a.prov["stage_reached"] = DONE
            a.rec["program_fingerprint"] = hashlib.sha256(lowered.as_text().encode()).hexdigest()
        except Exception as err:  # noqa: BLE001
            self._fail(a, err)
        else:
            a.rec["status"] = STATUS_OK
            a.rec.update(a.timings)
        a.rec["provenance"] = host.dumps(dict(a.prov, **self._provenance_extra()))
        self._progress(a, DONE if a.rec["status"] == STATUS_OK else FAILED)
        return a.rec

    def _progress(self, a: _Attempt, stage: str) -> None:
        if self.emit_progress is not None:
            self.emit_progress({"transform": a.transform, "phase": stage,
                                "elapsed_s": round(time.perf_counter() - a.t_start, 3),
                                "run_phase": self.phase})

    def _enter(self, a: _Attempt, stage: str) -> None:
        self._progress(a, stage)
        a.prov["stage_reached"] = stage

    def _prepare(self, a: _Attempt):
        import jax
        from ledger.probes.transforms import build_transform

        fn, x0 = self.built()
        a.rec["ndim"] = int(x0.size)
        prep = build_transform(a.transform, fn, x0, self.cell["n_batch"], self.cell["batch_size"])
        # JAX's in-memory caches would hide the persistent cache from this compile
        # (and make trace_s a cache lookup) if this process saw the program before.
        jax.clear_caches()
        return prep

    def _trace(self, a: _Attempt, prep):
        import jax

        self._enter(a, TRACING)
        t0 = time.perf_counter()
        lowered = jax.jit(prep.fn).lower(*prep.args)
        a.timings["trace_s"] = time.perf_counter() - t0
        return lowered

    def _compile(self, a: _Attempt, lowered):
        a.files_before = evidence.count_cache_entries(self.cache_dir)
        a.rec["cache_files_before"] = a.files_before
        a.rec["jax_cache_settings"] = host.dumps(ji.cache_settings())
        a.rec["xla_flags"] = os.environ.get("XLA_FLAGS")
        a.rec["x64"] = ji.x64_enabled()
        self._enter(a, COMPILING)
        with evidence.CompileWatch() as a.watch:
            t0 = time.perf_counter()
            compiled = lowered.compile()
            a.timings["compile_s"] = time.perf_counter() - t0
        a.files_after = evidence.count_cache_entries(self.cache_dir)
        a.rec["host_load_avg_1m_after"] = host.load_avg()[0]
        summary = self._fill_evidence(a)
        if self.cache_dir:
            ji.note_missing_evidence(summary)
        return compiled

    def _first_call(self, a: _Attempt, prep, compiled) -> None:
        import jax

        self._enter(a, FIRST_CALL)
        t0 = time.perf_counter()
        jax.block_until_ready(prep.sweep(compiled))
        a.timings["first_s"] = time.perf_counter() - t0

    def _steady(self, a: _Attempt, prep, compiled) -> None:
        import jax

        self._enter(a, STEADY)
        steady = []
        for _ in range(self.steady_calls):
            t0 = time.perf_counter()
            jax.block_until_ready(prep.sweep(compiled))
            steady.append(time.perf_counter() - t0)
        a.timings["steady_s"] = sum(steady) / len(steady) if steady else None

    def _fail(self, a: _Attempt, err: Exception) -> None:
        a.rec["status"] = STATUS_FAILED
        a.rec["error"] = format_error(err)
        a.prov["partial_timings"] = {k: round(v, 6) for k, v in a.timings.items()}
        a.prov["traceback_tail"] = traceback.format_exc()[-2000:]
        if a.watch is not None and a.rec["cache_state"] is None and hasattr(a.watch, "counts"):
            self._fill_evidence(a)  # the compile itself raised: its evidence still counts

    def _fill_evidence(self, a: _Attempt) -> dict:
        s = a.watch.summary()
        rec = a.rec
        rec["cache_files_after"] = a.files_after
        rec.update(record_fields(s))
        if not self.cache_dir:
            # No cache: there were no requests and nothing to count.
            rec["cache_requests"] = rec["cache_requests"] or 0
        rec["cache_state"], rec["cache_state_source"] = evidence.decide_cache_state(
            self.cache_dir, s["cache_requests"], s["cache_hits"], s["cache_misses"],
            a.files_before, a.files_after)
        a.prov["xla_flags_in_cache_key"] = s["xla_flags_in_key"]
        return s

    def _provenance_extra(self) -> dict:
        import jax

        extra = host.static_provenance()
        extra.update({
            "device_count": self.env.get("device_count"),
            "jax_enable_x64": bool(jax.config.jax_enable_x64),
            "cache_config": self.config,
            "cell": self.cell,
        })
        if ji.notes():  # what this JAX did not let the probe measure, one line each
            extra["jax_internals"] = ji.notes()
        if self._build_error is not None:
            extra["builder_traceback_tail"] = self._build_tb[-2000:]
        return extra
