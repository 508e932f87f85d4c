"""cache_state measured per transform, with real JAX on the `toy` objective.

Each "probe process" here is a real `python -m ledger.probes.child`, so the persistent cache
is configured before the first compile of a fresh process, as it is for users.
"""

from __future__ import annotations

import json
import os
import re

import pytest
from ledger.probes import ProbeSpec
from ledger.probes.evidence import decide_cache_state
from ledger.probes.protocol import payload, run_child

from ledger.record import PROBE_RECORD_FIELDS

pytestmark = pytest.mark.jax_legs  # it reads JAX internals: run on the jax legs too (ci/jax_legs.sh)

ALL = ["jit", "grad", "vag", "vmap", "vmap_vag", "laxmap_vag", "pyloop_vag"]


def key_components(jax_version: str) -> set[str]:
    """JAX's cache-key components as its cache_key logger names them: jax 0.6.0 added
    the backend version (ci/jax_legs.sh runs this file on 0.4.30 and on the newest)."""
    names = {"computation", "jax_lib version", "XLA flags", "compile_options",
             "accelerator_config", "compression", "custom_hook"}
    release = tuple(int(p) for p in re.findall(r"\d+", jax_version)[:3])
    return names | ({"backend version"} if release >= (0, 6, 0) else set())


def probe_process(transforms, cache_dir, run_id="r"):
    """One fresh probe process over `transforms`; its records in order."""
    recs = []
    spec = ProbeSpec.make(objective="toy", transforms=transforms, steady_calls=1,
                          cache_dir=str(cache_dir) if cache_dir else None)
    run_child(payload(spec, run_id, None, spec.cache_dir, spec.transforms), recs.append)
    assert [r["transform"] for r in recs] == transforms
    return {r["transform"]: r for r in recs}


@pytest.mark.jax
def test_two_processes_on_a_fresh_cache_dir_are_cold_then_warm(tmp_path):
    cache = tmp_path / "cache"
    first = probe_process(ALL, cache)
    second = probe_process(ALL, cache)
    for t in ALL:
        c, w = first[t], second[t]
        assert set(c) == set(PROBE_RECORD_FIELDS)
        assert (c["status"], w["status"]) == ("ok", "ok"), (c["error"], w["error"])
        assert (c["cache_state"], w["cache_state"]) == ("cold", "warm"), t
        assert c["cache_state_source"] == w["cache_state_source"] == "measured_events"
        assert (c["cache_requests"], c["cache_hits"], c["cache_misses"]) == (1, 0, 1)
        assert (w["cache_requests"], w["cache_hits"], w["cache_misses"]) == (1, 1, 0)
        assert c["cache_files_after"] == c["cache_files_before"] + 1
        assert w["cache_files_after"] == w["cache_files_before"] == len(ALL)
        # same program, same key: the warm compile read what the cold one wrote
        assert c["cache_key"] == w["cache_key"] and c["cache_key"]
        assert c["program_fingerprint"] == w["program_fingerprint"]
        assert re.fullmatch(r"[\w.]+-[0-9a-f]{64}", c["cache_key"]), c["cache_key"]
        assert set(json.loads(c["cache_key_components"])) == key_components(c["jax_version"])
        assert c["cache_min_compile_time_s"] == 0.0 and c["cache_min_entry_size_bytes"] == -1
        assert c["backend_compile_s"] > 0 and c["compile_s"] >= c["backend_compile_s"] * 0.5
    assert len({r["cache_key"] for r in first.values()}) == len(ALL)  # one module each
    # each key is an entry on disk: `<key>-cache` (a bare `<key>` before jax 0.4.31)
    entries = {f.removesuffix("-cache") for f in os.listdir(cache) if not f.endswith("-atime")}
    assert entries == {r["cache_key"] for r in first.values()}


@pytest.mark.jax
def test_no_cache_dir_is_none(tmp_path, monkeypatch):
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    recs = probe_process(["jit", "vag"], None)
    for r in recs.values():
        assert r["status"] == "ok"
        assert r["cache_dir"] is None
        assert (r["cache_state"], r["cache_state_source"]) == ("none", "empty_cache_dir")
        assert r["cache_files_before"] is None and r["cache_files_after"] is None


@pytest.mark.jax
def test_miss_under_min_compile_time_on_populated_cache_is_cold(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    probe_process(["jit", "vag"], cache)  # populate
    # The next compile takes far less than 1000 s, so JAX will not write it.
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "1000")
    r = probe_process(["grad"], cache)["grad"]
    assert r["status"] == "ok"
    assert r["cache_min_compile_time_s"] == 1000.0  # the user's env value is honoured
    assert r["cache_files_before"] == r["cache_files_after"] == 2  # nothing written...
    assert (r["cache_requests"], r["cache_hits"], r["cache_misses"]) == (1, 0, 0)
    assert (r["cache_state"], r["cache_state_source"]) == ("cold", "measured_events")
    # ...so the file count alone would have called it warm.
    assert decide_cache_state(str(cache), 0, 0, 0, 2, 2) == ("warm", "measured_files")


@pytest.mark.jax
def test_one_invocation_cold_on_one_transform_and_warm_on_another(tmp_path):
    cache = tmp_path / "cache"
    probe_process(["jit"], cache)
    recs = probe_process(["jit", "vag"], cache)
    assert recs["jit"]["cache_state"] == "warm"
    assert recs["vag"]["cache_state"] == "cold"


@pytest.mark.jax
def test_changed_xla_flags_show_as_changed_component(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    before = probe_process(["jit"], cache)["jit"]
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_min_max=true")
    after = probe_process(["jit"], cache)["jit"]
    cb, ca = json.loads(before["cache_key_components"]), json.loads(after["cache_key_components"])
    changed = {k for k in cb if cb[k] != ca.get(k)}
    assert changed == {"XLA flags"}
    assert after["xla_flags"] == "--xla_cpu_enable_fast_min_max=true" and before["xla_flags"] is None
    assert after["cache_key"] != before["cache_key"]
    assert after["cache_state"] == "cold"  # a new key: the warm entry does not apply
    assert json.loads(after["provenance"])["xla_flags_in_cache_key"] == [
        "--xla_cpu_enable_fast_min_max=true"]


@pytest.mark.parametrize("args,expected", [
    ((None, 0, 0, 0, None, None), ("none", "empty_cache_dir")),
    (("/c", 1, 1, 0, 5, 5), ("warm", "measured_events")),
    (("/c", 1, 0, 1, 5, 6), ("cold", "measured_events")),
    (("/c", 1, 0, 0, 5, 5), ("cold", "measured_events")),  # miss not written
    (("/c", 0, 0, 0, 5, 6), ("cold", "measured_files")),
    (("/c", 0, 0, 0, 5, 5), ("warm", "measured_files")),
    (("/c", 0, 0, 0, 0, 0), ("unknown", "measured_files")),  # configured, empty, nothing written
    (("/c", None, None, None, 5, 6), ("cold", "measured_files")),  # no event listener
    (("/c", 0, 0, 0, None, None), ("unknown", "unknown")),  # entry files not recognised
])
def test_decision_table(args, expected):
    assert decide_cache_state(*args) == expected
