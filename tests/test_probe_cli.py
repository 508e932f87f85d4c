"""`ledger probe` end to end: the installed entry point, real JAX compiles of the toy
objective, a real SQLite ledger, a real JAX cache dir."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ledger.storage.revisions import HEAD

from .conftest import db_at, query, run_cli

LEDGER = Path(sys.executable).with_name("ledger")


def _probe(*args, env=None, cwd=None):
    return subprocess.run([LEDGER, "probe", *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd, check=False)


def _rows(db, where="1=1"):
    return query(db, f"SELECT transform, cache_state, cache_state_source, status, phase, run_id FROM compile_records WHERE {where} ORDER BY id")


@pytest.mark.jax
def test_two_probe_processes_on_one_cache_dir_go_cold_then_warm(tmp_path, db):
    cache = tmp_path / "jax-cache"
    first = _probe("--transforms", "all", "--cache-dir", cache, "--tag", "first", "--db", db)
    assert first.returncode == 0, first.stderr
    second = _probe("--transforms", "all", "--cache-dir", cache, "--tag", "second", "--db", db)
    assert second.returncode == 0, second.stderr
    cold = _rows(db, "tag = 'first'")
    warm = _rows(db, "tag = 'second'")
    every = ("jit", "grad", "vag", "vmap", "vmap_vag", "laxmap_vag", "pyloop_vag")
    assert [(t, s, src, st) for t, s, src, st, _, _ in cold] == [(t, "cold", "measured_events", "ok") for t in every]
    assert [(t, s, src, st) for t, s, src, st, _, _ in warm] == [(t, "warm", "measured_events", "ok") for t in every]
    # the summary table names each transform with its state
    summary = [line.split()[:4] for line in second.stdout.splitlines()[2:9]]
    assert summary == [[t, "ok", "warm", "measured_events"] for t in every]
    (n_keys,), = query(db, "SELECT count(DISTINCT cache_key) FROM compile_records WHERE transform = 'jit'")
    assert n_keys == 1


@pytest.mark.jax
def test_no_cache_dir_gives_none_and_host_state(tmp_path, db):
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    r = _probe("--transforms", "jit", "--db", db, env=env)
    assert r.returncode == 0, r.stderr
    (state, source, cpus, load, hw, fp), = query(
        db, "SELECT cache_state, cache_state_source, host_cpu_count, host_load_avg_1m, hardware, program_fingerprint FROM compile_records")
    assert (state, source, hw) == ("none", "empty_cache_dir", "local_cpu")
    assert cpus >= 1 and load >= 0 and len(fp) == 64


@pytest.mark.jax
def test_cold_warm_pair_from_one_command(tmp_path, db):
    r = _probe("--transforms", "jit,grad", "--cold-warm", "--cache-dir", tmp_path / "c", "--db", db)
    assert r.returncode == 0, r.stderr
    rows = _rows(db)
    assert [(t, s, p) for t, s, _, _, p, _ in rows] == [
        ("jit", "cold", "cold"), ("grad", "cold", "cold"), ("jit", "warm", "warm"), ("grad", "warm", "warm")]
    assert len({run_id for *_, run_id in rows}) == 1


@pytest.mark.jax
def test_failing_transform_keeps_the_others_and_exits_nonzero(tmp_path, db):
    (tmp_path / "userobj.py").write_text(textwrap.dedent('''
        import numpy as np
        import jax.numpy as jnp
        from jax import lax

        def while_loop(cell):
            def fn(x):
                body = lambda c: (c[0] + 1, c[1] * 0.5 + jnp.sum(x * x))
                return lax.while_loop(lambda c: c[0] < 3, body, (0, jnp.float32(0.0)))[1]
            return fn, np.ones(4, np.float32)
    '''))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    r = _probe("--objective", "userobj:while_loop", "--transforms", "jit,grad,vmap", "--db", db, env=env)
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("error: 1 transform(s) failed: grad (")
    rows = query(db, "SELECT transform, status, compile_s IS NULL, error IS NOT NULL FROM compile_records ORDER BY id")
    assert rows == [("jit", "ok", 0, 0), ("grad", "failed", 1, 1), ("vmap", "ok", 0, 0)]


def test_bad_objective_is_a_one_line_error_and_writes_nothing(db):
    result = run_cli("probe", "--objective", "nope", "--db", db)
    assert result.exit_code == 1
    assert result.output.startswith("error: ") and len(result.output.strip().splitlines()) == 1
    assert "nope" in result.output
    assert not db.exists()  # checked before any database is made


@pytest.mark.jax
def test_failed_transform_row_is_unknown_never_read_from_its_tag(tmp_path, db):
    (tmp_path / "userobj2.py").write_text(textwrap.dedent('''
        import numpy as np
        def broken(cell):
            def fn(x):
                raise ValueError("objective is broken")
            return fn, np.ones(3, np.float32)
    '''))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    r = _probe("--objective", "userobj2:broken", "-t", "jit", "--cache-dir", tmp_path / "c",
               "--tag", "nightly_warm", "--db", db, env=env)
    assert r.returncode == 1
    assert query(db, "SELECT status, cache_state, cache_state_source FROM compile_records") == [
        ("failed", "unknown", "unknown")]


def test_old_database_stops_the_probe_before_it_compiles(db):
    db_at(db, "0003")
    result = run_cli("probe", "--transforms", "jit", "--db", db)
    assert result.exit_code == 1
    assert f"is at revision 0003, this ledger needs {HEAD}: run `ledger db upgrade`" in result.output
    assert query(db, "SELECT count(*) FROM compile_records") == [(0,)]


def test_objectives_lists_the_builtins():
    result = run_cli("objectives")
    assert result.exit_code == 0
    for name in ("toy", "mge", "pixelization", "laxmap_vag", "pyloop_vag"):
        assert f"  {name} " in result.output


@pytest.mark.jax
def test_cell_options_go_on_every_row(db):
    r = _probe("-t", "jit,vag", "--dataset-class", "interferometer", "--instrument", "alma",
               "--model-type", "toy_v2", "--db", db)
    assert r.returncode == 0, r.stderr
    assert query(db, "SELECT transform, dataset_class, instrument, model_type, objective, status "
                     "FROM compile_records ORDER BY id") == [
        ("jit", "interferometer", "alma", "toy_v2", "toy", "ok"),
        ("vag", "interferometer", "alma", "toy_v2", "toy", "ok")]


MYLENS = textwrap.dedent('''
    import numpy as np
    import jax.numpy as jnp

    def build(cell):
        # ndim tells the test which cell the builder was given
        ndim = 3 if cell["instrument"] == "alma" else 5
        return (lambda x: jnp.sum(x * x)), np.ones(ndim, np.float32)

    def named(cell):
        return build(cell)
    named.model_type = "lens_mge"
''')


@pytest.mark.jax
def test_user_objective_from_the_working_directory(tmp_path, db):
    work = tmp_path / "work"
    work.mkdir()
    (work / "mylens.py").write_text(MYLENS)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # --isolate: the child processes must find mylens too
    isolated = _probe("-o", "mylens:build", "-t", "jit,vag", "--isolate", "--instrument", "alma",
                      "--db", db, env=env, cwd=work)
    assert isolated.returncode == 0, isolated.stderr
    named = _probe("-o", "mylens:named", "-t", "jit", "--db", db, env=env, cwd=work)
    assert named.returncode == 0, named.stderr
    assert query(db, "SELECT transform, objective, model_type, dataset_class, instrument, ndim, status "
                     "FROM compile_records ORDER BY id") == [
        ("jit", "mylens:build", "mylens", "imaging", "alma", 3, "ok"),
        ("vag", "mylens:build", "mylens", "imaging", "alma", 3, "ok"),
        ("jit", "mylens:named", "lens_mge", "imaging", "synthetic", 5, "ok")]


WHY_COLD = """
SELECT w.transform, c.key AS component
FROM compile_records AS k, json_each(k.cache_key_components) AS c
JOIN compile_records AS w ON w.model_type = k.model_type AND w.transform = k.transform AND w.cache_state = 'warm'
WHERE k.cache_state = 'cold' AND k.id = (SELECT max(id) FROM compile_records WHERE cache_state = 'cold')
  AND c.value IS NOT json_extract(w.cache_key_components, '$."' || c.key || '"')
"""


@pytest.mark.jax
def test_readme_why_cold_query_names_the_changed_xla_flags(tmp_path, db):
    cache = tmp_path / "c"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    for flags in (None, None, "--xla_cpu_enable_fast_math=false"):
        run_env = dict(env, XLA_FLAGS=flags) if flags else env
        assert _probe("--transforms", "jit", "--cache-dir", cache, "--db", db, env=run_env).returncode == 0
    assert [s for _, s, *_ in _rows(db)] == ["cold", "warm", "cold"]
    result = run_cli("sql", WHY_COLD, "--csv", "--db", db)
    assert result.output == "transform,component\njit,XLA flags\n"


@pytest.mark.jax
def test_a_repeated_transforms_option_adds_each(db):
    # `-t jit -t grad` measured grad alone before: the last option won, silently
    r = run_cli("probe", "-t", "jit", "-t", "grad,vag", "--db", db)
    assert r.exit_code == 0, r.output
    assert query(db, "SELECT transform FROM compile_records ORDER BY id") == [("jit",), ("grad",), ("vag",)]


@pytest.mark.jax
def test_a_users_own_probes_package_is_theirs_and_the_probe_still_runs(tmp_path, db):
    """A project with its own `probes` package (a plausible name in the field): the
    probe's child processes start in the user's directory (`python -m ...`), where a
    top-level `probes` of ours met theirs. Ours installs as ledger.probes."""
    work = tmp_path / "work"
    (work / "probes").mkdir(parents=True)
    (work / "probes" / "__init__.py").write_text("raise ImportError('the project’s own probes package')\n")
    done = _probe("-o", "toy", "-t", "jit", "--isolate", "--tag", "own", "--db", db,
                  env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, cwd=work)
    assert done.returncode == 0, done.stderr
    assert query(db, "SELECT transform, status FROM compile_records") == [("jit", "ok")]
