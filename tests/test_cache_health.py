"""The cache's health in `ledger check` (ledger/watch/health.py): cache-not-written from a
recorded jax.distributed job of two processes on two hosts (two UTS and mount namespaces:
each its own host name and its own copy of the cache dir's path), below-threshold from a
recorded program whose compiles are too quick for JAX to write, and evicted from rows
(a size-limited cache's churn needs a run of 7 programs; its rows are what the recorder
writes, imported). Each kind's exact line, and a daily check that agrees with a full one."""

from __future__ import annotations

import json
import socket
import sys

import pytest
import sqlalchemy as sa

from ledger.storage.open import open_ledger
from ledger.watch.kinds import HEALTH_KINDS

from .case_kinds import mount_namespace
from .conftest import query, run_cli
from .helpers import program, recorded
from .ledgers import add, rec

PY = sys.executable

# One process of a two-process job (process_id and the coordinator's port from argv): a
# likelihood over the job's global devices, one per process, so one cache key for both.
DISTRIBUTED = '''
import sys
import numpy as np
import jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
jax.distributed.initialize(coordinator_address="127.0.0.1:" + sys.argv[2], num_processes=2,
                           process_id=int(sys.argv[1]))
mesh = Mesh(np.array(jax.devices()), ("p",))
x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("p")), np.ones((1, 32), np.float32))
def likelihood(v):
    return jnp.sum(jnp.sin(v))
print(jax.process_index(), float(jax.jit(likelihood, out_shardings=NamedSharding(mesh, P()))(x)), flush=True)
jax.distributed.shutdown()
'''

# Each process as if on its own host: a host name, a hosts file that names both (the
# collectives resolve it), and the host's own dir mounted at the cache dir's path.
NODE = '''
hostname "$1"
mount --bind "$HOSTS" /etc/hosts
mount --bind "$2" "$JAX_COMPILATION_CACHE_DIR"
shift 2
exec "$@"
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _job(tmp_path, db, namespace: list[str]) -> None:
    """One recorded run of the job: both processes under one `ledger record`."""
    port = str(_free_port())
    node = [*namespace, "--uts", "sh", "-ec", NODE, "node"]
    launch = program(tmp_path, f'''
import subprocess, sys
procs = [subprocess.Popen({node!r} + [host, {str(tmp_path)!r} + "/" + host, {PY!r}, {str(tmp_path / "dist.py")!r},
                          str(i), {port!r}]) for i, host in enumerate(("node-a", "node-b"))]
sys.exit(max(p.wait() for p in procs))
''', "launch.py")
    out = recorded(tmp_path, db, PY, launch, env={"HOSTS": str(tmp_path / "hosts"),
                                                "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"})
    assert out.returncode == 0, out.stderr


@pytest.mark.jax
@pytest.mark.namespace
def test_a_two_host_job_with_a_node_local_cache_dir_is_cache_not_written(tmp_path):
    namespace, why = mount_namespace()
    assert namespace is not None, why  # the case is marked namespace: conftest checked
    program(tmp_path, DISTRIBUTED, "dist.py")
    (tmp_path / "hosts").write_text("127.0.0.1 localhost node-a node-b\n")
    for d in ("cache", "node-a", "node-b"):
        (tmp_path / d).mkdir()
    db = tmp_path / "ledger.db"
    for _ in range(2):
        _job(tmp_path, db, namespace)
    # process 0 wrote into node-a's dir; process 1 read node-b's, empty, on both runs
    assert [p.name for p in (tmp_path / "node-b").iterdir()] == [] and any((tmp_path / "node-a").iterdir())
    rows = query(db, "SELECT hostname, process_index, cache_state FROM compile_records"
                     " WHERE function = 'jit_likelihood' ORDER BY id")
    assert sorted(rows[2:]) == [("node-a", 0, "warm"), ("node-b", 1, "cold")], rows
    result = run_cli("check", "--db", db, "--json")
    # process 1's cold compiles are not read against process 0's warm ones (another key, another
    # process's program: a went-cold "accelerator_config" once): the one finding is the job's
    assert result.exit_code == 0, result.output
    (found,) = json.loads(result.output)["findings"]
    assert found["verdict"] == "cache-not-written"
    # on CPU each process's key names its own devices (accelerator_config): process 0's
    # entry is not process 1's, shared dir or not (the not-shared case: from rows, below)
    assert found["hostname"] == "node-b" and found["fails"] is False
    assert found["cause"].startswith("process 1 on node-b compiled ")
    assert found["cause"].endswith(f"into {tmp_path / 'cache'} again, as in an earlier run: JAX writes entries from"
                                   " process 0 only, and process 0 compiled them under other keys (differing in"
                                   " accelerator_config), so no process writes process 1's: it compiles them cold"
                                   " on every run, shared dir or not")


# Four jitted functions, each well under JAX's 1 s threshold: none is ever written.
QUICK = '''
import jax, jax.numpy as jnp
x = jnp.ones((16, 16))
for k in range(4):
    print(float(jax.jit(lambda v, k=k: jnp.sum(jnp.tanh(v * k) @ v))(x)))
'''


@pytest.mark.jax
def test_compiles_too_quick_for_the_cache_are_below_threshold_with_the_setting_named(tmp_path):
    db = tmp_path / "ledger.db"
    prog = program(tmp_path, QUICK, "quick.py")
    for _ in range(2):
        out = recorded(tmp_path, db, PY, prog, env={"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "1"})
        assert out.returncode == 0, out.stderr
    (n, total, run), = query(db, "SELECT count(*), sum(compile_s), run_id FROM compile_records WHERE cache_not_persisted"
                                 " = 'min_compile_time' AND run_id = (SELECT run_id FROM compile_records"
                                 " ORDER BY id DESC LIMIT 1)")
    assert n >= 4
    # the default (5 s a run) is far above these milliseconds: no finding about the run
    default = json.loads(run_cli("check", "--json", "--db", db).output)
    assert "below-threshold" not in {f["verdict"] for f in default["findings"]}
    result = run_cli("check", "--db", db, "--below-threshold-s", "0.001")
    assert result.exit_code == 0, result.output  # said, not failing
    # one root cause, one line: the cells never written and the run's finding about them
    (line,) = [ln for ln in result.output.splitlines() if ln.startswith("below-threshold")]
    assert line.startswith(f"below-threshold {n} cells of `") and f" (run {run[:12]}: {n} compiles): never written:" \
           " every compile was under jax_persistent_cache_min_compile_time_secs = 1 s;" in line
    assert line.endswith(f"; {total:.3g} s a run; JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 keeps them"
                         " [does not fail]")
    verbose = run_cli("check", "--verbose", "--db", db, "--below-threshold-s", "0.001").output.splitlines()
    (said,) = [ln for ln in verbose if ln.startswith("below-threshold")]  # the newest run only, not every run
    assert said.endswith(
        f" run {run[:12]}: row {said.split(': row ')[1].split(':')[0]}: {n} compiles under"
        f" jax_persistent_cache_min_compile_time_secs (1 s) took {total:.3g} s and were never written, so every run"
        " pays them again: setting it to 0 (JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0) keeps them, and would save"
        f" up to {total:.3g} s a run [does not fail]")


LIMIT = json.dumps({"jax_compilation_cache_dir": "/c", "jax_compilation_cache_max_size": 65536}, sort_keys=True)


def _entry_rows(states: str, settings: str = LIMIT, key: str = "jit_f-k1", **fixed) -> list[dict]:
    """One recorded row per state ('w' warm, 'c' cold), a run each, an hour apart."""
    return [rec(cache_state={"w": "warm", "c": "cold"}[s], cache_key=key, cache_dir="/c", jax_cache_settings=settings,
                run_id=f"run{i}", command="python fit.py", function="jit_f", transform="recorded",
                timestamp=f"2026-07-01T{10 + i:02d}:00:00+00:00", tag=f"t{i}", **fixed)
            for i, s in enumerate(states)]


def _findings(db, *args) -> list[dict]:
    result = run_cli("check", "--db", db, "--json", *args)
    return [f for f in json.loads(result.output)["findings"] if f["verdict"] in ("evicted", "below-threshold",
                                                                             "cache-not-written")]


@pytest.mark.slow
def test_an_entry_evicted_twice_under_a_size_limit_is_churn(tmp_path):
    db = tmp_path / "ledger.db"
    ids = add(db, tmp_path, *_entry_rows("cwcwwc"))
    (f,) = _findings(db)
    assert (f["verdict"], f["row_id"], f["fails"]) == ("evicted", ids[-1], True)
    assert f["cause"] == ("entry jit_f-k1 in /c on node1 was evicted and compiled cold again 2 times (warm, then cold"
                          f" with the same key; last warm row {ids[-2]}) under jax_compilation_cache_max_size=65536"
                          " bytes: raise the limit, or remove dead weight (`ledger cache prune`)")
    # explain and check's went-cold name the limit for the cold row of the same key
    said = ("same cache key as the warm row, under jax_compilation_cache_max_size=65536 bytes: likely evicted"
            " (JAX removes the least recently used entries when the dir is full)")
    assert f"cause: {said}" in run_cli("explain", str(ids[-1]), "--db", db).output
    assert f"row {ids[-1]} is cold: {said} (last warm row {ids[-2]})" in run_cli("check", "--verbose", "--db", db).output
    # the report says what the newest check found, as check said it
    report = run_cli("report", "--db", db).output
    assert report.split("### cache health\n\n")[1].split("\n\n")[:2] == [
        "From check run 2 (" + query(db, "SELECT checked_at FROM check_runs WHERE id = 2")[0][0] + "): what the cache fails to keep, and what a process compiled again.",
        f"- evicted       `python fit.py` run run5: row {ids[-1]}: {f['cause']}"]  # the entry's program and run
    html = tmp_path / "r.html"
    assert run_cli("report", "--db", db, "--html", html).exit_code == 0
    assert "<h2>cache health</h2>" in html.read_text()


@pytest.mark.parametrize("why, rows", [
    ("once is not churn", _entry_rows("cwcw")),
    ("no size limit: a went-cold, not eviction", _entry_rows("cwcwc", settings=json.dumps(
        {"jax_compilation_cache_max_size": -1}))),
    ("cold after cold, never warm between", _entry_rows("ccwcc")),
])
@pytest.mark.slow
def test_what_is_not_eviction_churn(tmp_path, why, rows):
    db = tmp_path / "ledger.db"
    add(db, tmp_path, *rows)
    assert _findings(db) == [], why


def test_a_prune_between_is_not_an_eviction(tmp_path):
    from ledger.storage.models import cache_prunes

    from .ledgers import _insert

    db = tmp_path / "ledger.db"
    add(db, tmp_path, *_entry_rows("cwcwc"))
    _insert(db, cache_prunes, [{"cache_dir": "/c", "cache_key": "jit_f-k1", "entry": "jit_f-k1-cache", "bytes": 9,
                                "reason": "unused 30 days", "pruned_at": "2026-07-01T13:30:00+00:00"}])
    assert _findings(db) == []


def _job_rows(host1: str, key1: str = "jit_f-k1") -> list[dict]:
    """Two runs of a two-process job: process 0 on node1 (cold, then warm), process 1 on
    `host1`, cold both times with `key1`, not written (JAX: process_id != 0)."""
    common = {"run_id": "r1", "command": "python fit.py", "function": "jit_f", "transform": "recorded"}
    return [rec(cache_state="cold", process_index=0, cache_key="jit_f-k1", tag="a", **common),
            rec(cache_state="cold", process_index=1, cache_key=key1, hostname=host1, tag="b",
                cache_not_persisted="process_index", **common),
            rec(cache_state="warm", process_index=0, cache_key="jit_f-k1", tag="c", timestamp="2026-07-01T11:00:00",
                **common | {"run_id": "r2"}),
            rec(cache_state="cold", process_index=1, cache_key=key1, hostname=host1, tag="d",
                timestamp="2026-07-01T11:00:00", cache_not_persisted="process_index", **common | {"run_id": "r2"})]


@pytest.mark.slow
def test_cache_not_written_from_rows(tmp_path):
    """The job's rows as the recorder writes them: on two hosts with one key, the dir is
    not shared (fails); with process 1's own key, no process writes it (said); on one host,
    nothing: process 1 reads what process 0 writes there."""
    db = tmp_path / "ledger.db"
    ids = add(db, tmp_path, *_job_rows("node2"))
    (f,) = _findings(db)
    assert (f["verdict"], f["row_id"], f["fails"]) == ("cache-not-written", ids[3], True)
    assert f["cause"] == ("process 1 on node2 compiled 1 function cold (2 s) into /tmp/jax-cache again, as in an"
                          " earlier run: JAX writes entries from process 0 only, and process 0 found 1 of them warm"
                          f" on node1 (row {ids[2]}): the dir is not shared, each host has its own at that path; fix:"
                          " put jax_compilation_cache_dir on a file system every host sees")
    db = tmp_path / "own.db"
    ids = add(db, tmp_path, *_job_rows("node2", key1="jit_f-k2"))
    (f,) = _findings(db)
    assert (f["row_id"], f["fails"]) == (ids[3], False)
    assert f["cause"].endswith("and process 0 compiled them under other keys, so no process writes process 1's:"
                               " it compiles them cold on every run, shared dir or not")
    db = tmp_path / "one-host.db"
    add(db, tmp_path, *_job_rows("node1"))
    assert _findings(db) == []


@pytest.mark.slow
def test_a_daily_check_keeps_and_renews_health_findings_as_a_full_one_does(any_db, tmp_path):
    """Rows arrive between checks: each check's health findings equal a check of every row,
    on both backends."""
    from sqlalchemy import create_engine

    from ledger import command
    from ledger.storage.url import resolve_db_url
    from ledger.watch.check import run_check

    db = any_db
    steps = [_entry_rows("cwc"), _entry_rows("wc", key="jit_g-k2"),
             [r | {"timestamp": f"2026-07-02T0{i}:00:00+00:00", "tag": f"u{i}"} for i, r in enumerate(_entry_rows("wc"))],
             _entry_rows("cwcwc", key="jit_g-k2", hostname="node3")]
    for i, rows in enumerate(steps):
        add(db, tmp_path, *[r | {"tag": f"s{i}{r['tag']}"} for r in rows]
            + [r | {"tag": f"s{i}{r['tag']}", "cache_key": f"jit_h-{i}", "command": "python job.py"}
               for r in _job_rows("node2")])
        daily = command.check(str(db))
        engine = create_engine(resolve_db_url(str(db)))
        try:
            full = run_check(engine, rejudge=True)
        finally:
            engine.dispose()
        said = sorted((f["verdict"], f["row_id"], f["cause"]) for f in daily.findings if f["verdict"] in HEALTH_KINDS)
        assert said == sorted((f["verdict"], f["row_id"], f["cause"]) for f in full.findings
                              if f["verdict"] in HEALTH_KINDS), i
    # k1 on node1 (after step 3) and k2 on node3 (k2 on node1 was evicted once); the job's
    # newest run, with a new key each step
    assert [v for v, _, _ in said] == ["cache-not-written", "evicted", "evicted"]


def _under(run: str, hour: int, tag: str) -> dict:
    """A recorded compile JAX did not write for its threshold (3 s: two a run pass 5 s)."""
    return rec(cache_state="cold", cache_not_persisted="min_compile_time", cache_min_compile_time_s=4.0, compile_s=3.0,
               cache_key=f"jit_q-{tag}", run_id=run, command="python quick.py", function="jit_q", transform="recorded",
               timestamp=f"2026-07-01T{hour:02d}:00:00+00:00", tag=tag)


@pytest.mark.slow
def test_a_daily_check_finds_a_programs_newest_run_by_every_row_of_a_run_begun_before(any_db, tmp_path):
    """Run A's rows at 12:00 were checked; then A gets a row stamped 10:00 and a new run B
    two at 11:00. A is still the program's newest run (its newest row, 12:00), though B's
    new rows are newer than A's: the daily check, reading A's old rows, says so as a full one does."""
    db = any_db
    add(db, tmp_path, _under("A", 12, "a1"), _under("A", 12, "a2"))
    assert run_cli("check", "--db", db).exit_code == 0
    add(db, tmp_path, _under("A", 10, "a3"), _under("B", 11, "b1"), _under("B", 11, "b2"))
    daily = [(f["verdict"], f["run_id"], f["cause"]) for f in _findings(db)]
    full = [(f["verdict"], f["run_id"], f["cause"]) for f in _findings(db, "--since", "2000-01-01T00:00:00")]
    assert [(v, run) for v, run, _ in daily] == [("below-threshold", "A")]
    assert daily == full


@pytest.mark.slow
def test_a_daily_check_reads_no_old_row_of_a_run_where_every_new_row_is_newer(any_db, tmp_path, monkeypatch):
    """Run A checked at 10:00; then A at 11:00 and a new run B at 12:00. Every new row is
    newer than the newest row the last check saw in a run (check_runs.newest_run_time),
    so A's old rows are not read, and B is the newest run, as a full check says. A last
    run with no such time (before 0022) has it found once, by a scan, and kept: a new run C
    at 9:00 is older than it, and B stays the newest."""
    from ledger.watch import health

    db = any_db
    add(db, tmp_path, _under("A", 10, "a1"), _under("A", 10, "a2"))
    assert run_cli("check", "--db", db).exit_code == 0
    assert query(db, "SELECT newest_run_time FROM check_runs") == [("2026-07-01T10:00:00+00:00",)]
    add(db, tmp_path, _under("A", 11, "a3"), _under("B", 12, "b1"), _under("B", 12, "b2"))

    def unread(*args):
        raise AssertionError("a run's old rows read")

    with monkeypatch.context() as m:
        m.setattr(health, "_run_times", unread)
        daily = [(f["verdict"], f["run_id"], f["cause"]) for f in _findings(db)]
    full = [(f["verdict"], f["run_id"], f["cause"]) for f in _findings(db, "--since", "2000-01-01T00:00:00")]
    assert [(v, run) for v, run, _ in daily] == [("below-threshold", "B")] and daily == full
    assert run_cli("check", "--db", db).exit_code == 0  # the last run: one over the same filters (no --since)
    with open_ledger(str(db), "write") as ledger, ledger.engine.begin() as conn:
        conn.execute(sa.text("UPDATE check_runs SET newest_run_time = NULL"))  # as a run before 0022 left it
    add(db, tmp_path, _under("C", 9, "c1"), _under("C", 9, "c2"))  # older than B's rows: B is still the newest
    assert [(f["verdict"], f["run_id"]) for f in _findings(db)] == [("below-threshold", "B")]
    assert query(db, "SELECT newest_run_time FROM check_runs ORDER BY id DESC LIMIT 1") == [("2026-07-01T12:00:00+00:00",)]


@pytest.mark.slow
@pytest.mark.parametrize("value", ["-1", "nan", "inf", "abc", "", "1e999", "5\n6", "'"])
def test_a_bad_below_threshold_is_one_line_and_exit_2(tmp_path, value):
    db = tmp_path / "ledger.db"
    add(db, tmp_path, *_entry_rows("cw"))
    result = run_cli("check", "--db", db, "--below-threshold-s", value)
    assert result.exit_code == 2, result.output
    assert "--below-threshold-s" in result.output
    assert query(db, "SELECT count(*) FROM check_runs") == [(0,)]
