"""What the cache did with a recorded run's compiles, for the closing line of `ledger
record`: how many cold compiles JAX wrote into the cache and why it kept the rest out
(its thresholds, a process other than 0), or that no cache dir was set. Said only when
it matters: a run whose every cold compile was written says nothing more."""

from __future__ import annotations

from dataclasses import dataclass, field

from ledger.output import three_digits
from ledger.probes.jax_internals import OPT_CACHE_DIR, OPT_MIN_COMPILE_TIME, OPT_MIN_ENTRY_SIZE
from ledger.record import (
    COLD,
    NONE,
    NOT_PERSISTED_COMPILE_TIME,
    NOT_PERSISTED_ENTRY_SIZE,
    NOT_PERSISTED_PROCESS_INDEX,
)

# why JAX kept a compile out -> (its setting, the row's column holding the limit, the limit's unit)
_WHY = {NOT_PERSISTED_COMPILE_TIME: (OPT_MIN_COMPILE_TIME, "cache_min_compile_time_s", " s"),
        NOT_PERSISTED_ENTRY_SIZE: (OPT_MIN_ENTRY_SIZE, "cache_min_entry_size_bytes", " bytes")}


@dataclass
class CacheTally:
    compiles: int = 0
    cold: int = 0
    written: int = 0
    no_dir: int = 0
    kept_out: dict = field(default_factory=dict)  # cache_not_persisted -> [n, seconds, {limits}]

    def add(self, row: dict) -> None:
        self.compiles += 1
        if row.get("cache_state") == NONE and not row.get("cache_dir"):
            self.no_dir += 1
        if row.get("cache_state") != COLD or not row.get("cache_dir"):
            return
        self.cold += 1
        why = row.get("cache_not_persisted")
        if why is None:
            self.written += 1
            return
        n, seconds, limits = self.kept_out.get(why, (0, 0.0, set()))
        limit = _WHY.get(why, (None, None, None))[1]
        if limit and row.get(limit) is not None:
            limits.add(row[limit])
        self.kept_out[why] = (n + 1, seconds + (row.get("compile_s") or 0.0), limits)

    def line(self) -> str | None:
        """The closing line's part about the cache, or None when it has nothing to add."""
        if self.compiles and self.no_dir == self.compiles:
            return (f"no cache dir was set: none of the {self.compiles} compiles could be cached"
                    f" ({OPT_CACHE_DIR}, or JAX_COMPILATION_CACHE_DIR)")
        if not self.kept_out:
            return None
        why = "; ".join(self._why(k, v) for k, v in sorted(self.kept_out.items(), key=lambda kv: -kv[1][1]))
        whole = "all " if self.written == 0 and sum(v[0] for v in self.kept_out.values()) == self.cold else ""
        return (f"{self.written} of {self.cold} cold compiles were written to the cache ({whole}{why}):"
                " ledger check says more")

    @staticmethod
    def _why(cause: str, kept: tuple) -> str:
        n, seconds, limits = kept
        if cause in _WHY:
            setting, _, unit = _WHY[cause]
            limit = f" = {', '.join(f'{x:g}' for x in sorted(limits))}{unit}" if limits else ""
            return f"{n} under {setting}{limit}; {three_digits(seconds)} s a run"
        if cause == NOT_PERSISTED_PROCESS_INDEX:
            return f"{n} from a process other than 0, which JAX does not let write; {three_digits(seconds)} s"
        return f"{n} not written, JAX did not say why; {three_digits(seconds)} s"
