"""What to probe: ``ProbeSpec``, its defaults (the one definition the CLI takes its
defaults from too), and its validation, done once where the spec is made.

``ProbeSpec.make(**options)`` parses the transforms, checks the batch shape and
steady_calls, resolves the objective (importing a user module: a bad one fails here,
not once per transform), fills ``model_type`` from it, and normalises and creates the
cache dir. ``run_probe`` takes only a spec made that way.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

from ledger.probes.errors import ProbeError
from ledger.probes.objectives import Objective, resolve_objective
from ledger.probes.transforms import TRANSFORMS, parse_transforms, validate_batching

from ledger.record import BUILDER_INPUTS, stored_cache_dir


@dataclass(frozen=True)
class ProbeSpec:
    objective: str = "toy"
    transforms: tuple[str, ...] = tuple(TRANSFORMS)
    cache_dir: str | None = None
    tag: str | None = None
    n_batch: int = 8
    batch_size: int = 4
    steady_calls: int = 3
    mixed_precision: bool = False
    isolate: bool = False
    cold_warm: bool = False
    dataset_class: str = "imaging"
    instrument: str = "synthetic"
    model_type: str | None = None  # None: the objective's own
    run_id: str | None = None
    # Set by validated(); a spec changed with dataclasses.replace() loses it.
    resolved: Objective | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def make(cls, **options) -> ProbeSpec:
        """A validated, normalised spec; ProbeError (one line) on a user error."""
        return cls(**options).validated()

    @property
    def is_valid(self) -> bool:
        return self.resolved is not None

    def validated(self) -> ProbeSpec:
        if self.is_valid:
            return self
        _check_text_values(self)
        transforms = parse_transforms(self.transforms)
        if int(self.steady_calls) < 1:
            raise ProbeError(f"steady_calls must be >= 1, got {self.steady_calls}")
        validate_batching(transforms, int(self.n_batch), int(self.batch_size))
        objective = resolve_objective(self.objective)
        spec = dataclasses.replace(
            self, transforms=transforms, n_batch=int(self.n_batch),
            batch_size=int(self.batch_size), steady_calls=int(self.steady_calls),
            mixed_precision=bool(self.mixed_precision), cache_dir=_cache_dir(self.cache_dir),
            model_type=self.model_type or objective.model_type)
        object.__setattr__(spec, "resolved", objective)
        return spec

    def cell(self) -> dict:
        """What the builder receives, and what every row of this probe records."""
        return {name: getattr(self, name) for name in BUILDER_INPUTS}


def _check_text_values(spec: ProbeSpec) -> None:
    """The tag and the cell's text, by the record contract's rule for them (one line
    of printable text, at most TEXT_VALUE_MAX characters): refused here, before
    anything is compiled, not when the first row is written."""
    from ledger.record_validation import RecordError, check_text_value

    for name in ("tag", "dataset_class", "instrument", "model_type"):
        value = getattr(spec, name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise ProbeError(f"{name} must be text, got {type(value).__name__}")
        try:
            check_text_value(name, value)
        except RecordError as exc:
            raise ProbeError(str(exc)) from None


def _cache_dir(value: str | None) -> str | None:
    """The absolute path, created, as a row keeps it (stored_cache_dir()); None stays None
    (the env's dir, or no cache)."""
    if not value:
        return None
    path = os.path.abspath(os.path.expanduser(str(value)))
    if os.path.exists(path) and not os.path.isdir(path):
        raise ProbeError(f"cache dir {value!r} exists and is not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as err:
        raise ProbeError(f"cannot create cache dir {value!r}: {err.strerror}") from None
    return stored_cache_dir(path)


@dataclass
class ProbeOutcome:
    run_id: str
    records: list[dict] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)  # the failed records, also in records
    cache_dir: str | None = None  # the effective dir (the fresh one for cold_warm)

    @property
    def failed(self) -> bool:
        return bool(self.failures)

    @property
    def ok(self) -> bool:
        return not self.failures
