"""Cache evidence around one ``lowered.compile()``: JAX's own events, the cache key it
computed (and the hash of each key component), and the entry count on disk.

Why both kinds of evidence: the events are exact and per process, but only exist
where JAX emits them; the file count works anywhere but lies twice over: a miss below
``jax_persistent_cache_min_compile_time_secs`` writes nothing (a count calls it warm
on a populated cache) and another process writing into a shared dir looks cold.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading

from ledger.record import (COLD, NONE, SOURCE_EMPTY_CACHE_DIR, SOURCE_MEASURED_EVENTS,
                           SOURCE_MEASURED_FILES, UNKNOWN, WARM)

EV_REQUEST = "/jax/compilation_cache/compile_requests_use_cache"
EV_HIT = "/jax/compilation_cache/cache_hits"
EV_MISS_WRITTEN = "/jax/compilation_cache/cache_misses"  # fires only when the miss is written
EV_BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"

CACHE_KEY_LOGGER = "jax._src.cache_key"
COMPILER_LOGGER = "jax._src.compiler"

# JAX's component names, as its cache_key logger spells them.
KEY_COMPONENTS = ("computation", "jax_lib version", "backend version", "XLA flags",
                  "compile_options", "accelerator_config", "compression", "custom_hook")

_COMPONENT_RE = re.compile(r"get_cache_key hash of serialized (.+?): ([0-9a-f]+)$")
_CUMULATIVE_RE = re.compile(r"get_cache_key hash after serializing (.+?): ([0-9a-f]+)$")
_FLAG_RE = re.compile(r"Including XLA flag in cache key: (.*)$")
_KEY_RE = re.compile(r"(?:hit|MISS) for '([^']*)' with key '([^']*)'")


def count_cache_entries(cache_dir: str | None) -> int | None:
    """Entries in JAX's file cache: one ``<key>-cache`` file per entry, flat in the dir
    (the LRU cache may add ``-atime`` companions, which are not entries)."""
    if not cache_dir:
        return None
    try:
        with os.scandir(cache_dir) as it:
            return sum(1 for e in it if e.name.endswith("-cache"))
    except FileNotFoundError:
        return 0


class _Events:
    """Process-wide jax.monitoring listeners (registered once), counting into a window."""

    _lock = threading.Lock()
    _installed = False

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
        from jax import monitoring
        monitoring.register_event_listener(_EVENTS.on_event)
        monitoring.register_event_duration_secs_listener(_EVENTS.on_duration)
        _Events._installed = True


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record):
        try:
            self.messages.append(record.getMessage())
        except Exception:  # a malformed record must not break a compile
            pass


class CompileWatch:
    """Context manager around ``lowered.compile()`` only.

    Entering resets the event counters and turns on the DEBUG logging that carries the
    cache key components (JAX only computes those per-component hashes when its logger
    is enabled for DEBUG); it stops propagation meanwhile so a user's root handler does
    not print them. Everything else (parsing, counting) happens after exit.
    """

    def __enter__(self):
        self._handler = _Capture()
        self._saved = []
        for name in (CACHE_KEY_LOGGER, COMPILER_LOGGER):
            lg = logging.getLogger(name)
            self._saved.append((lg, lg.level, lg.propagate))
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
        self.counts = dict(_EVENTS.counts)
        self.durations = dict(_EVENTS.durations)
        self.messages = self._handler.messages
        return False

    # -- read after exit ---------------------------------------------------------
    def summary(self) -> dict:
        components: dict[str, str] = {}
        final = None
        key = None
        flags = []
        for m in self.messages:
            if (mt := _COMPONENT_RE.search(m)):
                components[mt.group(1)] = mt.group(2)
            elif (mt := _CUMULATIVE_RE.search(m)):
                final = mt.group(2)
            elif (mt := _FLAG_RE.search(m)):
                if mt.group(1) not in flags:  # logged again when JAX re-hashes for DEBUG
                    flags.append(mt.group(1))
            elif (mt := _KEY_RE.search(m)):
                key = mt.group(2)
        # The key JAX uses is "<module name>-<cumulative hash>"; the compiler logs it on
        # a hit or miss. Fall back to the bare hash if that message was not seen.
        if key is None and final is not None:
            key = final
        return {
            "cache_requests": self.counts.get(EV_REQUEST, 0),
            "cache_hits": self.counts.get(EV_HIT, 0),
            "cache_misses": self.counts.get(EV_MISS_WRITTEN, 0),
            "backend_compile_s": self.durations.get(EV_BACKEND_COMPILE),
            "cache_key": key,
            "cache_key_components": json.dumps(components, sort_keys=True) if components else None,
            "xla_flags_in_key": flags,
        }


def decide_cache_state(cache_dir: str | None, requests: int, hits: int, misses: int,
                       files_before: int | None, files_after: int | None) -> tuple[str, str]:
    """(cache_state, cache_state_source) for one compile, events first."""
    if not cache_dir:
        return NONE, SOURCE_EMPTY_CACHE_DIR
    if requests or hits or misses:
        # A request without a hit is a miss, written (cache_misses) or not (under the
        # min compile time / entry size): cold either way.
        return (WARM if hits else COLD), SOURCE_MEASURED_EVENTS
    if files_before is None or files_after is None:
        return UNKNOWN, SOURCE_MEASURED_FILES
    if files_after > files_before:
        return COLD, SOURCE_MEASURED_FILES
    if files_before > 0:
        return WARM, SOURCE_MEASURED_FILES
    return UNKNOWN, SOURCE_MEASURED_FILES
