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

A sweep's size is capped (max_tasks): every task is an object in memory, a line of
`plan`, a row of `status` and a job array index. The count is multiplied out from the
sizes (objectives x grid cells x repeats, Python ints) before a single task is made,
so a grid of 10^6 cells or `repeats = 10**20` is refused at once, in one line. Whole
numbers are held to 1..WHOLE_MAX (a 2**64 never reaches the probe or the database).
The spec file itself must be a regular file of at most SPEC_MAX_BYTES, and what it is
is asked before it is opened (a FIFO would block, /dev/zero never end).
"""

from __future__ import annotations

import itertools
import math
import os
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from ledger.errors import LedgerError
from ledger.files import kind_of
from ledger.record import BUILDER_INPUTS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# the builder's inputs (ledger/record.py), in the order a grid is read and its tasks listed
GRID_FIELDS = ("dataset_class", "instrument", "model_type", "n_batch", "batch_size", "mixed_precision")
assert sorted(GRID_FIELDS) == sorted(BUILDER_INPUTS)
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
# The task cap: --max-tasks, else $LEDGER_SWEEP_MAX_TASKS, else the default; never over
# the ceiling (a sweep.json read back is held to the ceiling, so a sweep made under a
# raised cap still opens). 10^5 tasks are ~100 MB as objects and a 6 MB plan.
MAX_TASKS_DEFAULT, MAX_TASKS_CEILING, MAX_TASKS_ENV = 10_000, 100_000, "LEDGER_SWEEP_MAX_TASKS"
WHOLE_MAX = 2**31 - 1  # repeats, steady_calls, n_batch, batch_size
SPEC_MAX_BYTES = 2**20  # a spec is a few lines; 1 MiB is a generous ceiling, not a disk image
VALUE_SHOWN = 60  # characters of a value a table or message shows


@dataclass(frozen=True)
class Task:
    index: int
    objective: str
    cell: dict  # the GRID_FIELDS given for this task
    repeat: int

    def label(self) -> str:
        """The task in a few words, for tables and messages: each value cut short (a
        100k value in the grid stays a line, and 10^4 tasks a readable table)."""
        parts = [displayed(self.objective), *(
            displayed(v) if k in ("dataset_class", "instrument", "model_type") else f"{k}={v}"
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

    def task_count(self) -> int:
        """How many tasks, multiplied out, never made (a Python int: no overflow)."""
        return len(self.objectives) * math.prod(len(v) for v in self.grid.values()) * self.repeats

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
        if kind is int and not 1 <= v <= WHOLE_MAX:
            raise LedgerError(f"{name} = {shown(v)}: a whole number, " + ("at least 1" if v < 1 else f"at most {WHOLE_MAX}"))
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
    if value in CACHE_POLICIES or (isinstance(value, str) and Path(value).is_absolute()
                                   and not _LINE_BREAK.search(value) and len(value) <= 4096):
        return value
    raise LedgerError(f"cache = {shown(value)}: use one of {', '.join(CACHE_POLICIES)} or an absolute path "
                     f"(one line, at most 4096 characters)")


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


def check_grid_text(grid: dict) -> None:
    """The grid's text values, by the rule for a tag or cell value that `ledger probe`
    holds its options to (ledger/record_validation.check_text_value): one line of
    printable text, at most TEXT_VALUE_MAX characters. A saved sweep was checked when
    it was made (and one made before the rule still opens)."""
    from ledger.record_validation import RecordError, check_text_value

    for name, values in grid.items():
        if GRID_TYPES[name] is str:
            for value in values:
                try:
                    check_text_value(f"grid.{name}", value)
                except RecordError as exc:
                    raise LedgerError(str(exc)) from None


def max_tasks(given: int | None = None) -> int:
    """The task cap: `given` (--max-tasks), else $LEDGER_SWEEP_MAX_TASKS, else the default."""
    where = "--max-tasks"
    if given is None:
        text = os.environ.get(MAX_TASKS_ENV, "").strip()
        if not text:
            return MAX_TASKS_DEFAULT
        where, given = MAX_TASKS_ENV, int(text) if re.fullmatch(r"[0-9]{1,7}", text) else text
    if type(given) is not int or not 1 <= given <= MAX_TASKS_CEILING:
        raise LedgerError(f"{where} {shown(given)}: a whole number from 1 to {MAX_TASKS_CEILING}")
    return given


def check_size(spec: SweepSpec, cap: int) -> None:
    count = spec.task_count()
    if count > cap:
        cells = math.prod(len(v) for v in spec.grid.values())
        way = (f"or split it: no sweep has more than {MAX_TASKS_CEILING}" if count > MAX_TASKS_CEILING else
               f"or raise the cap with --max-tasks or {MAX_TASKS_ENV} (at most {MAX_TASKS_CEILING})")
        raise LedgerError(f"the sweep has {count} tasks ({len(spec.objectives)} objective(s) x {cells} grid cell(s)"
                          f" x {spec.repeats} repeat(s)), over the cap of {cap}: make the grid smaller, {way}")


def from_dict(data: dict, name: str, *, check_tasks: bool = True, cap: int | None = None) -> SweepSpec:
    """The spec of `data` (a TOML table), every value checked, at most `cap` tasks
    (default: max_tasks()); each task as its probe would be unless `check_tasks` is
    false (a saved spec: checked when it was made)."""
    check_name(name)
    grid = data.get("grid", {})
    if not isinstance(grid, dict):
        raise LedgerError(f"grid = {shown(grid)}: expected a [grid] table")
    unknown = sorted(set(data) - set(TOP_FIELDS)) or sorted(set(grid) - set(GRID_FIELDS))
    if unknown:
        raise LedgerError(f"unknown sweep setting {shown(unknown[0])}: use {', '.join(TOP_FIELDS)}; "
                          f"[grid] takes {', '.join(GRID_FIELDS)}")
    from ledger.probes import TRANSFORMS, ProbeError, parse_transforms

    names = _values("transforms", data.get("transforms", "all"), str)
    given = sum(bool(n.strip()) for n in names)
    if given > len(TRANSFORMS):  # one is given twice (parse_transforms's check of that is quadratic)
        raise LedgerError(f"transforms: {given} given, but there are {len(TRANSFORMS)}: "
                          f"{', '.join(TRANSFORMS)}")
    try:
        transforms = tuple(parse_transforms(names))
    except ProbeError as exc:
        raise LedgerError(str(exc)) from None
    repeats = _one(data, "repeats", int, 1)
    spec = SweepSpec(name=name, objectives=tuple(_values("objectives", data.get("objectives", ["toy"]), str)),
                     transforms=transforms, repeats=repeats, cold_warm=_one(data, "cold_warm", bool, False),
                     steady_calls=_one(data, "steady_calls", int, None),
                     cache=_cache_policy(_one(data, "cache", str, "per-task")),
                     setup=check_setup(_values("setup", data["setup"], str) if data.get("setup", []) != [] else []),
                     grid={k: _values(f"grid.{k}", v, GRID_TYPES[k]) for k, v in grid.items()})
    if check_tasks:
        check_grid_text(spec.grid)
    check_size(spec, max_tasks() if cap is None else cap)  # before a single task is made
    for task in spec.tasks() if check_tasks else ():
        check_task(spec, task)
    return spec


def load(path: Path, cap: int | None = None) -> SweepSpec:
    """The spec in the file at `path`, of at most `cap` tasks (default: max_tasks())."""
    cap = max_tasks(cap)  # a bad cap is refused before the file is read
    text = read_small_file(path, SPEC_MAX_BYTES, "a sweep spec")
    try:
        data = tomllib.loads(text.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise LedgerError(f"{path}: not a sweep spec (TOML): {exc}") from None
    except RecursionError:
        raise LedgerError(f"{path}: not a sweep spec (TOML): nested too deep") from None
    return from_dict(data, path.stem, cap=cap)



def read_small_file(path: Path, max_bytes: int, what: str) -> bytes:
    """The bytes of the regular file at `path` (a symlink followed), at most
    `max_bytes`, else one line saying what it is. What it is, is asked before it is
    opened (opening a FIFO blocks), and again of what was opened (O_NONBLOCK: a FIFO
    swapped in meanwhile does not block either)."""
    try:
        _regular(path, os.stat(path), max_bytes, what)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise LedgerError(f"no such file: {path}") from None
    except OSError as exc:
        raise LedgerError(f"cannot read {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        _regular(path, os.fstat(fd), max_bytes, what)
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:  # it grew since
        raise LedgerError(f"{path} is over {_size(max_bytes)}: {what} is at most that")
    return data


def _regular(path: Path, st: os.stat_result, max_bytes: int, what: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        kind = kind_of(st.st_mode, "not a regular file")
        raise LedgerError(f"{path} is {kind}: {what} is read only from a regular file")
    if st.st_size > max_bytes:
        raise LedgerError(f"{path} is {st.st_size} bytes, over {_size(max_bytes)}: {what} is at most that")


def _size(n: int) -> str:
    return f"{n // 2**20} MiB" if n % 2**20 == 0 else f"{n} bytes"


def probe_options(spec: SweepSpec, task: Task, cache_dir: str | None) -> dict:
    """The `ledger probe` options of one task."""
    options = dict(objective=task.objective, transforms=spec.transforms, cold_warm=spec.cold_warm,
                   cache_dir=cache_dir, **task.cell)
    if spec.steady_calls is not None:
        options["steady_calls"] = spec.steady_calls
    return options


def check_task(spec: SweepSpec, task: Task) -> None:
    from ledger.probes import ProbeError, ProbeSpec

    try:
        ProbeSpec.make(**probe_options(spec, task, None))
    except (ProbeError, TypeError, ValueError) as exc:
        # the label and the probe's message may quote a 100k value: each cut short
        raise LedgerError(f"task {task.index} ({cut(task.label(), 120)}): {cut(str(exc), 300)}") from None


def displayed(value) -> str:
    """A spec value as a table shows it: a line break or other control character
    escaped (it would split the row, or drive the terminal), then cut short."""
    text = str(value)
    return cut(text if text.isprintable() else repr(text)[1:-1], VALUE_SHOWN)


def cut(text: str, limit: int) -> str:
    """`text` as a table or message shows it: at most `limit` characters, and '...'."""
    return text if len(text) <= limit else text[:limit] + "..."
