"""Progress events and their display.

A probe reports at stage boundaries: one event ``{"transform", "phase", "elapsed_s",
"run_phase"}`` per stage, ``phase`` one of PROGRESS_PHASES in order; a transform's last
event is DONE or FAILED. ``Progress`` shows them as one status line.
"""

from __future__ import annotations

import sys
import threading
import time

TRACING, COMPILING, FIRST_CALL, STEADY = "tracing", "compiling", "first call", "steady"
DONE, FAILED = "done", "failed"
PROGRESS_PHASES = (TRACING, COMPILING, FIRST_CALL, STEADY, DONE, FAILED)


class Progress:
    """One status line on a stream (stderr): transform, phase and seconds elapsed. On
    a terminal it ticks every half second (compiles take minutes and the probe only
    reports at phase boundaries); elsewhere it prints one line per phase."""

    def __init__(self, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.current: dict | None = None
        self.since = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._tick, daemon=True) if self.tty else None

    def __enter__(self):
        if self._thread:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread:
            self._thread.join()
            self.stream.write("\r\033[K")
            self.stream.flush()

    def _line(self) -> str:
        ev = self.current or {}
        elapsed = ev.get("elapsed_s", 0.0) + (time.monotonic() - self.since)
        run_phase = f"[{ev['run_phase']}] " if ev.get("run_phase") else ""
        return f"{run_phase}{ev.get('transform', '?')}: {ev.get('phase', '?')} {elapsed:6.1f}s"

    def _tick(self):
        while not self._stop.wait(0.5):
            with self._lock:
                if self.current is not None:
                    self.stream.write("\r\033[K" + self._line())
                    self.stream.flush()

    def __call__(self, event: dict) -> None:
        with self._lock:
            self.current, self.since = event, time.monotonic()
            if not self.tty:
                self.stream.write(self._line() + "\n")
                self.stream.flush()
