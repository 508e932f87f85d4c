"""`ledger predict` against reality: each prediction is followed by the real probe of the
same transform, and must equal the cache_state the probe measures. Real JAX on the toy
objective, a real cache dir hashed byte for byte around every prediction, the installed
`ledger` entry point in subprocesses, a real SQLite ledger (and PostgreSQL)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import query, run_cli
from .ledgers import made_quiet

pytestmark = pytest.mark.jax_legs
LEDGER = shutil.which("ledger", path=str(Path(sys.executable).parent)) or "ledger"
FLAG = "--xla_cpu_enable_fast_math=false"  # a harmless CPU flag, hashed into the key


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_COMPILATION_CACHE_DIR")}
    return env | extra


def _ledger(*args, env=None, cwd=None):
    return subprocess.run([LEDGER, *map(str, args)], capture_output=True, text=True,
                          env=env or _env(), cwd=cwd, check=False)


def tree_hash(path: Path) -> dict[str, tuple]:
    """Everything under ``path``: each dir, each file's size and bytes; a missing dir is {}."""
    if not path.exists():
        return {}
    return {str(p.relative_to(path)): ((p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest())
                                       if p.is_file() else ("dir",))
            for p in sorted(path.rglob("*"))}


class Truth:
    """Predict, then probe the same transform, in one cache dir and ledger."""

    def __init__(self, db: Path, objective: str = "toy", transform: str = "jit", cwd=None):
        self.db, self.objective, self.transform, self.cwd = db, objective, transform, cwd

    def args(self, cache: Path) -> list:
        return ["--objective", self.objective, "--transforms", self.transform, "--cache-dir", cache,
                "--db", self.db]

    def predict(self, cache: Path, env=None, json_out=False) -> subprocess.CompletedProcess:
        before = tree_hash(cache)
        run = _ledger("predict", *self.args(cache), *(["--json"] if json_out else []),
                      env=env, cwd=self.cwd)
        assert run.returncode in (0, 1), run.stderr
        assert tree_hash(cache) == before, "predict changed the cache dir"
        return run

    def probe(self, cache: Path, env=None) -> str:
        run = _ledger("probe", *self.args(cache), env=env, cwd=self.cwd)
        assert run.returncode == 0, run.stderr
        return query(self.db, "SELECT cache_state FROM compile_records ORDER BY id DESC LIMIT 1")[0][0]

    def check(self, cache: Path, env=None) -> str:
        """The prediction's line, after asserting the probe then measured the same."""
        run = self.predict(cache, env)
        said = "cold" if run.returncode == 1 else "warm"
        assert self.probe(cache, env) == said, run.stdout
        return run.stdout.splitlines()[1]


@pytest.mark.jax
def test_fresh_dir_probe_warm_flags_emptied_and_another_dir(tmp_path, db):
    truth, cache = Truth(db), tmp_path / "jax-cache"
    assert truth.check(cache) == ("jit: cold (cache dir empty); expected cold compile unknown"
                                  " (no cold row of this cell on a host not loaded)")
    made_quiet(db)  # the cold row's cost counts only from a quiet host (ledger/savings.py): this box is shared
    assert truth.check(cache) == "jit: warm"

    flagged = truth.predict(cache, env=_env(XLA_FLAGS=FLAG))
    line, detail = flagged.stdout.splitlines()[1:3]
    assert line.startswith("jit: cold (XLA flags") and "; expected cold compile " in line and "(median of 1)" in line
    assert detail == f"  xla_flags: (none) -> {FLAG}"
    assert truth.probe(cache, env=_env(XLA_FLAGS=FLAG)) == "cold"

    for entry in cache.iterdir():
        entry.unlink()
    assert truth.check(cache).startswith("jit: cold (cache dir empty); expected cold compile ")

    other = truth.check(tmp_path / "other-cache")
    assert other.startswith("jit: cold (cache dir empty); ")

    # every prediction was scored by the probe after it, and held
    assert query(db, "SELECT COUNT(*) FROM predictions") == [(5,)]
    report = _ledger("report", "--db", db)
    assert report.returncode == 0, report.stderr
    assert f"| {os.uname().nodename} | 5 | 5 | 100% |" in report.stdout.splitlines()
    assert "Predictions that did not hold:" not in report.stdout


MODULE = '''
import jax.numpy as jnp

def build(cell):
    return (lambda x: jnp.sum(jnp.{op}(x) ** 2)), jnp.ones(4)
build.model_type = "mylens"
'''


@pytest.mark.jax
def test_a_user_objective_whose_source_changed_is_cold_naming_the_program(tmp_path, db):
    (tmp_path / "mylens.py").write_text(MODULE.format(op="sin"))
    truth, cache = Truth(db, "mylens:build", cwd=tmp_path), tmp_path / "jax-cache"
    assert truth.probe(cache) == "cold"
    assert truth.check(cache) == "jit: warm"
    (tmp_path / "mylens.py").write_text(MODULE.format(op="cos"))
    assert truth.check(cache).startswith("jit: cold (computation (program changed)); expected cold compile ")


@pytest.mark.jax
def test_json_lists_each_transform_and_a_present_entry_is_warm(tmp_path, db):
    cache = tmp_path / "jax-cache"
    truth = Truth(db, transform="jit,vag")
    cold = json.loads(truth.predict(cache, json_out=True).stdout)
    assert [(p["transform"], p["predicted"], p["cause"], p["expected_compile_s"]) for p in cold] == [
        ("jit", "cold", "cache dir empty", None), ("vag", "cold", "cache dir empty", None)]
    truth.probe(cache)
    warm = truth.predict(cache, json_out=True)
    assert warm.returncode == 0
    found = json.loads(warm.stdout)
    assert [(p["predicted"], p["cause"]) for p in found] == [("warm", None)] * 2
    # the key is the one the probe computed, and its entry is the file JAX wrote
    keys = {t: k for t, k in query(db, "SELECT transform, cache_key FROM compile_records")}
    assert {p["transform"]: p["cache_key"] for p in found} == keys
    assert all((cache / p["entry"]).is_file() and p["cache_key"] in p["entry"] for p in found)


def test_usage_errors_exit_2_and_write_nothing(tmp_path, db):
    cache = tmp_path / "jax-cache"
    cases = [
        (["--objective", "toy", "--transforms", "nope", "--cache-dir", cache],
         "error: unknown transform 'nope': choose from "),
        (["--objective", "toy"], "error: no cache dir: give --cache-dir or set JAX_COMPILATION_CACHE_DIR"),
        (["--objective", "nosuchmodule:build", "--cache-dir", cache],
         "error: objective 'nosuchmodule:build': cannot import 'nosuchmodule'"),
    ]
    for args, start in cases:
        run = run_cli("predict", *args, "--db", db)
        assert run.exit_code == 2, run.output
        assert run.output.startswith(start) and len(run.output.splitlines()) == 1, run.output
    assert not db.exists()


@pytest.mark.jax
def test_a_jax_without_the_cache_read_is_one_line_naming_its_version(monkeypatch):
    import importlib

    import jax
    from ledger.probes import jax_internals as ji

    lowered = jax.jit(lambda x: x + 1).lower(1.0)
    # the one internal predict stands on, named where every JAX internal is
    monkeypatch.delattr(importlib.import_module(ji.COMPILER_MODULE), ji.CACHE_READ)
    try:
        ji.cache_key_without_compiling(lowered)
    except ji.Unpredictable as err:
        assert str(err) == (f"jax {jax.__version__}: jax._src.compiler._cache_read is gone; "
                            "the persistent-cache key cannot be computed without compiling")
    else:
        raise AssertionError("no Unpredictable")


@pytest.mark.jax
def test_the_key_is_had_without_compiling_and_the_ledgers_listeners_are_muted(tmp_path):
    import jax
    from ledger.probes import evidence, measure
    from ledger.probes import jax_internals as ji
    from ledger.probes.predict_child import muted_ledger_listeners

    measure.configure_jax(str(tmp_path))  # installs the probe's listeners, as a recording would
    evidence._EVENTS.counts = {"before": 1}
    jax.clear_caches()
    lowered = jax.jit(lambda x: x * 3.0 + 1.0).lower(2.0)
    with muted_ledger_listeners(), evidence.CompileWatch() as seen:
        key = ji.cache_key_without_compiling(lowered)
    # JAX asked its cache (the event fired) and neither hit nor wrote a miss; the
    # ledger's counts are what they were. (backend_compile_duration is no evidence
    # either way: JAX times the whole compile_or_get_cached, which the key ends early.)
    assert seen.counts.get(ji.EV_REQUEST) == 1
    assert ji.EV_HIT not in seen.counts and ji.EV_MISS_WRITTEN not in seen.counts
    assert evidence._EVENTS.counts == {"before": 1}
    assert key and key.startswith("jit_") and list(tmp_path.iterdir()) == []
    jax.clear_caches()
    lowered.compile()  # now for real: the entry written is the predicted one
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith("-atime")] == [ji.entry_name(key)]


@pytest.mark.jax
def test_a_cache_that_evicts_is_said_and_predict_still_writes_nothing(tmp_path, db):
    cache = tmp_path / "jax-cache"
    truth = Truth(db)
    truth.probe(cache)
    env = _env(JAX_COMPILATION_CACHE_MAX_SIZE="100000000")
    run = truth.predict(cache, env=env)  # hashes the dir around it: no lockfile, no atime
    assert (run.returncode, run.stdout.splitlines()[1]) == (0, "jit: warm")
    note = "note: jax_compilation_cache_max_size is 100000000: eviction may remove an entry before the run reads it"
    assert run.stderr.splitlines() == [note]


# Builders that do JAX work of their own before the traced function: each eager op is
# compiled (jit_broadcast_in_dim, jit_convert_element_type, ...) while predict runs.
EAGER = '''
import jax.numpy as jnp

def build(cell):
    scale = jnp.ones(3) * 2.0  # eager work: compiled at build time
    return (lambda x: jnp.sum(x ** 2) * scale[0]), jnp.ones(4)
'''

WITH_DATA = '''
from pathlib import Path

import jax.numpy as jnp
import numpy as np

def build(cell):
    data = jnp.asarray(np.load(Path(__file__).with_name("image.npy")))
    data = (data - data.mean()) / data.std()  # eager, as a likelihood normalises its data
    return (lambda x: jnp.sum((jnp.tile(x, 2) - data) ** 2)), np.zeros(8)
'''


@pytest.mark.jax
@pytest.mark.slow
# (toy, the builder with no work of its own, is test_fresh_dir_probe_warm_flags_emptied_and_another_dir's:
# its five predictions are each held to a byte-identical dir and to the probe after them). mge and
# pixelization build their data with numpy, as toy does: on the jax legs they take toy's path with a
# bigger program, so the legs leave them to the main suite (a minute of each leg). withdata's builder
# compiles eagerly as eager's does (its normalising), and reads a file besides: on the legs it stands
# for both (16 s of each leg).
@pytest.mark.parametrize("objective", [pytest.param("eager:build", marks=pytest.mark.legs_covered), "withdata:build",
                                       pytest.param("mge", marks=pytest.mark.legs_covered),
                                       pytest.param("pixelization", marks=pytest.mark.legs_covered)])
def test_predict_leaves_the_cache_dir_byte_identical_whatever_the_builder_does(tmp_path, db, objective):
    import numpy as np

    (tmp_path / "eager.py").write_text(EAGER)
    (tmp_path / "withdata.py").write_text(WITH_DATA)
    np.save(tmp_path / "image.npy", np.arange(16.0))
    cache = tmp_path / "jax-cache"
    cache.mkdir()
    (cache / "someone-elses-entry-cache").write_bytes(b"\0" * 100)
    truth = Truth(db, objective, transform="jit,vmap", cwd=tmp_path)
    truth.predict(cache)  # asserts the dir's names, sizes and bytes are what they were
    assert truth.probe(cache) == "cold"  # and the prediction was the truth
    truth.predict(cache)
    assert truth.probe(cache) == "warm"


SLEEPER = '''
import os
import subprocess
import sys
import time

def build(cell):
    here = os.path.dirname(os.path.abspath(__file__))
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    with open(os.path.join(here, "pids"), "w") as f:
        f.write(f"{os.getpid()} {helper.pid}")
    while True:  # a builder that never returns
        time.sleep(1)
'''


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.jax
@pytest.mark.slow
def test_a_builder_that_never_returns_is_killed_at_the_timeout_and_nothing_is_stored(tmp_path, db):
    import time

    (tmp_path / "sleeper.py").write_text(SLEEPER)
    assert _ledger("db", "upgrade", "--db", db).returncode == 0
    cache = tmp_path / "jax-cache"
    # 3 s is enough for the child to import jax and reach build() on a quiet machine; on a
    # loaded one (CI runs the legs beside the suite) it may be killed before it writes its
    # pids, which proves nothing about the helper it starts, so a longer limit is tried once.
    for timeout in (3, 30):
        started = time.monotonic()
        run = _ledger("predict", "--objective", "sleeper:build", "--cache-dir", cache, "--db", db,
                      "--timeout", str(timeout), cwd=tmp_path)
        assert time.monotonic() - started < timeout + 27
        assert run.returncode == 2, run.stderr
        assert run.stdout == ""
        assert run.stderr.splitlines() == [(
            f"error: predict timed out after {timeout} s: objective sleeper:build did not build and "
            "trace in time (its process was killed); give a longer --timeout if it needs more")]
        if (tmp_path / "pids").exists():
            break
    assert query(db, "SELECT COUNT(*) FROM predictions") == [(0,)]
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    deadline = time.monotonic() + 5
    while any(map(_alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(map(_alive, pids)), "a process of the prediction is still running"


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "1e300", "abc", ""])
def test_a_bad_timeout_is_one_line_and_exit_2(tmp_path, db, value):
    run = run_cli("predict", "--objective", "toy", "--cache-dir", tmp_path / "c", "--timeout", value,
                  "--db", db)
    assert run.exit_code == 2, run.output
    assert run.output == f"error: --timeout must be a number of seconds over 0 and at most 1000000, not {value!r}\n"
    assert not db.exists()


def test_the_default_timeout_is_the_one_the_help_shows():
    from ledger.cli.predict import DEFAULT_TIMEOUT
    from ledger.predict.run import DEFAULT_TIMEOUT_S

    assert float(DEFAULT_TIMEOUT) == DEFAULT_TIMEOUT_S
    assert "[default: 600]" in run_cli("predict", "--help").output
