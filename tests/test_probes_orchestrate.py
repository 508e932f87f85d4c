"""run_probe orchestration with real JAX on small objectives: in-process, isolate,
cold_warm, failed transforms (raised, and a probe process that dies), user errors."""

from __future__ import annotations

import json
import os
import re
import textwrap

import pytest
from ledger.probes import (
    ProbeError,
    ProbeSpec,
    describe_builtins,
    resolve_objective,
    run_probe,
)

from ledger.record import PROBE_RECORD_FIELDS

pytestmark = pytest.mark.jax_legs  # it reads JAX internals: run on the jax legs too (ci/jax_legs.sh)

USER_OBJECTIVES = textwrap.dedent('''
    import os
    import numpy as np
    import jax
    import jax.numpy as jnp
    from jax import lax

    def while_loop(cell):
        """Fine forward; reverse-mode through lax.while_loop raises at trace time."""
        def fn(x):
            def body(c):
                i, v = c
                return i + 1, v * 0.5 + jnp.sum(x * x)
            return lax.while_loop(lambda c: c[0] < 3, body, (0, jnp.float32(0.0)))[1]
        return fn, np.ones(4, np.float32)

    def dies_in_grad(cell):
        """The backward rule kills the process while grad is being traced."""
        @jax.custom_vjp
        def fn(x):
            return jnp.sum(x * x)
        def fwd(x):
            return fn(x), x
        def bwd(res, g):
            os._exit(7)
        fn.defvjp(fwd, bwd)
        return fn, np.ones(4, np.float32)

    def not_a_builder_result(cell):
        return 42
''')


@pytest.fixture
def user_objectives(tmp_path, monkeypatch):
    (tmp_path / "probe_user_objs.py").write_text(USER_OBJECTIVES)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "probe_user_objs"


def collect(spec, progress=None):
    recs = []
    outcome = run_probe(spec, on_record=recs.append,
                        on_progress=progress.append if progress is not None else None)
    assert recs == outcome.records  # handed over one by one, as measured
    return outcome, recs


@pytest.mark.jax
def test_in_process_record_shape_and_progress(tmp_path):
    progress = []
    spec = ProbeSpec.make(objective="toy", transforms=["jit", "pyloop_vag"], tag="t1",
                     n_batch=6, batch_size=3, steady_calls=2, run_id="run-a")
    outcome, recs = collect(spec, progress)
    assert outcome.ok and not outcome.failed and outcome.run_id == "run-a"
    for r in recs:
        assert list(r) == list(PROBE_RECORD_FIELDS)
        assert r["status"] == "ok" and r["error"] is None
        assert r["run_id"] == "run-a" and r["phase"] is None and r["tag"] == "t1"
        assert (r["model_type"], r["objective"], r["ndim"]) == ("toy", "toy", 8)
        assert (r["dataset_class"], r["instrument"]) == ("imaging", "synthetic")
        assert (r["n_batch"], r["batch_size"], r["steady_calls"]) == (6, 3, 2)
        assert all(r[k] >= 0 for k in ("trace_s", "compile_s", "first_s", "steady_s"))
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", r["timestamp"])  # the one clock: UTC
        assert r["hardware"] == "local_cpu" and r["backend"] == "cpu"
        assert r["host_cpu_count"] >= 1 and r["host_cpu_affinity"] >= 1
        assert r["host_mem_total_mb"] > 0 and r["host_load_avg_1m"] is not None
        assert re.fullmatch(r"[0-9a-f]{64}", r["program_fingerprint"])
        assert json.loads(r["jax_cache_settings"])["jax_persistent_cache_min_entry_size_bytes"] == -1
        json.loads(r["provenance"])
    stages = [(e["transform"], e["phase"]) for e in progress]
    assert stages == [(t, p) for t in ("jit", "pyloop_vag")
                      for p in ("tracing", "compiling", "first call", "steady", "done")]
    assert all(isinstance(e["elapsed_s"], float) for e in progress)


@pytest.mark.jax
def test_failing_transform_is_a_failed_record_and_the_others_run(user_objectives):
    spec = ProbeSpec.make(objective=f"{user_objectives}:while_loop", transforms=["jit", "grad", "vmap"])
    outcome, recs = collect(spec)
    assert [r["transform"] for r in recs] == ["jit", "grad", "vmap"]
    assert [r["status"] for r in recs] == ["ok", "failed", "ok"]
    assert outcome.failed and outcome.failures == [recs[1]]
    bad = recs[1]
    assert "while_loop" in bad["error"] or "Reverse-mode" in bad["error"]
    assert all(bad[k] is None for k in ("trace_s", "compile_s", "first_s", "steady_s"))
    assert bad["model_type"] == user_objectives  # the module's name, not the spec string


@pytest.mark.jax
def test_builder_that_returns_garbage_fails_every_transform(user_objectives):
    outcome, recs = collect(ProbeSpec.make(objective=f"{user_objectives}:not_a_builder_result",
                                      transforms=["jit", "vag"]))
    assert [r["status"] for r in recs] == ["failed", "failed"] and outcome.failed
    assert "TypeError" in recs[0]["error"]


@pytest.mark.jax
def test_isolate_runs_each_transform_in_its_own_process(tmp_path):
    progress = []
    outcome, recs = collect(ProbeSpec.make(objective="toy", transforms=["jit", "vag"], isolate=True,
                                      cache_dir=str(tmp_path / "c")), progress)
    assert outcome.ok and [r["status"] for r in recs] == ["ok", "ok"]
    pids = {json.loads(r["provenance"])["pid"] for r in recs}
    assert len(pids) == 2 and os.getpid() not in pids
    assert [r["cache_state"] for r in recs] == ["cold", "cold"]
    assert {e["transform"] for e in progress} == {"jit", "vag"}


@pytest.mark.jax
def test_cold_warm_pair_shares_run_id_in_a_fresh_dir(tmp_path):
    base = tmp_path / "caches"
    (base / "old").mkdir(parents=True)
    outcome, recs = collect(ProbeSpec.make(objective="toy", transforms=["jit", "vmap_vag"],
                                      cold_warm=True, cache_dir=str(base)))
    assert outcome.ok
    assert [(r["phase"], r["transform"], r["cache_state"]) for r in recs] == [
        ("cold", "jit", "cold"), ("cold", "vmap_vag", "cold"),
        ("warm", "jit", "warm"), ("warm", "vmap_vag", "warm")]
    assert len({r["run_id"] for r in recs}) == 1 and recs[0]["run_id"] == outcome.run_id
    fresh = {r["cache_dir"] for r in recs}
    assert fresh == {outcome.cache_dir} and os.path.dirname(outcome.cache_dir) == str(base)
    assert recs[0]["cache_files_before"] == 0  # fresh: not the populated sibling
    assert len({json.loads(r["provenance"])["pid"] for r in recs}) == 2  # two processes


@pytest.mark.jax
def test_a_process_that_dies_mid_transform_keeps_the_other_rows(user_objectives):
    # No --cache-dir: cold_warm uses a temp dir of its own, removed afterwards.
    outcome, recs = collect(ProbeSpec.make(objective=f"{user_objectives}:dies_in_grad",
                                      transforms=["jit", "grad", "vmap"], cold_warm=True))
    assert [(r["phase"], r["transform"], r["status"]) for r in recs] == [
        ("cold", "jit", "ok"), ("cold", "grad", "failed"), ("cold", "vmap", "ok"),
        ("warm", "jit", "ok"), ("warm", "grad", "failed"), ("warm", "vmap", "ok")]
    for bad in outcome.failures:
        assert "exited with code 7 during tracing of grad" in bad["error"]
        assert bad["trace_s"] is None and bad["compile_s"] is None
        assert bad["hardware"] == "local_cpu" and bad["run_id"] == outcome.run_id
    assert [r["cache_state"] for r in recs if r["transform"] == "jit"] == ["cold", "warm"]
    assert not os.path.exists(outcome.cache_dir)


@pytest.mark.parametrize("kwargs,message", [
    ({"objective": "nope"}, "unknown objective 'nope'"),
    ({"objective": "no_such_module_xyz:build"}, "cannot import 'no_such_module_xyz'"),
    ({"objective": "os:no_such_attr"}, "has no attribute 'no_such_attr'"),
    ({"objective": "os:sep"}, "is not callable"),
    ({"transforms": ["jit", "jitt"]}, "unknown transform 'jitt'"),
    ({"transforms": []}, "no transforms given"),
    ({"transforms": ["laxmap_vag"], "n_batch": 10, "batch_size": 4}, "not divisible"),
    ({"steady_calls": 0}, "steady_calls must be >= 1"),
])
def test_user_errors_are_one_line_probe_errors(kwargs, message):
    with pytest.raises(ProbeError) as exc:
        ProbeSpec.make(**kwargs)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_builtins_are_listed_and_resolve():
    names = [n for n, _ in describe_builtins()]
    assert names == ["toy", "mge", "pixelization"]
    assert resolve_objective("mge").model_type == "mge"


def test_run_probe_takes_only_a_validated_spec():
    with pytest.raises(TypeError, match=r"ProbeSpec\.make"):
        run_probe(ProbeSpec(), on_record=lambda r: pytest.fail("no record expected"))


def test_spec_is_validated_and_normalised_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = ProbeSpec.make(transforms="vag, jit", cache_dir="c", n_batch="6", batch_size=3)
    assert spec.transforms == ("vag", "jit") and (spec.n_batch, spec.batch_size) == (6, 3)
    assert spec.cache_dir == str(tmp_path / "c") and os.path.isdir(spec.cache_dir)
    assert spec.model_type == "toy" and spec.resolved.model_type == "toy"
    assert spec.validated() is spec  # already valid: nothing is done again
    assert spec.cell() == {"dataset_class": "imaging", "model_type": "toy", "instrument": "synthetic",
                           "n_batch": 6, "batch_size": 3, "mixed_precision": False}
    assert ProbeSpec.make(model_type="toy_v2").cell()["model_type"] == "toy_v2"


def test_user_model_type_is_the_builders_attribute_else_its_module(tmp_path, monkeypatch):
    (tmp_path / "lens_objs.py").write_text(textwrap.dedent('''
        def plain(cell):
            pass

        def named(cell):
            pass
        named.model_type = "mge"
    '''))
    monkeypatch.chdir(tmp_path)  # the working directory is on the import path
    assert resolve_objective("lens_objs:plain").model_type == "lens_objs"
    assert resolve_objective("lens_objs:named").model_type == "mge"
