"""A sweep spec: objectives times a grid of cells, each combination one task.

    objectives = ["toy"]            # built-ins, or package.module:builder
    transforms = ["jit", "vag"]     # or "all"
    repeats = 1                     # each cell this many times
    cold_warm = false               # each task a cold/warm pair
    steady_calls = 3
    cache = "per-task"              # per-task | shared | none | an absolute path
    setup = ["module load cuda"]    # SLURM only: shell lines the job runs before its task

    [grid]                          # every combination is one task
    dataset_class = ["imaging"]
    instrument = ["hst", "euclid"]
    n_batch = [8]
    batch_size = [4]
    mixed_precision = [false]

Every task is checked as a `ledger probe` of it would be (ProbeSpec.make) when the
spec is loaded, so a bad objective or batch shape fails before anything is queued.

The spec's name is its file's stem. It becomes the sweep id, a directory name and the
SLURM job name, so it is held to a small charset here, where it enters.
"""

from __future__ import annotations

import itertools
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from ledger.errors import LedgerError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

GRID_FIELDS = ("dataset_class", "instrument", "model_type", "n_batch", "batch_size", "mixed_precision")
TOP_FIELDS = ("objectives", "transforms", "repeats", "cold_warm", "steady_calls", "cache", "setup", "grid")
CACHE_POLICIES = ("per-task", "shared", "none")
# A spec name: a file stem that is safe as a directory name, a SLURM job name and a
# command-line argument (no leading '-' or '.').
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")
# Setup lines are the user's own shell, written into the job script as they are. One
# must stay one line: no line break (nor what str.splitlines takes for one), no NUL, no
# trailing backslash (it would join the next line); and a sane size.
SETUP_MAX_LINES, SETUP_MAX_CHARS = 64, 4096
_LINE_BREAK = re.compile("[\x00\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


@dataclass(frozen=True)
class Task:
    index: int
    objective: str
    cell: dict  # the GRID_FIELDS given for this task
    repeat: int

    def label(self) -> str:
        parts = [self.objective, *(f"{v}" if k in ("dataset_class", "instrument", "model_type") else f"{k}={v}"
                                   for k, v in self.cell.items())]
        return " ".join(parts) + (f" #{self.repeat}" if self.repeat else "")


@dataclass(frozen=True)
class SweepSpec:
    name: str
    objectives: tuple[str, ...]
    transforms: tuple[str, ...]
    repeats: int
    cold_warm: bool
    steady_calls: int | None
    cache: str
    grid: dict
    setup: tuple[str, ...] = ()

    def tasks(self) -> list[Task]:
        names = list(self.grid)
        combos = itertools.product(*(self.grid[n] for n in names))
        cells = [dict(zip(names, values)) for values in combos]
        out = []
        for objective, cell, repeat in itertools.product(self.objectives, cells, range(self.repeats)):
            out.append(Task(len(out), objective, cell, repeat))
        return out

    def rows_per_task(self) -> int:
        return len(self.transforms) * (2 if self.cold_warm else 1)

    def as_dict(self) -> dict:
        return {"name": self.name, "objectives": list(self.objectives), "transforms": list(self.transforms),
                "repeats": self.repeats, "cold_warm": self.cold_warm, "steady_calls": self.steady_calls,
                "cache": self.cache, "setup": list(self.setup), "grid": self.grid}


# The type of each grid field's values (and of the top-level settings): a TOML value
# of another type is refused, not coerced (bool("no") is True).
GRID_TYPES = {"dataset_class": str, "instrument": str, "model_type": str, "n_batch": int, "batch_size": int,
              "mixed_precision": bool}
assert tuple(GRID_TYPES) == GRID_FIELDS


def _values(name: str, value, kind: type) -> list:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise LedgerError(f"{name} is empty: give at least one value")
    for v in values:
        # bool is an int to Python, never to a spec
        if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
            raise LedgerError(f"{name} = {shown(v)}: expected {kind.__name__} values")
    return values


def _one(data: dict, name: str, kind: type, default):
    """A single value of `kind`, or `default` when the setting is absent."""
    if name not in data:
        return default
    if isinstance(data[name], list):
        raise LedgerError(f"{name} = {shown(data[name])}: expected one value, not a list")
    (value,) = _values(name, data[name], kind)
    return value


def _cache_policy(value) -> str:
    if value in CACHE_POLICIES or (isinstance(value, str) and Path(value).is_absolute()):
        return value
    raise LedgerError(f"cache = {shown(value)}: use one of {', '.join(CACHE_POLICIES)} or an absolute path")


def shown(value, limit: int = 60) -> str:
    """A value as an error message may quote it: repr'd, and cut short (a 100k value
    stays a readable line)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise LedgerError(f"sweep name {shown(name)} (the spec's file name): use letters, digits, '_', '.' "
                          f"and '-', at most 100, starting with a letter, digit or '_'; rename the file")
    return name


def check_setup(lines: list[str]) -> tuple[str, ...]:
    if len(lines) > SETUP_MAX_LINES:
        raise LedgerError(f"setup has {len(lines)} lines: at most {SETUP_MAX_LINES} (put more in a script you source)")
    for i, line in enumerate(lines):
        where = f"setup line {i + 1} {shown(line)}"
        if _LINE_BREAK.search(line):
            raise LedgerError(f"{where}: holds a line break or NUL; give each shell line as its own string")
        if len(line) > SETUP_MAX_CHARS:
            raise LedgerError(f"{where}: {len(line)} characters, at most {SETUP_MAX_CHARS}")
        if (len(line) - len(line.rstrip("\\"))) % 2:
            raise LedgerError(f"{where}: ends in a backslash, which would join it to the next line")
    return tuple(lines)


def from_dict(data: dict, name: str, *, check_tasks: bool = True) -> SweepSpec:
    """The spec of `data` (a TOML table), every value checked; each task as its probe
    would be unless `check_tasks` is false (a saved spec: checked when it was made)."""
    check_name(name)
    grid = data.get("grid", {})
    if not isinstance(grid, dict):
        raise LedgerError(f"grid = {shown(grid)}: expected a [grid] table")
    unknown = sorted(set(data) - set(TOP_FIELDS)) or sorted(set(grid) - set(GRID_FIELDS))
    if unknown:
        raise LedgerError(f"unknown sweep setting {shown(unknown[0])}: use {', '.join(TOP_FIELDS)}; "
                          f"[grid] takes {', '.join(GRID_FIELDS)}")
    from probes import ProbeError, parse_transforms

    try:
        transforms = tuple(parse_transforms(_values("transforms", data.get("transforms", "all"), str)))
    except ProbeError as exc:
        raise LedgerError(str(exc)) from None
    repeats = _one(data, "repeats", int, 1)
    if repeats < 1:
        raise LedgerError(f"repeats = {repeats!r}: a whole number, at least 1")
    spec = SweepSpec(name=name, objectives=tuple(_values("objectives", data.get("objectives", ["toy"]), str)),
                     transforms=transforms, repeats=repeats, cold_warm=_one(data, "cold_warm", bool, False),
                     steady_calls=_one(data, "steady_calls", int, None),
                     cache=_cache_policy(_one(data, "cache", str, "per-task")),
                     setup=check_setup(_values("setup", data["setup"], str) if data.get("setup", []) != [] else []),
                     grid={k: _values(f"grid.{k}", v, GRID_TYPES[k]) for k, v in grid.items()})
    for task in spec.tasks() if check_tasks else ():
        check_task(spec, task)
    return spec


def load(path: Path) -> SweepSpec:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise LedgerError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise LedgerError(f"{path}: not a sweep spec (TOML): {exc}") from None
    return from_dict(data, path.stem)


def probe_options(spec: SweepSpec, task: Task, cache_dir: str | None) -> dict:
    """The `ledger probe` options of one task."""
    options = dict(objective=task.objective, transforms=spec.transforms, cold_warm=spec.cold_warm,
                   cache_dir=cache_dir, **task.cell)
    if spec.steady_calls is not None:
        options["steady_calls"] = spec.steady_calls
    return options


def check_task(spec: SweepSpec, task: Task) -> None:
    from probes import ProbeError, ProbeSpec

    try:
        ProbeSpec.make(**probe_options(spec, task, None))
    except (ProbeError, TypeError, ValueError) as exc:
        raise LedgerError(f"task {task.index} ({task.label()}): {exc}") from None
