"""`pytest --ledger` (ledger/pytest_plugin/) on suites written for it, each run as a real
pytest in a subprocess (pytester), with the plugin loaded by its pytest11 entry point.

The oracle: the suite's own conftest listens to JAX's events (jax.monitoring) and
appends, per compile, the test pytest says is running (PYTEST_CURRENT_TEST) and, per
persistent-cache hit, the same: what the ledger's rows must say, test by test."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from .conftest import query, run_cli

pytest_plugins = ["pytester"]

# The suite's own listener: one line per backend compile ("c") and per cache hit ("h"),
# naming the test and phase pytest says is running ("-" outside any: a module's import).
ORACLE = r'''
import os
import jax

SEEN = os.environ["ORACLE_FILE"]
os.environ.pop("PYTEST_CURRENT_TEST", None)  # the outer pytest's: this session's own comes per test

def _saw(kind):
    now = os.environ.get("PYTEST_CURRENT_TEST", "-")
    fd = os.open(SEEN, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, f"{kind}|{now}\n".encode())
    os.close(fd)

def _duration(event, duration, **kw):
    if event == "/jax/core/compile/backend_compile_duration":
        _saw("c")

def _event(event, **kw):
    if event == "/jax/compilation_cache/cache_hits":
        _saw("h")

jax.monitoring.register_event_duration_secs_listener(_duration)
jax.monitoring.register_event_listener(_event)
'''

SUITE = r'''
import jax
import jax.numpy as jnp
import pytest

ONES = jnp.ones(3)  # compiled at import, while pytest collects the module


def step(x):
    return jnp.sin(x) * 2.0 + 1.0


@pytest.fixture
def data():
    return jax.jit(lambda: jnp.arange(4.0))()  # the fixture's own compile: its setup's


def test_step(data):
    f = jax.jit(step)
    for _ in range(3):
        f(data)


def test_two_shapes():
    f = jax.jit(lambda x: x * 3.0)
    f(jnp.zeros(2))
    f(jnp.zeros(5))


@pytest.mark.parametrize("n", [1, 2])
def test_grad(n):
    jax.jit(jax.grad(lambda x: jnp.sum(x ** n)))(jnp.ones(4))
'''

RECOMPILING = r'''
import jax
import jax.numpy as jnp
import numpy as np
import pytest

X = np.ones(3, np.float32)  # a NumPy array: no compile of its own


@pytest.mark.compile_budget(compiles=2)
def test_fresh_jit_each_call():
    for i in range(3):
        def loss(x):
            return jnp.sum(x * x)
        jax.jit(loss)(X)  # a new function each time: JAX compiles it again


@pytest.mark.compile_budget(compiles=2)
def test_one_jit_reused():
    def loss(x):
        return jnp.sum(x * x)
    f = jax.jit(loss)
    for i in range(3):
        f(X)
'''


@pytest.fixture
def suite(pytester, monkeypatch, tmp_path):
    oracle = tmp_path / "oracle.txt"
    monkeypatch.setenv("ORACLE_FILE", str(oracle))
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    pytester.makeconftest(ORACLE)
    pytester.makepyfile(test_suite=SUITE)
    pytester.oracle = oracle
    pytester.db = tmp_path / "ledger.db"
    return pytester


def _run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


def _oracle(path, kind="c") -> Counter:
    """(test, phase) -> how many compiles (or hits) the suite's listener saw."""
    seen = Counter()
    for line in path.read_text().splitlines():
        k, _, now = line.partition("|")
        if k == kind:
            test, _, phase = now.rpartition(" (")
            seen[(test, phase.rstrip(")"))] += 1 if now != "-" else 0
            seen[("-", "-")] += 1 if now == "-" else 0
    return +seen


def _rows(db, run=None, where="1 = 1") -> Counter:
    sql = f"SELECT test_id, test_phase FROM compile_records WHERE {where}"
    sql += f" AND run_id = '{run}'" if run else ""
    return Counter((t, p) if p != "collect" else ("-", "-") for t, p in query(db, sql))


def _runs(db) -> list[str]:
    return [r for (r,) in query(db, "SELECT run_id FROM compile_records GROUP BY run_id ORDER BY MIN(id)")]


@pytest.mark.jax
def test_every_compile_the_suites_listener_saw_is_a_row_of_its_test(suite):
    result = _run(suite, "--ledger", f"--ledger-db={suite.db}")
    result.assert_outcomes(passed=4)
    rows = _rows(suite.db)
    assert rows == _oracle(suite.oracle) and rows[("-", "-")] >= 1
    assert rows[("test_suite.py::test_step", "setup")] == 1  # the fixture's compile is its setup's
    assert rows[("test_suite.py::test_step", "call")] == 1
    assert rows[("test_suite.py::test_two_shapes", "call")] >= 2  # one program per shape
    assert query(suite.db, "SELECT DISTINCT test_id FROM compile_records WHERE test_phase = 'collect'") == [
        ("test_suite.py",)]
    (run,) = _runs(suite.db)
    command, commit = query(suite.db, "SELECT DISTINCT command, git_commit FROM compile_records")[0]
    assert command.startswith("pytest --basetemp=") and command.endswith(f" -p no:cacheprovider --ledger --ledger-db={suite.db}")
    assert commit is None  # pytester's dir is no git checkout
    written = len(query(suite.db, "SELECT id FROM compile_records"))
    assert f"ledger: {written} compiles recorded into {suite.db} ({written} none), session {run}" in result.stdout.str()
    runs = run_cli("runs", "--db", suite.db)
    assert runs.exit_code == 0 and run in runs.output and "pytest --basetemp=" in runs.output


@pytest.mark.jax
def test_a_second_session_on_a_persistent_cache_is_warm_where_jax_hit(suite, tmp_path, monkeypatch):
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "jax-cache"))
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "-1")
    _run(suite, f"--ledger-db={suite.db}").assert_outcomes(passed=4)
    suite.oracle.unlink()
    _run(suite, f"--ledger-db={suite.db}").assert_outcomes(passed=4)
    first, second = _runs(suite.db)
    assert _rows(suite.db, second) == _oracle(suite.oracle)
    warm = _rows(suite.db, second, "cache_state = 'warm'")
    assert warm == _oracle(suite.oracle, "h") and sum(warm.values()) >= 6
    assert _rows(suite.db, first, "cache_state = 'warm'") == Counter()


@pytest.mark.jax
def test_a_recompiling_test_fails_its_budget_naming_the_function(pytester, monkeypatch):
    """A budget holds in any session, recorded or not: the marker is the asking."""
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    pytester.makepyfile(test_budget=RECOMPILING)
    result = _run(pytester, "-rf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([("compile_budget exceeded: 3 compiles > 2: jit_loss 3x; recompiled:"
                                 " jit_loss(f32[3] -> f32[]) 3 times"),
                                 "FAILED test_budget.py::test_fresh_jit_each_call - Failed: compile_budget*"])
    assert not list(pytester.path.glob("*.db")) and "ledger: " not in result.stdout.str()  # no ledger was asked for


@pytest.mark.jax
def test_ledger_check_after_a_change_that_adds_a_recompile_fails_exactly_that_test(suite):
    pinned = _run(suite, "--ledger-pin", f"--ledger-db={suite.db}")
    pinned.assert_outcomes(passed=4)
    pinned.stdout.fnmatch_lines(["ledger: pinned the compile counts of 4 tests from session *"])
    held = _run(suite, "--ledger-check", f"--ledger-db={suite.db}")
    held.assert_outcomes(passed=4)
    held.stdout.fnmatch_lines(["ledger check: 4 tests judged against their pins: 0 grew"])
    # the change: test_step now builds its jitted function inside the loop
    suite.makepyfile(test_suite=SUITE.replace("    f = jax.jit(step)\n    for _ in range(3):\n        f(data)",
                                              "    for _ in range(3):\n        jax.jit(lambda x: step(x))(data)"))
    checked = _run(suite, "--ledger-check", f"--ledger-db={suite.db}", "-rf")
    checked.assert_outcomes(passed=3, failed=1)
    out = checked.stdout.str()
    assert re.findall(r"^FAILED (\S+)", out, re.MULTILINE) == ["test_suite.py::test_step"]
    grew = ("ledger-check: recompiled     test_suite.py::test_step: jit__lambda 0 -> 3 compiles: f32[4] -> f32[4]"
            " compiled 3 times in one process")
    # the line names what asked for the recompiles: the test's own line
    (said,) = re.findall(r"^E?\s*(" + re.escape(grew) + r" \(at test_suite\.py:\d+ test_step\))$", out, re.MULTILINE)
    grew = said
    checked.stdout.fnmatch_lines(["ledger check: 4 tests judged against their pins: 1 grew"])
    # and `ledger diff` of the two sessions says it in the same words
    pin_run, _, check_run = _runs(suite.db)
    diff = run_cli("diff", pin_run, check_run, "--db", suite.db)
    assert diff.exit_code == 1, diff.output
    assert grew.removeprefix("ledger-check: ") in diff.output.splitlines()
    assert "more-compiles  test_suite.py::test_step: jit_step 1 -> 0 compiles" not in diff.output
    assert "fewer-compiles test_suite.py::test_step: jit_step 1 -> 0 compiles" in diff.output


@pytest.mark.jax
def test_rows_under_xdist_equal_those_of_a_serial_run(suite):
    suite.makepyfile(test_more=SUITE.replace("def test_", "def test_more_"))
    _run(suite, "--ledger-isolate", f"--ledger-db={suite.db}").assert_outcomes(passed=8)
    parallel = _run(suite, "--ledger-isolate", f"--ledger-db={suite.db}", "-n", "2")
    parallel.assert_outcomes(passed=8)
    serial_run, xdist_run = _runs(suite.db)
    names = "SELECT test_id, test_phase, function, input_signature, pid FROM compile_records WHERE run_id = ?"

    def tests(run):
        return Counter(r[:4] for r in query(suite.db, names, (run,)) if r[1] != "collect")

    assert tests(xdist_run) == tests(serial_run) and sum(tests(serial_run).values()) >= 16
    assert len({r[4] for r in query(suite.db, names, (xdist_run,)) if r[1] != "collect"}) == 2  # both workers ran tests
    # each worker imports every module it collects: the collection's rows are each worker's, once
    collect = [r for r in query(suite.db, names, (xdist_run,)) if r[1] == "collect"]
    by_pid = Counter(r[4] for r in collect)
    serial_collect = Counter(r[:4] for r in query(suite.db, names, (serial_run,)) if r[1] == "collect")
    for pid in by_pid:
        assert Counter(r[:4] for r in collect if r[4] == pid) == serial_collect
    # and the two sessions, test by test, differ in nothing but noise
    diff = run_cli("diff", serial_run, xdist_run, "--db", suite.db, "--json")
    counts = json.loads(diff.output)["counts"]
    assert counts["recompiled"] == counts["more-compiles"] == counts["fewer-compiles"] == 0, diff.output


@pytest.mark.slow
def test_a_ledger_that_cannot_be_used_stops_the_session_before_any_test(pytester, tmp_path):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    for args, says in [(("--ledger-db", tmp_path / "no-such-dir" / "l.db"), "cannot create the ledger"),
                       (("--ledger-db", "postgresql+psycopg://u:secret@localhost/x"), "--db carries a password"),
                       (("--ledger", "--ledger-tag", "two\nlines"), "--ledger-tag holds a control character")]:
        result = _run(pytester, *map(str, args))
        assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
        assert "ERROR: ledger: " in result.stderr.str() and says in result.stderr.str()
        assert "secret" not in result.stderr.str() + result.stdout.str()
        assert "passed" not in result.stdout.str()


@pytest.mark.slow
def test_unasked_the_plugin_imports_neither_jax_nor_sqlalchemy(pytester):
    pytester.makeconftest("import sys\n\ndef pytest_sessionfinish(session):\n"
                          "    print('MODULES', 'jax' in sys.modules, 'sqlalchemy' in sys.modules, "
                          "'ledger.pytest_plugin.session' in sys.modules)\n")
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = _run(pytester, "-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*MODULES False False False*"])
    assert "--ledger" in _run(pytester, "--help").stdout.str()


# -- the judgements themselves, on compiles in hand (no JAX) -------------------------------
def _compiles(*specs):
    from ledger.pytest_plugin.tally import Compile

    return [Compile(f, sig, state, s, load, "t.py::t", "call") for f, sig, state, s, load in specs]


def _mark(*args, **kwargs):
    return pytest.mark.compile_budget(*args, **kwargs).mark


def test_a_budget_counts_every_compile_and_seconds_only_of_real_compiles_on_an_unloaded_host():
    from ledger.pytest_plugin.budget import Budget, judge

    calls = _compiles(("jit_big", "f32[8] -> f32[]", "cold", 1.5, 0.5), ("jit_big", "f32[9] -> f32[]", "none", 1.0, 0.5),
                      ("jit_add", "f32[] -> f32[]", "warm", 9.0, 0.5))
    assert judge(Budget(compiles=3, seconds=2.6), calls, cores=2) == (None, None)  # the warm read is not spent
    over, note = judge(Budget(compiles=2, seconds=2.0), calls, cores=2)
    assert over == ("compile_budget exceeded: 3 compiles > 2: jit_big 2x, jit_add 1x;"
                    " 2.50 s compiling > 2 s: jit_big 2.50 s") and note is None
    # the same compiles on a loaded host: the count is judged, the seconds are said not to be
    busy = _compiles(("jit_big", "f32[8] -> f32[]", "cold", 9.0, 3.5))
    assert judge(Budget(compiles=1, seconds=1.0), busy, cores=2) == (
        None, ("compile_budget(seconds=1) not judged: 1 of its 1 compiles on a loaded host (1-minute load 3.50 > 2"
              " usable cores)"))


def test_a_budget_names_at_most_four_functions_and_the_recompiled_signature():
    from ledger.pytest_plugin.budget import Budget, judge

    calls = _compiles(*[(f"jit_f{i}", "f32[]", "none", 0.01, None) for i in range(6)],
                      *[("jit_step", "f32[3] -> f32[3]", "none", 0.01, None)] * 3)
    over, _ = judge(Budget(compiles=0), calls)
    assert over == ("compile_budget exceeded: 9 compiles > 0: jit_step 3x, jit_f0 1x, jit_f1 1x, jit_f2 1x and 3 more;"
                    " recompiled: jit_step(f32[3] -> f32[3]) 3 times")


@pytest.mark.parametrize("mark, says", [
    (_mark(3), "keywords only"), (_mark(compile=3), "has no compile"), (_mark(compiles=-1), "a count"),
    (_mark(compiles="3"), "a count"), (_mark(seconds=float("nan")), "seconds, 0 or more"),
    (_mark(compiles=True), "a count"), (_mark(), "needs compiles=N, seconds=S or both")])
def test_a_budget_marker_that_cannot_be_judged_says_why(mark, says):
    from ledger.pytest_plugin.budget import Budget, BudgetError

    with pytest.raises(BudgetError, match=re.escape(says)):
        Budget.of_marker(mark)


def test_a_count_against_a_pin_names_what_is_new_or_compiled_again():
    from ledger.report.diff_tests import Compiled, line, unit_changes

    def unit(*compiles):
        out = {}
        for function, sig, pid in compiles:
            out.setdefault(function, Compiled()).add(sig, pid, site="lib/fit.py:12")
        return out

    now = unit(("jit_step", "f32[3]", 1), ("jit_step", "f32[3]", 1), ("jit_loss", "f32[3]", 1),
               ("jit_loss", "f32[5]", 1), ("jit_new", "i32[]", 1))
    found = {f["function"]: line(f) for f in unit_changes("t.py::t", "call", {"jit_step": 1, "jit_loss": 1,
                                                                              "jit_gone": 2}, now)}
    assert found == {
        "jit_step": "recompiled     t.py::t: jit_step 1 -> 2 compiles: f32[3] compiled 2 times in one process"
                    " (at lib/fit.py:12)",
        "jit_loss": "more-compiles  t.py::t: jit_loss 1 -> 2 compiles",  # a pin keeps no signatures
        "jit_new": "more-compiles  t.py::t: jit_new 0 -> 1 compiles: new function: i32[] (at lib/fit.py:12)",
        "jit_gone": "fewer-compiles t.py::t: jit_gone 2 -> 0 compiles"}
    # two sessions: a new signature is named; two workers importing one module are not "more"
    before = unit(("jit_loss", "f32[3]", 1), ("jit_mod", "f32[]", 1))
    after = unit(("jit_loss", "f32[3]", 2), ("jit_loss", "f32[5]", 2), ("jit_mod", "f32[]", 2), ("jit_mod", "f32[]", 3))
    assert [line(f) for f in unit_changes("t.py", "setup", before, after)] == [
        "more-compiles  t.py (setup): jit_loss 1 -> 2 compiles: new signature f32[5] (at lib/fit.py:12)"]
