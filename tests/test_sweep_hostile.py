"""`ledger sweep` against unbounded and hostile input (issue 13): the task cap, whole
numbers out of range, spec files and sweep.json that are not regular files of sane
size, and properties (hypothesis) over spec TOML and sweep.json content: each is
accepted and valid, or refused in one line on stderr, no traceback, nothing made."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from .conftest import examples, run_cli
from .helpers import ONE_TASK, made_sweep, rewrite_sweep_file, spec_file

LEDGER = Path(sys.executable).with_name("ledger")
CAP_HELP = "or raise the cap with --max-tasks or LEDGER_SWEEP_MAX_TASKS (at most 100000)"
OVER_CEILING = "or split it: no sweep has more than 100000"


def _refused(result, message: str | None = None) -> str:
    """A CliRunner result that is one line on stderr, exit 1, no traceback; the line."""
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), (result.output, result.exception)
    assert result.stdout == "" and result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), result.stderr
    if message is not None:
        assert result.stderr == f"error: {message}\n"
    return result.stderr


def _why(line: str) -> str:
    """An error line's kind, for hypothesis's statistics: its words up to the value."""
    line = line.split("sweep.json: not a sweep file (")[-1].replace(str(Path.cwd()), "")
    return " ".join(line.split()[:3] if line.startswith("error:") else line.split()[:2])[:40]


# Forks the ledger and writes its peak RSS (KiB) to argv[1]. The ledger must not be a
# fork of pytest itself: a forked child's ru_maxrss starts at its parent's RSS (600 MB
# of a suite that imported jax), and exec does not reset it.
PEAK_RSS_WRAPPER = (
    "import os, sys\n"
    "pid = os.posix_spawn(sys.argv[2], sys.argv[2:], os.environ)\n"
    "_, status, usage = os.wait4(pid, 0)\n"
    "open(sys.argv[1], 'w').write(str(usage.ru_maxrss))\n"
    "sys.exit(os.waitstatus_to_exitcode(status) % 256)\n"
)


def _measured(args: list, timeout: float = 60) -> tuple[subprocess.CompletedProcess, float, int]:
    """`ledger *args` in a child; its result, wall seconds and peak RSS in MB (the
    ledger's own, reported by a small wrapper that spawned it)."""
    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r") as peak:
        # 1 GiB of address space at most (ulimit -v): a sweep that makes its tasks
        # fails there (MemoryError) instead of taking the machine's memory (issue 13: 5.5 GB)
        child = subprocess.Popen(["bash", "-c", 'ulimit -v 1048576 && exec "$@"', "-",
                                  sys.executable, "-c", PEAK_RSS_WRAPPER, peak.name, LEDGER, *map(str, args)],
                                 stdout=out, stderr=err, start_new_session=True)
        while True:
            pid, status, _ = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > timeout:
                os.killpg(child.pid, 9)  # the wrapper and the ledger it spawned
                os.wait4(child.pid, 0)
                pytest.fail(f"ledger {' '.join(map(str, args))} ran past {timeout} s")
            time.sleep(0.02)
        child.returncode = os.waitstatus_to_exitcode(status)  # Popen's own wait would find no child
        out.seek(0), err.seek(0)
        done = subprocess.CompletedProcess(child.args, child.returncode, out.read().decode(), err.read().decode())
        rss_kib = int(peak.read() or 0)
    return done, time.monotonic() - start, rss_kib // 1024


# -- the task cap --------------------------------------------------------------------

def _grid(n: int, m: int) -> str:
    return f"[grid]\nn_batch = {list(range(1, n + 1))}\nbatch_size = {list(range(1, m + 1))}\n"


def _over(objectives: int, cells: int, repeats: int, cap: int = 10_000) -> str:
    """The cap's refusal of a sweep of more than the ceiling."""
    return (f"the sweep has {objectives * cells * repeats} tasks ({objectives} objective(s) x {cells} grid cell(s) x "
            f"{repeats} repeat(s)), over the cap of {cap}: make the grid smaller, {OVER_CEILING}")


@pytest.mark.parametrize("text, message", [
    (_grid(1000, 1000), _over(1, 1_000_000, 1)),
    ("repeats = 100000000\n", _over(1, 1, 100_000_000)),
    ("repeats = 18446744073709551616\n", "repeats = 18446744073709551616: a whole number, at most 2147483647"),
    ("repeats = 2147483647\n", _over(1, 1, 2147483647)),
    ("repeats = 2147483648\n", "repeats = 2147483648: a whole number, at most 2147483647"),
    (f"transforms = {json.dumps(['jit'] * 170_000, separators=(',', ':'))}\n",  # a quadratic duplicate check
     "transforms: 170000 given, but there are 7: jit, grad, vag, vmap, vmap_vag, laxmap_vag, pyloop_vag"),
    ('objectives = ["toy", "toy"]\nrepeats = 2147483647\n' + _grid(1000, 1000), _over(2, 1_000_000, 2147483647)),
])
@pytest.mark.slow
def test_a_huge_sweep_is_refused_at_once_without_making_its_tasks(tmp_path, text, message):
    """Issue 13: a 1000 x 1000 grid reached 1 GB and printed 62 MB; repeats = 10^8, 5.5 GB;
    2**64 an OverflowError. The count is multiplied out before a task is made."""
    done, seconds, rss_mb = _measured(["sweep", "plan", spec_file(tmp_path, text)], timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", f"error: {message}\n")
    assert seconds < 10 and rss_mb < 200, (seconds, rss_mb)


@pytest.mark.slow
def test_the_cap_is_the_option_else_the_environment_else_10000(tmp_path, monkeypatch):
    three = spec_file(tmp_path, "repeats = 3\n")  # 3 tasks
    over = "the sweep has 3 tasks (1 objective(s) x 1 grid cell(s) x 3 repeat(s)), over the cap of 2: " \
           f"make the grid smaller, {CAP_HELP}"
    for verb in (["plan"], ["run"], ["submit", "--dry-run"]):
        _refused(run_cli("sweep", *verb, three, "--max-tasks", "2"), over)
    monkeypatch.setenv("LEDGER_SWEEP_MAX_TASKS", "2")
    for verb in (["plan"], ["run"], ["submit", "--dry-run"]):
        _refused(run_cli("sweep", *verb, three), over)
    assert not (tmp_path / "sweeps").exists() and not (tmp_path / "ledger.db").exists()
    assert run_cli("sweep", "plan", three, "--max-tasks", "3").stdout.endswith("\n3 tasks x 7 rows (jit, grad, vag, "
                                                                               "vmap, vmap_vag, laxmap_vag, pyloop_vag) = 21 rows\n")
    monkeypatch.setenv("LEDGER_SWEEP_MAX_TASKS", " ")  # blank: the default
    assert run_cli("sweep", "plan", spec_file(tmp_path, "repeats = 10000\n", "at_cap.toml")).exit_code == 0
    _refused(run_cli("sweep", "plan", spec_file(tmp_path, "repeats = 10001\n", "over.toml")),
             "the sweep has 10001 tasks (1 objective(s) x 1 grid cell(s) x 10001 repeat(s)), over the cap of 10000: "
             f"make the grid smaller, {CAP_HELP}")


@pytest.mark.parametrize("env, option, message", [
    ("0", None, "LEDGER_SWEEP_MAX_TASKS 0: a whole number from 1 to 100000"),
    ("100001", None, "LEDGER_SWEEP_MAX_TASKS 100001: a whole number from 1 to 100000"),
    ("1e3", None, "LEDGER_SWEEP_MAX_TASKS '1e3': a whole number from 1 to 100000"),
    ("-5", None, "LEDGER_SWEEP_MAX_TASKS '-5': a whole number from 1 to 100000"),
    ("9" * 100_000, None, f"LEDGER_SWEEP_MAX_TASKS '{'9' * 59}...: a whole number from 1 to 100000"),
    ("\u0661\u0662", None, "LEDGER_SWEEP_MAX_TASKS '\u0661\u0662': a whole number from 1 to 100000"),  # Arabic 12
    ("7", "0", "--max-tasks 0: a whole number from 1 to 100000"),
    (None, "100001", "--max-tasks 100001: a whole number from 1 to 100000"),
    (None, "-1", "--max-tasks -1: a whole number from 1 to 100000"),
    (None, "18446744073709551616", "--max-tasks 18446744073709551616: a whole number from 1 to 100000"),
])
def test_a_cap_out_of_range_is_one_line_naming_where_it_came_from(tmp_path, monkeypatch, env, option, message):
    if env is not None:
        monkeypatch.setenv("LEDGER_SWEEP_MAX_TASKS", env)
    for verb in (["plan"], ["run"], ["submit", "--dry-run"]):
        _refused(run_cli("sweep", *verb, spec_file(tmp_path), *(["--max-tasks", option] if option else [])), message)
    assert not (tmp_path / "sweeps").exists() and not (tmp_path / "ledger.db").exists()


@pytest.mark.parametrize("text, message", [
    ("repeats = -1\n", "repeats = -1: a whole number, at least 1"),
    ("repeats = 0\n", "repeats = 0: a whole number, at least 1"),
    ("steady_calls = 18446744073709551616\n", "steady_calls = 18446744073709551616: a whole number, at most 2147483647"),
    ("steady_calls = 0\n", "steady_calls = 0: a whole number, at least 1"),
    ("[grid]\nn_batch = [4, 18446744073709551616]\n",
     "grid.n_batch = 18446744073709551616: a whole number, at most 2147483647"),
    ("[grid]\nbatch_size = [-3]\n", "grid.batch_size = -3: a whole number, at least 1"),
    ("repeats = 1.5\n", "repeats = 1.5: expected int values"),
    ("repeats = inf\n", "repeats = inf: expected int values"),
    ('cache = "/tmp/a\\nb"\n', ("cache = '/tmp/a\\nb': use one of per-task, shared, none or an absolute path "
                               "(one line, at most 4096 characters)")),
])
def test_a_number_or_list_out_of_range_is_one_line(tmp_path, text, message):
    start = time.monotonic()
    for verb in (["plan"], ["run"], ["submit", "--dry-run"]):
        _refused(run_cli("sweep", *verb, spec_file(tmp_path, text)), message)
    assert time.monotonic() - start < 10
    assert not (tmp_path / "sweeps").exists() and not (tmp_path / "ledger.db").exists()


@pytest.mark.slow
def test_a_long_value_is_cut_short_in_the_plan(tmp_path):
    """10^4 tasks of a 200-character value (the most a cell value may be) printed whole
    would be 2 MB of that one value; each is cut to 60."""
    text = f'repeats = 10000\n[grid]\ndataset_class = ["{"x" * 200}"]\n'
    done, seconds, rss_mb = _measured(["sweep", "plan", spec_file(tmp_path, text)])
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and len(lines) == 10_003 and seconds < 30 and rss_mb < 300, (seconds, rss_mb)
    assert lines[2] == f"   0  toy        dataset_class={'x' * 60}...       0"
    assert len(done.stdout) < 1_200_000  # whole, it would be 2.4 MB


ONE_LINE = "; a tag or cell value is one line of printable text"


@pytest.mark.parametrize("text, message", [
    (f'repeats = 10000\n[grid]\ndataset_class = ["{"x" * 500_000}"]\n',
     "grid.dataset_class is 500000 characters long; a tag or cell value is at most 200"),
    ('[grid]\nmodel_type = ["\\u001e"]\ndataset_class = ["a\\nb\\u001b[2J"]\n',
     "grid.model_type holds a control character ('\\x1e')" + ONE_LINE),
    ('[grid]\ninstrument = ["hst", "a\\tb"]\n', "grid.instrument holds a control character ('\\t')" + ONE_LINE),
], ids=["huge", "line-break", "tab"])
def test_a_grid_value_that_is_no_cell_value_is_refused_before_anything(tmp_path, text, message):
    """The rule `ledger probe --dataset-class` holds a value to (a sweep's task runs a
    probe of it): a 500k value printed whole in 10^4 rows was 5 GB of plan; a line break
    split a row. Refused where the spec is read, by every verb, before a task is made."""
    for verb in (["plan"], ["run"], ["submit", "--dry-run"]):
        _refused(run_cli("sweep", *verb, spec_file(tmp_path, text)), message)
    assert not (tmp_path / "sweeps").exists() and not (tmp_path / "ledger.db").exists()


def test_a_saved_sweep_with_a_line_break_or_escape_stays_one_row(tmp_path):
    """Found by the spec property: a "\\x1e" (a line break to str.splitlines) split a
    row; an ESC would drive the terminal. A spec is refused such a value now; a sweep
    saved before that still opens, its values shown escaped."""
    from ledger.sweep import spec, store

    text = '[grid]\nmodel_type = ["\\u001e"]\ndataset_class = ["a\\nb\\u001b[2J"]\n'
    saved = spec.from_dict(spec.tomllib.loads(text), "old", check_tasks=False)
    made = store.create(tmp_path / "sweeps", saved, "local", {"kind": store.PER_TASK, "path": None})
    status = run_cli("sweep", "status", made.dir)
    assert status.stdout.splitlines()[3] == "   0  toy \\x1e a\\nb\\x1b[2J  missing     0", status.stdout
    assert len(status.stdout.splitlines()) == 5  # summary, head, rule, the task, next


# -- files that are not a regular file of sane size -------------------------------------

def _not_regular(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """{case: (path, what it is)} of paths a spec or sweep.json may not be."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "dir").mkdir()
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(17 * 2**20)  # sparse: over either limit, written in no time
    (tmp_path / "fifo_link").symlink_to(fifo)
    return {"dev-zero": (Path("/dev/zero"), "is a character device"), "fifo": (fifo, "is a FIFO"),
            "dir": (tmp_path / "dir", "is a directory"), "big": (big, f"is {17 * 2**20} bytes, over "),
            "fifo-link": (tmp_path / "fifo_link", "is a FIFO")}


@pytest.mark.slow
@pytest.mark.parametrize("case", ["dev-zero", "fifo", "dir", "big", "fifo-link"])
def test_a_spec_that_is_not_a_regular_file_of_sane_size_is_one_line_and_never_blocks(tmp_path, case):
    """Issue 13: `sweep plan /dev/zero` grew to gigabytes and a FIFO blocked. Asked
    with stat before opening: a real FIFO with no writer, in a child with a timeout."""
    path, what = _not_regular(tmp_path)[case]
    for verb in (["plan"], ["run"], ["submit", "--dry-run"]):
        done, seconds, rss_mb = _measured(["sweep", *verb, path], timeout=20)
        assert done.returncode == 1 and done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
        expected = (f"error: {path} {what}: a sweep spec is read only from a regular file\n" if case != "big"
                    else f"error: {path} {what}1 MiB: a sweep spec is at most that\n")
        assert done.stderr == expected and seconds < 10 and rss_mb < 200
    assert not (tmp_path / "sweeps").exists() and not (tmp_path / "ledger.db").exists()


@pytest.mark.slow
@pytest.mark.parametrize("case", ["dev-zero", "fifo", "dir", "big", "fifo-link"])
def test_a_sweep_file_that_is_not_a_regular_file_of_sane_size_is_one_line_and_never_blocks(tmp_path, case):
    sweep = made_sweep(tmp_path)
    path, what = _not_regular(tmp_path)[case]
    (sweep / "sweep.json").unlink()
    (sweep / "sweep.json").symlink_to(path)  # what the file is, seen through its name
    for verb in ("status", "resume", "cancel"):
        done, seconds, _ = _measured(["sweep", verb, sweep], timeout=20)
        expected = (f"error: {sweep}/sweep.json {what}: a sweep file is read only from a regular file\n"
                    if case != "big" else f"error: {sweep}/sweep.json {what}16 MiB: a sweep file is at most that\n")
        assert (done.returncode, done.stdout, done.stderr) == (1, "", expected) and seconds < 10


def test_a_sweep_file_nested_past_the_parsers_limit_is_one_line(tmp_path):
    sweep = made_sweep(tmp_path)
    (sweep / "sweep.json").write_text("[" * 100_000 + "]" * 100_000)
    line = _refused(run_cli("sweep", "status", sweep))
    assert line.startswith(f"error: {sweep}/sweep.json: not a sweep file (RecursionError: maximum recursion depth")


def test_a_spec_nested_past_the_parsers_limit_is_one_line(tmp_path):
    _refused(run_cli("sweep", "plan", spec_file(tmp_path, "objectives = " + "[" * 50_000 + "]" * 50_000 + "\n")),
             f"{tmp_path}/grid.toml: not a sweep spec (TOML): nested too deep")


# -- sweep.json of the wrong shape: every verb that reads it ------------------------------

@pytest.mark.parametrize("change, why", [
    (lambda d: d["spec"].update(name="evil\ntouch PWNED\n#"), "sweep name 'evil\\ntouch PWNED\\n#'"),
    (lambda d: d["spec"].update(repeats="many"), "repeats = 'many': expected int values"),
    (lambda d: d["spec"].update(repeats=2**64), "repeats = 18446744073709551616: a whole number, at most"),
    (lambda d: d["spec"]["grid"].update(n_batch=[-4]), "grid.n_batch = -4: a whole number, at least 1"),
    (lambda d: d.update(mode=["local"] * 100_000), "ValueError: mode ['local', 'local', "),
    (lambda d: d.update(sweep_id="x\ny"), "ValueError: sweep_id 'x\\ny'"),
    (lambda d: d.update(sweep_id=7), "TypeError: expected text, got int"),
    (lambda d: d["db"].update(merge_into="/tmp/a\x00b"), "ValueError: '/tmp/a\\x00b': expected one line of text"),
    (lambda d: d["submissions"][0].update(tasks=[1]), "ValueError: submission"),  # it has task 0 only
    (lambda d: d["submissions"][0].update(tasks=[-1]), "ValueError: submission"),
    (lambda d: d["submissions"][0].update(job_id="\u0661\u0662"), "ValueError: submission"),
    (lambda d: d["submissions"][0].update(job_id="9" * 100_000), "ValueError: submission"),
    (lambda d: d.update(submissions={}), "TypeError: submissions: expected a list"),
    (lambda d: d.update(spec=[]), "TypeError: expected an object, got list"),
])
def test_a_sweep_file_of_the_wrong_shape_is_one_line_on_every_verb(tmp_path, change, why):
    """0f10c44 tried `status` only on a wrong shape; resume and cancel read it too."""
    sweep = made_sweep(tmp_path)
    rewrite_sweep_file(sweep, change)
    before = sorted(tmp_path.rglob("*"))
    for verb in ("status", "resume", "cancel"):
        line = _refused(run_cli("sweep", verb, sweep))
        assert line.startswith(f"error: {sweep}/sweep.json: not a sweep file (") and why in line, line
        assert len(line) < 500
    assert sorted(tmp_path.rglob("*")) == before and not (sweep / "sweep.sbatch").exists()


@pytest.mark.slow
@pytest.mark.parametrize("verb", ["status", "resume", "cancel"])
def test_a_sweep_file_over_the_ceiling_is_refused_without_making_its_tasks(tmp_path, verb):
    """A hand-edited `repeats` in sweep.json is held to the ceiling as a spec is to its
    cap: counted, never made (every verb made the sweep's tasks when it opened it)."""
    sweep = made_sweep(tmp_path)
    rewrite_sweep_file(sweep, lambda d: d["spec"].update(repeats=100_000_000))
    done, seconds, rss_mb = _measured(["sweep", verb, sweep], timeout=30)
    assert (done.returncode, done.stdout) == (1, ""), done.stderr[-500:]
    assert done.stderr == f"error: {sweep}/sweep.json: not a sweep file ({_over(1, 1, 100_000_000, 100_000)})\n"
    assert seconds < 10 and rss_mb < 200


def test_a_sweep_made_under_a_raised_cap_still_opens(tmp_path, monkeypatch):
    """The cap is for making a sweep; one made under --max-tasks opens under any cap
    (a sweep.json is held to the ceiling, 100000)."""
    from ledger.sweep import spec, store

    made = store.create(tmp_path / "sweeps", spec.from_dict({"repeats": 3, "transforms": ["jit"]}, "three", cap=3),
                        "local", {"kind": store.PER_TASK, "path": None})
    monkeypatch.setenv("LEDGER_SWEEP_MAX_TASKS", "1")
    status = run_cli("sweep", "status", made.dir)
    assert status.exit_code == 1 and status.stderr == "", status.output
    assert status.stdout.splitlines()[0] == f"sweep {made.sweep_id} (3 tasks, run here): 3 missing"


# -- properties ------------------------------------------------------------------------

WHOLE = st.one_of(st.integers(1, 4), st.integers(-2**70, 2**70), st.sampled_from([0, -1, 2**31 - 1, 2**31, 2**64]))
TEXT = st.one_of(st.sampled_from(["toy", "imaging", "hst", "jit", "grad", "all", "none", "per-task", "/tmp/c", ""]),
                 st.text(max_size=12))
SCALAR = st.one_of(WHOLE, TEXT, st.booleans(), st.floats(allow_nan=False), st.just(float("nan")))
VALUE = st.one_of(SCALAR, st.lists(SCALAR, max_size=5), st.lists(st.integers(1, 64), min_size=10, max_size=120),
                  st.dictionaries(st.sampled_from(["a", "n_batch"]), SCALAR, max_size=2))
TOP = st.sampled_from(["transforms", "repeats", "cold_warm", "steady_calls", "cache", "setup"])
GRID_KEY = st.sampled_from(["dataset_class", "instrument", "model_type", "n_batch", "batch_size", "mixed_precision"])
# Values a spec means, drawn more often than hostile ones, so that many specs are planned.
# Objectives only from these names: any other is imported when the spec is checked.
OBJECTIVES = st.lists(st.sampled_from(["toy", "toy", "toy", "nope.module:build", "toy:x", ""]), min_size=1, max_size=3)
HOSTILE_OBJECTIVES = st.one_of(SCALAR, st.lists(SCALAR, max_size=3)).filter(lambda v: ":" not in repr(v))
SENSIBLE = {
    "transforms": st.one_of(st.just("all"), st.lists(st.sampled_from(["jit", "grad", "vag", "vmap"]), min_size=1,
                                                      max_size=3, unique=True)),
    "repeats": st.one_of(st.integers(1, 3), st.integers(50, 400)), "cold_warm": st.booleans(),
    "steady_calls": st.integers(1, 3),
    "cache": st.sampled_from(["per-task", "shared", "none", "/tmp/c"]),
    "setup": st.lists(st.sampled_from(["module load cuda", "echo ok", "export A=1"]), max_size=2),
    "dataset_class": st.lists(st.sampled_from(["imaging", "interferometer"]), min_size=1, max_size=2),
    "instrument": st.lists(st.text(max_size=8), min_size=1, max_size=2), "model_type": st.lists(TEXT, max_size=2),
    "n_batch": st.lists(st.sampled_from([4, 8, 6]), min_size=1, max_size=2),
    "batch_size": st.lists(st.sampled_from([1, 2, 4]), min_size=1, max_size=2),
    "mixed_precision": st.lists(st.booleans(), min_size=1, max_size=2),
}


@st.composite
def spec_texts(draw) -> str:
    def table(keys) -> dict:
        # one value in five hostile: a spec with one is refused, and most are to be planned
        return {k: draw(VALUE if draw(st.integers(0, 4)) == 0 else SENSIBLE[k])
                for k in draw(st.lists(keys, max_size=4, unique=True))}

    top, grid = table(TOP), table(GRID_KEY)
    if draw(st.booleans()):
        top["objectives"] = draw(HOSTILE_OBJECTIVES if draw(st.integers(0, 4)) == 0 else OBJECTIVES)
    if draw(st.integers(0, 9)) == 0:
        draw(st.sampled_from([top, grid]))["colour"] = draw(VALUE)  # a setting there is not
    text = "".join(f"{k} = {_toml_value(v)}\n" for k, v in top.items())
    text += "[grid]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in grid.items()) if grid else ""
    if draw(st.integers(0, 4)) == 0:  # a truncated spec, now and then
        return text[:draw(st.integers(0, max(0, len(text) - 1)))]
    return text


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):  # a TOML basic string; a character TOML refuses raw is refused, one line
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(map(_toml_value, value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + "}"
    return str(value)


@pytest.mark.slow
@settings(max_examples=examples(120), suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(text=spec_texts())
@example(text="repeats = 18446744073709551616\n")
@example(text=_grid(1000, 1000))
@example(text="[grid]\nn_batch = [4, 8]\n" + "batch_size = [1, 2, 4]\nrepeats = 3\n")
def test_any_spec_is_planned_within_the_cap_or_refused_in_one_line(tmp_path, text):
    path = tmp_path / "fuzz.toml"
    path.write_text(text, encoding="utf-8")
    before = sorted(tmp_path.rglob("*"))
    result = run_cli("sweep", "plan", path, "--max-tasks", "200")
    dry = run_cli("sweep", "submit", path, "--max-tasks", "200", "--dry-run", "--dir", tmp_path / "sweeps")
    assert sorted(tmp_path.rglob("*")) == before  # plan and --dry-run make nothing
    if result.exit_code != 0:
        event(f"refused: {_why(_refused(result))}")
        assert len(result.stderr) < 600
        assert dry.exit_code == 1 and dry.stderr == result.stderr  # the same load refuses both
        return
    event("planned")
    from ledger.sweep import spec

    loaded = spec.load(path, 200)
    count = len(loaded.objectives) * math.prod(len(v) for v in loaded.grid.values()) * loaded.repeats
    lines = result.stdout.splitlines()
    assert result.stderr == "" and 1 <= count <= 200 and len(lines) == count + 3
    assert lines[-1].startswith(f"{count} tasks x {loaded.rows_per_task()} rows (")
    assert dry.exit_code in (0, 1) and (dry.exit_code == 0 or len(_refused(dry)) < 600)


JSON = st.recursive(st.one_of(st.none(), st.booleans(), WHOLE, st.floats(), TEXT),
                    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
                    max_leaves=12)


# Values a sweep file holds somewhere, so that a changed one is often still a sweep.
PLAUSIBLE = st.sampled_from([0, 1, 2, "local", "slurm", "per-task", "env", "file", "jit", ["jit"], [0], [], {}, None,
                             "12", "toy", True, "/tmp/nowhere.db", {"job_id": "12", "tasks": [0]}])


def _paths(value, at=()) -> list[tuple]:
    """Every place in a JSON document, as a tuple of keys and indices."""
    out = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*at, i))
    return out


@st.composite
def sweep_files(draw, original: dict) -> bytes:
    data = json.loads(json.dumps(original))
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(_paths(data)))
        if not where:
            data = draw(JSON)
            continue
        parent = data
        for key in where[:-1]:
            parent = parent[key]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[where[-1]]
        else:
            parent[where[-1]] = draw(st.one_of(PLAUSIBLE, JSON))
    raw = json.dumps(data, indent=1).encode()
    how = draw(st.sampled_from(["as is"] * 4 + ["truncated", "bytes"]))
    if how == "truncated":
        return raw[:draw(st.integers(0, len(raw)))]
    return draw(st.binary(max_size=40)) if how == "bytes" else raw


_ORIGINAL: dict[Path, dict] = {}


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory) -> Path:
    """A sweep run here, one task done (its rows in a ledger file beside it)."""
    home = tmp_path_factory.mktemp("local_sweep")
    text = ONE_TASK.replace('transforms = ["jit", "grad"]', 'transforms = ["jit"]')
    result = run_cli("sweep", "run", spec_file(home, text), "--dir", home / "sweeps", "--db", home / "ledger.db")
    assert result.exit_code == 0, result.output
    return next((home / "sweeps").iterdir())


@pytest.mark.jax
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_any_sweep_file_gives_a_status_or_one_line(local_sweep, data):
    # read once: the strategy must see the same document in every example (hypothesis
    # replays draws; a file re-read each time made it "inconsistent data generation")
    original = _ORIGINAL.setdefault(local_sweep, json.loads((local_sweep / "sweep.json").read_text()))
    raw = data.draw(sweep_files(original))
    home = local_sweep.parent.parent
    try:
        (local_sweep / "sweep.json").write_bytes(raw)
        before = sorted(home.rglob("*")), sorted(Path.cwd().rglob("*"))
        result = run_cli("sweep", "status", local_sweep)
        # status makes nothing, whatever it was told (a ledger named in it, ./ledger.db)
        assert (sorted(home.rglob("*")), sorted(Path.cwd().rglob("*"))) == before
    finally:
        (local_sweep / "sweep.json").write_text(json.dumps(original, indent=1) + "\n")
    if result.stderr:
        event(f"refused: {_why(_refused(result))}")
        assert len(result.stderr) < 600
        return
    event(f"status, exit {result.exit_code}")
    assert result.exit_code in (0, 1) and isinstance(result.exception, (SystemExit, type(None))), result.exception
    assert result.stdout.startswith("sweep ") and " tasks, " in result.stdout.splitlines()[0]


@pytest.mark.jax
def test_the_sweep_file_property_starts_from_a_sweep_that_opens(local_sweep):
    """The property above mutates a sweep whose status is complete: a refusal there is
    the mutation's, not a broken starting point."""
    result = run_cli("sweep", "status", local_sweep)
    assert result.exit_code == 0 and result.stdout.splitlines()[0].endswith("(1 tasks, run here): complete, 1 done")

