"""The compile hook: each XLA compile of the program becomes one record.

JAX's compile path is wrapped at ``compile_or_get_cached`` (probes/jax_internals.py),
which every XLA compile goes through: the module it compiles names the function and
carries its input signature, and around it the probe's own evidence (probes/evidence.py)
reads JAX's cache events and key lines. The durations come from JAX's own events: the
trace and lowering that precede the compile, and ``backend_compile_duration``, which
JAX fires just after the call returns. The record is spooled when the call returns
(durable from then on, whatever kills the process), and the duration follows it as
an amend line (ledger/recorder/spool.py).

Nothing here may fail the program: a recorder error is one line on stderr, once, and
the compile goes on unrecorded.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sys
import threading
import time

from ledger.compile_counter import CompileCounter
from ledger.record import (
    CELL_LABELS,
    COLD,
    NONE,
    NOT_PERSISTED_PROCESS_INDEX,
    NOT_PERSISTED_UNKNOWN,
    RECORDED_TRANSFORM,
    SOURCE_EMPTY_CACHE_DIR,
    SOURCE_MEASURED_EVENTS,
    STATUS_OK,
    blank_record,
    now_timestamp,
    stored_cache_dir,
)
from ledger.recorder import spool
from ledger.recorder.config import RecordConfig

_failed: set[str] = set()


def warn_once(what: str, err: BaseException | None = None) -> None:
    """The one line a recorder failure gets on stderr; the program goes on."""
    line = f"ledger record: {what}" + (f": {type(err).__name__}: {err}" if err is not None else "")
    if line not in _failed:
        _failed.add(line)
        print(line.splitlines()[0][:300], file=sys.stderr, flush=True)


class Lost:
    """The compiles this process could not spool (a full disk: each write fails), counted,
    and said at its exit with the count: the first failure's line alone said "a compile
    was not recorded" of 190."""

    def __init__(self):
        self.pid, self.count, self.why = None, 0, ""

    def add(self, err: BaseException) -> None:
        if self.pid != os.getpid():  # first loss, or a forked child's own
            self.pid, self.count, self.why = os.getpid(), 0, f"{type(err).__name__}: {err}"
            import atexit

            atexit.register(self.say)
        self.count += 1
        warn_once("a compile was not recorded", err)

    def say(self) -> None:
        if self.pid == os.getpid() and self.count:  # once (a forked child inherits the parent's hook too)
            count, self.count = self.count, 0
            print(f"ledger record: {count} compiles of process {self.pid} were not recorded"
                  f" ({self.why.splitlines()[0][:200]})", file=sys.stderr, flush=True)


class Recorder:
    """One process's recording: appends each compile's record to the spool the moment
    the compile returns (ledger/recorder/spool.py)."""

    def __init__(self, config: RecordConfig, spool, started: float | None = None):
        self.config, self.spool = config, spool
        self.active = True
        # each process's start (epoch seconds): its interpreter's (the sitecustomize's
        # clock), a recording() block's, or its fork's (_forked); said in its started line
        self._started = {os.getpid(): time.time() if started is None else started}
        self._announced: set[int] = set()
        self._lock = threading.Lock()
        self._trace_s = self._lower_s = 0.0  # JAX's durations since the last compile
        # per thread: the compile whose backend duration JAX has yet to fire (in the
        # compiling thread, just after the call returns)
        self._unamended = threading.local()
        self._static: dict | None = None
        self._process_index: int | None = None
        self._known_entries: dict[str, int] = {}  # cache dir -> entries, counted once
        self._entries_pid = os.getpid()
        self._counter = CompileCounter()
        self.lost = Lost()
        self._programs: tuple[int, dict] = (os.getpid(), {})  # (pid, (function, signature) -> keys)
        # fields its caller sets for the compiles from now on: the pytest plugin's test
        # node id and phase (ledger/pytest_plugin/), changed between tests
        self.context: dict = {}

    def _entries(self, cache_dir: str | None) -> int | None:
        """Entries in the cache dir before a compile: counted at this process's first
        compile into it, then kept by JAX's written-miss events (a count per compile
        cost a program of many small compiles a scan each, of a dir that grows)."""
        from ledger.probes import evidence

        if self._entries_pid != os.getpid():  # a forked child: its dir may have moved on since
            self._entries_pid, self._known_entries = os.getpid(), {}
        if not cache_dir or not evidence._Events.listening or cache_dir not in self._known_entries:
            n = evidence.count_cache_entries(cache_dir)
            if cache_dir and n is not None and evidence._Events.listening:
                self._known_entries[cache_dir] = n
            return n
        return self._known_entries[cache_dir]

    def announce(self) -> None:
        """This process's started line: its start and host (ledger/recorder/processes.py)."""
        pid = os.getpid()
        self._announced.add(pid)
        self.spool.note(spool.STARTED, started=self._started.get(pid, time.time()), host=socket.gethostname())

    def _forked(self) -> None:
        self._started[os.getpid()] = time.time()

    # -- jax.monitoring ----------------------------------------------------------------
    def on_duration(self, event, duration, **kwargs):
        from ledger.probes import jax_internals as ji

        if event == ji.EV_TRACE:
            self._trace_s += float(duration)
        elif event == ji.EV_LOWER:
            self._lower_s += float(duration)
        elif event == ji.EV_BACKEND_COMPILE:
            # fired just after compile_or_get_cached returned: the record is already
            # spooled (durable), this line gives it JAX's own duration
            index = getattr(self._unamended, "index", None)
            self._unamended.index = None
            if index is not None:
                try:
                    self.spool.note(spool.AMEND, index=index, backend_compile_s=float(duration))
                except Exception as err:  # noqa: BLE001 - never the program's failure
                    warn_once("a compile's duration was not recorded", err)

    # -- the compile itself ------------------------------------------------------------
    def around(self, original, args, kwargs):
        """Run JAX's compile_or_get_cached, recording it when this recorder is active."""
        computation = args[1] if len(args) > 1 else kwargs.get("computation")
        if not self.active or computation is None:
            return original(*args, **kwargs)
        from ledger.probes import evidence
        from ledger.probes import jax_internals as ji

        try:
            rec = self._begin(computation)
            watch = evidence.CompileWatch(loggers=ji.RECORD_LOGGERS, passthrough=True)
        except Exception as err:  # noqa: BLE001
            warn_once("cannot record compiles", err)
            return original(*args, **kwargs)
        with watch:
            t0 = time.perf_counter()
            out = original(*args, **kwargs)
            wall = time.perf_counter() - t0
        try:
            self._after(rec, watch, wall)
            if os.getpid() not in self._announced:  # a forked child's first compile
                self.announce()
            self.spool.write(rec)
            self._unamended.index = rec["compile_index"]
        except Exception as err:  # noqa: BLE001
            self.lost.add(err)
        return out

    def _begin(self, computation) -> dict:
        from ledger.probes import jax_internals as ji

        rec = blank_record()
        rec.update(self.static_fields())
        rec.update(self.context)
        text = ji.module_text(computation)
        cache_dir = stored_cache_dir(ji.option(ji.OPT_CACHE_DIR))
        pid, index = self._counter.next()
        rec.update({
            "function": ji.module_name(computation),
            # both read the compile's stack: called here, inside the wrapper
            "function_kind": ji.function_kind(),
            "call_site": ji.call_site(),
            "input_signature": ji.input_signature(text, ji.compile_avals()),
            "pid": pid, "compile_index": index,
            "program_fingerprint": hashlib.sha256(text.encode()).hexdigest() if text else None,
            "trace_s": self._trace_s + self._lower_s,
            "cache_dir": str(cache_dir) if cache_dir else None,
            "cache_files_before": self._entries(cache_dir),
            "cache_min_compile_time_s": _num(float, ji.option(ji.OPT_MIN_COMPILE_TIME)),
            "cache_min_entry_size_bytes": _num(int, ji.option(ji.OPT_MIN_ENTRY_SIZE)),
            "jax_cache_settings": _dumps(ji.cache_settings()),
            "xla_flags": os.environ.get("XLA_FLAGS"),
            "x64": ji.x64_enabled(),
            "timestamp": now_timestamp(),
            "_prov": {"jaxpr_trace_s": self._trace_s, "lower_s": self._lower_s},
        })
        self._trace_s = self._lower_s = 0.0
        return rec

    def _after(self, rec: dict, watch, wall: float) -> None:
        from ledger.probes import evidence
        from ledger.probes import jax_internals as ji

        s = watch.summary()
        for k in ("cache_requests", "cache_hits", "cache_misses", "cache_key", "cache_key_components"):
            rec[k] = s[k]
        cache_dir = rec["cache_dir"]
        if cache_dir in self._known_entries and s["cache_misses"]:
            self._known_entries[cache_dir] += s["cache_misses"]
        rec["variant"] = self._variant(rec["function"], rec["input_signature"], rec["cache_key"])
        if self._process_index is None:
            self._process_index = ji.process_index()
        rec["process_index"] = self._process_index
        if not cache_dir:
            rec["cache_state"], rec["cache_state_source"] = NONE, SOURCE_EMPTY_CACHE_DIR
        elif s["cache_requests"] == 0:
            # JAX listened, and this compile never asked the cache (disabled, or a
            # backend without it): no cache was in play, whatever the dir holds
            rec["cache_state"], rec["cache_state_source"] = NONE, SOURCE_MEASURED_EVENTS
        else:
            after = evidence.count_cache_entries(cache_dir) if s["cache_requests"] is None else None
            rec["cache_files_after"] = after
            rec["cache_state"], rec["cache_state_source"] = evidence.decide_cache_state(
                cache_dir, s["cache_requests"], s["cache_hits"], s["cache_misses"],
                rec["cache_files_before"], after)
            if rec["cache_state"] == COLD and s["cache_misses"] == 0:
                cause = ji.not_persisted_cause(watch.messages)
                if cause is None and (self._process_index or 0) != 0:
                    cause = NOT_PERSISTED_PROCESS_INDEX
                rec["cache_not_persisted"] = cause or NOT_PERSISTED_UNKNOWN
        prov = rec.pop("_prov")
        prov["xla_flags_in_cache_key"] = s["xla_flags_in_key"]
        prov["compile_or_get_cached_s"] = wall
        if ji.notes():
            prov["jax_internals"] = ji.notes()
        rec["_provenance"] = {**self._process_provenance(), **prov}
        rec["compile_s"] = wall  # JAX's own backend duration replaces it (an amend line)
        rec.update(_host_now())

    def _variant(self, function, signature, key) -> int:
        """Which program of this process it is among those of its name and signature: the
        nth distinct cache key compiled under them (a forked child counts its own)."""
        pid, seen = self._programs
        if pid != os.getpid():
            self._programs = pid, seen = os.getpid(), {}
        keys = seen.setdefault((function, signature), [])
        if key not in keys:
            keys.append(key)
        return keys.index(key)

    def _process_provenance(self) -> dict:
        from ledger.probes import host

        if os.getpid() != getattr(self, "_prov_pid", None):  # once a process (a fork is another)
            self._prov_pid, self._prov = os.getpid(), host.static_provenance()
        return self._prov

    def static_fields(self) -> dict:
        """What every record of this process shares, read once (jax is initialised by
        the time it compiles)."""
        if self._static is None:
            from ledger.probes import host

            env = host.jax_environment()
            cfg = self.config
            self._static = {
                "transform": RECORDED_TRANSFORM, "status": STATUS_OK, "mixed_precision": False,
                **{k: env[k] for k in ("hardware", "jax_version", "jaxlib_version", "backend", "device_kind")},
                **{k: cfg.cell.get(k) for k in CELL_LABELS},
                "tag": cfg.tag, "run_id": cfg.run_id, "command": cfg.command,
                "objective": "record", "hostname": socket.gethostname(),
            }
        return dict(self._static)


def _host_now() -> dict:
    """The host's load as the compile returns: a syscall, not psutil (the process's own
    import time is what `import jax` under record must not grow by)."""
    try:
        l1, l5, l15 = os.getloadavg()
    except OSError:
        l1 = l5 = l15 = None
    return {"host_load_avg_1m": l1, "host_load_avg_5m": l5, "host_load_avg_15m": l15}


def _num(kind, value):
    return None if value is None else kind(value)


def _dumps(obj) -> str:
    import json

    return json.dumps(obj, sort_keys=True, default=str)


# -- one hook per process ----------------------------------------------------------------
# The recorders in force, innermost last: a nested ``ledger.recording()`` records
# while it lasts, and the one around it records again once it ends.
_stack: list[Recorder] = []
_installed = False


def _current() -> Recorder | None:
    return _stack[-1] if _stack else None


def install(recorder: Recorder) -> bool:
    """Make ``recorder`` the one that sees this process's compiles; False if JAX's
    compile path or its events cannot be reached (the line is on stderr)."""
    global _installed
    from ledger.probes import evidence
    from ledger.probes import jax_internals as ji

    if not _installed:
        def make_wrapper(original):
            def compile_or_get_cached(*args, **kwargs):
                rec = _current()
                if rec is None:
                    return original(*args, **kwargs)
                return rec.around(original, args, kwargs)

            return compile_or_get_cached

        if not ji.wrap_compile(make_wrapper):
            warn_once(ji.notes()[-1] if ji.notes() else "JAX's compile path moved; nothing recorded")
            return False
        evidence.install_listeners()
        register = ji._internal("jax.monitoring", "register_event_duration_secs_listener",
                                "trace_s and compile_s from the recorder's own clock")
        if register is not None:
            def on_duration(event, duration, **kw):
                rec = _current()
                if rec is not None:
                    rec.on_duration(event, duration, **kw)

            register(on_duration)
        os.register_at_fork(after_in_child=_forked)
        _installed = True
    _stack.append(recorder)
    return True


def _forked() -> None:
    """In a forked child: its start is now (the parent's is not its own)."""
    for rec in _stack:
        rec._forked()


def uninstall(recorder: Recorder) -> None:
    """Stop ``recorder`` (the wrapper stays, passing compiles to the one around it, if any)."""
    recorder.active = False
    if recorder in _stack:
        _stack.remove(recorder)
