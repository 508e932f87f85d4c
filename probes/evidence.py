"""Cache evidence around one ``lowered.compile()``: JAX's own events, the cache key it
computed (and the hash of each key component), and the entry count on disk.

Why both kinds of evidence: the events are exact and per process, but only exist
where JAX emits them; the file count works anywhere but lies twice over: a miss below
``jax_persistent_cache_min_compile_time_secs`` writes nothing (a count calls it warm
on a populated cache) and another process writing into a shared dir looks cold.

The names this reads from JAX (events, loggers, entry files) are in
probes/jax_internals.py, with what happens when one of them has moved.
"""

from __future__ import annotations

import json
import logging
import threading

from ledger.probes import jax_internals as ji

from ledger.record import (
    COLD,
    NONE,
    SOURCE_EMPTY_CACHE_DIR,
    SOURCE_MEASURED_EVENTS,
    SOURCE_MEASURED_FILES,
    SOURCE_UNKNOWN,
    UNKNOWN,
    WARM,
)


def count_cache_entries(cache_dir: str | None) -> int | None:
    """Entries in JAX's file cache; None without a cache dir or when this JAX's entry
    files are not recognised."""
    return ji.count_entries(cache_dir) if cache_dir else None


class _Events:
    """Process-wide jax.monitoring listeners (registered once), counting into a window."""

    _lock = threading.Lock()
    _installed = False
    listening = False  # the event listener is registered: its counts are evidence

    def __init__(self):
        self.counts: dict[str, int] = {}
        self.durations: dict[str, float] = {}

    def on_event(self, event, **kwargs):
        self.counts[event] = self.counts.get(event, 0) + 1

    def on_duration(self, event, duration, **kwargs):
        self.durations[event] = self.durations.get(event, 0.0) + float(duration)

    def reset(self):
        self.counts = {}
        self.durations = {}


_EVENTS = _Events()


def install_listeners() -> None:
    """Register the listeners once per process (jax.monitoring has no scoping)."""
    with _Events._lock:
        if _Events._installed:
            return
        _Events.listening = ji.register_listeners(_EVENTS.on_event, _EVENTS.on_duration)
        _Events._installed = True


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.messages: list[str] = []
        self.forward: dict[str, tuple[int, logging.Logger]] = {}

    def emit(self, record):
        try:
            self.messages.append(record.getMessage())
        except Exception:  # noqa: BLE001, S110 - a malformed record must not break a compile
            pass
        fwd = self.forward.get(record.name)
        if fwd is not None and record.levelno >= fwd[0]:
            fwd[1].handle(record)


class CompileWatch:
    """Context manager around ``lowered.compile()`` only.

    Entering resets the event counters and turns on the DEBUG logging that carries the
    cache key components (JAX only computes those per-component hashes when its logger
    is enabled for DEBUG); it stops propagation meanwhile so a user's root handler does
    not print them. Everything else (parsing, counting) happens after exit.
    """

    def __init__(self, loggers=ji.LOGGERS, passthrough: bool = False):
        # passthrough (the recorder, inside someone's program): a line the program's
        # own logging would have shown (at or above its logger's level) still goes on
        self.loggers, self.passthrough = loggers, passthrough

    def __enter__(self):
        self._handler = _Capture()
        self._saved = []
        for name in self.loggers:
            lg = logging.getLogger(name)
            self._saved.append((lg, lg.level, lg.propagate))
            if self.passthrough and lg.propagate and lg.parent is not None:
                self._handler.forward[name] = (lg.getEffectiveLevel(), lg.parent)
            lg.setLevel(logging.DEBUG)
            lg.propagate = False
            lg.addHandler(self._handler)
        _EVENTS.reset()
        return self

    def __exit__(self, *exc):
        for lg, level, propagate in self._saved:
            lg.removeHandler(self._handler)
            lg.setLevel(level)
            lg.propagate = propagate
        self.counts = dict(_EVENTS.counts) if _Events.listening else None
        self.durations = dict(_EVENTS.durations)
        self.messages = self._handler.messages
        return False

    # -- read after exit ---------------------------------------------------------
    def summary(self) -> dict:
        key = ji.parse_key_lines(self.messages)
        counts = self.counts
        # Without the event listener there are no counts: NULL, not 0.
        count = (lambda ev: counts.get(ev, 0)) if counts is not None else (lambda ev: None)
        return {
            "cache_requests": count(ji.EV_REQUEST),
            "cache_hits": count(ji.EV_HIT),
            "cache_misses": count(ji.EV_MISS_WRITTEN),
            "backend_compile_s": self.durations.get(ji.EV_BACKEND_COMPILE),
            "cache_key": key["cache_key"],
            "cache_key_components": (json.dumps(key["components"], sort_keys=True)
                                     if key["components"] else None),
            "xla_flags_in_key": key["xla_flags_in_key"],
        }


def decide_cache_state(cache_dir: str | None, requests: int | None, hits: int | None,
                       misses: int | None, files_before: int | None,
                       files_after: int | None) -> tuple[str, str]:
    """(cache_state, cache_state_source) for one compile, events first; a count is None
    when it could not be measured."""
    if not cache_dir:
        return NONE, SOURCE_EMPTY_CACHE_DIR
    if requests or hits or misses:
        # A request without a hit is a miss, written (cache_misses) or not (under the
        # min compile time / entry size): cold either way.
        return (WARM if hits else COLD), SOURCE_MEASURED_EVENTS
    if files_before is None or files_after is None:
        return UNKNOWN, SOURCE_UNKNOWN  # no events and no files: nothing measured
    if files_after > files_before:
        return COLD, SOURCE_MEASURED_FILES
    if files_before > 0:
        return WARM, SOURCE_MEASURED_FILES
    return UNKNOWN, SOURCE_MEASURED_FILES
