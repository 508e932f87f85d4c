"""A JAX internal that moved (probes/jax_internals.py): one line naming the JAX version,
never a traceback, and rows that say what could not be measured.

Each probe process is a real `python -m ledger.probes.child` (or a real `ledger probe`) whose
objective module moves internals at import, as a JAX release that renamed them
would: before the probe configures the cache, as `--objective mod:build` is imported
first. ci/jax_legs.sh runs this file on jax 0.4.30 and on the newest jax.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from importlib.metadata import version
from pathlib import Path

import pytest
from ledger.probes import ProbeSpec
from ledger.probes import jax_internals as ji
from ledger.probes.protocol import payload, run_child

pytestmark = pytest.mark.jax_legs  # it reads JAX internals: run on the jax legs too (ci/jax_legs.sh)

LEDGER = Path(sys.executable).with_name("ledger")
JAX = f"jax {version('jax')}"
MOVE_ENV = "LEDGER_TEST_MOVE"

# The objective: a small sum of squares whose module moves what $LEDGER_TEST_MOVE names.
MOVED = textwrap.dedent('''
    import logging, os, sys
    import numpy as np
    import jax, jax.numpy as jnp

    MOVES = set(os.environ.get("LEDGER_TEST_MOVE", "").split(","))
    if "reset_cache" in MOVES:
        import jax._src.compilation_cache as cc
        del cc.reset_cache
    if "listeners" in MOVES:
        import jax.monitoring
        del jax.monitoring.register_event_listener
    if "events" in MOVES:  # a release that renamed its cache events
        import jax._src.compilation_cache as cc, jax._src.compiler as compiler

        class Renamed:
            def __init__(self, real):
                self.real = real
            def __getattr__(self, name):
                return getattr(self.real, name)
            def record_event(self, event, **kw):
                self.real.record_event(event.replace("/compilation_cache/", "/cc2/"), **kw)

        cc.monitoring = compiler.monitoring = Renamed(compiler.monitoring)
    if "logger" in MOVES:  # a release that renamed its cache_key logger
        import jax._src.cache_key as ck
        ck.logger = logging.getLogger("jax._src.cache_key_v2")
    if "lru_cache" in MOVES:
        sys.modules["jax._src.lru_cache"] = None

    def build(cell):
        return (lambda x: jnp.sum(x ** 2)), np.linspace(0.0, 1.0, 4)
''')

LINE_RESET = (f"{JAX}: jax._src.compilation_cache.reset_cache is gone; a cache dir set "
              "after this process's first compile may not apply")
LINE_LISTENER = (f"{JAX}: jax.monitoring.register_event_listener is gone; "
                 "cache_state from cache files only")
LINE_EVENTS = (f"{JAX}: no '/jax/compilation_cache/compile_requests_use_cache' event from a "
               "compile with a cache dir; cache_state from cache files only")
LINE_LOGGER = (f"{JAX}: no 'get_cache_key hash of serialized' lines from logger "
               "jax._src.cache_key; cache_key_components not measured")
LINE_LRU = f"{JAX}: jax._src.lru_cache is gone; cache files not counted"


@pytest.fixture
def moved(tmp_path, monkeypatch):
    """Set which internals the objective module moves; the module is in the cwd."""
    (tmp_path / "moved.py").write_text(MOVED)

    def move(*names):
        monkeypatch.setenv(MOVE_ENV, ",".join(names))
    return move


def probe_process(cache_dir, transforms=("jit",)):
    recs = []
    spec = ProbeSpec.make(objective="moved:build", transforms=list(transforms),
                          steady_calls=1, cache_dir=str(cache_dir))
    run_child(payload(spec, "r", None, spec.cache_dir, spec.transforms), recs.append)
    assert [r["status"] for r in recs] == ["ok"] * len(transforms), [r["error"] for r in recs]
    return recs


def evidence(rec):
    return (rec["cache_state"], rec["cache_state_source"], rec["cache_requests"],
            rec["cache_hits"], rec["cache_misses"], rec["cache_files_before"],
            rec["cache_files_after"])


def lines(rec):
    return json.loads(rec["provenance"]).get("jax_internals")


@pytest.mark.jax
def test_intact_internals_note_nothing(tmp_path, moved):
    moved()
    cold, = probe_process(tmp_path / "c")
    warm, = probe_process(tmp_path / "c")
    assert evidence(cold) == ("cold", "measured_events", 1, 0, 1, 0, 1)
    assert evidence(warm) == ("warm", "measured_events", 1, 1, 0, 1, 1)
    assert lines(cold) is None and lines(warm) is None


@pytest.mark.jax
def test_gone_reset_and_event_listener_fall_back_to_files(tmp_path, moved):
    moved("reset_cache", "listeners")
    cold, = probe_process(tmp_path / "c")
    warm, = probe_process(tmp_path / "c")
    # the counts were not measured (NULL, not 0); the files still were
    assert evidence(cold) == ("cold", "measured_files", None, None, None, 0, 1)
    assert evidence(warm) == ("warm", "measured_files", None, None, None, 1, 1)
    assert lines(cold) == lines(warm) == [LINE_RESET, LINE_LISTENER]
    # what did not move is still measured
    assert cold["cache_key"] == warm["cache_key"] and cold["cache_key_components"]
    assert cold["backend_compile_s"] > 0


@pytest.mark.jax
def test_renamed_events_fall_back_to_files(tmp_path, moved):
    moved("events")
    cold, = probe_process(tmp_path / "c")
    warm, = probe_process(tmp_path / "c")
    assert evidence(cold) == ("cold", "measured_files", 0, 0, 0, 0, 1)
    assert evidence(warm) == ("warm", "measured_files", 0, 0, 0, 1, 1)
    assert lines(cold) == lines(warm) == [LINE_EVENTS]


@pytest.mark.jax
def test_renamed_logger_and_gone_file_cache_keep_the_events(tmp_path, moved):
    moved("logger", "lru_cache")
    cold, = probe_process(tmp_path / "c")
    warm, = probe_process(tmp_path / "c")
    assert evidence(cold) == ("cold", "measured_events", 1, 0, 1, None, None)
    assert evidence(warm) == ("warm", "measured_events", 1, 1, 0, None, None)
    assert cold["cache_key_components"] is None and warm["cache_key_components"] is None
    assert lines(cold) == lines(warm) == [LINE_LRU, LINE_LOGGER]


@pytest.mark.jax
def test_no_events_and_no_files_is_unknown(tmp_path, moved):
    moved("listeners", "lru_cache")
    rec, = probe_process(tmp_path / "c")
    assert evidence(rec) == ("unknown", "unknown", None, None, None, None, None)
    assert lines(rec) == [LINE_LISTENER, LINE_LRU]


@pytest.mark.jax
def test_ledger_probe_prints_each_line_once_and_no_traceback(tmp_path, moved, db):
    moved("reset_cache", "listeners")
    r = subprocess.run([LEDGER, "probe", "-o", "moved:build", "-t", "jit,grad",
                        "--cache-dir", tmp_path / "c", "--db", db],
                       check=False, capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert [ln for ln in r.stderr.splitlines() if ln.startswith("jax ")] == [
        LINE_RESET, LINE_LISTENER]
    rows = [ln.split()[:4] for ln in r.stdout.splitlines()[2:4]]
    assert rows == [["jit", "ok", "cold", "measured_files"], ["grad", "ok", "cold", "measured_files"]]


# -- in this process: the parts that need no compile ------------------------------------

@pytest.fixture
def fresh_notes(monkeypatch):
    monkeypatch.setattr(ji, "_notes", {})


def test_reset_cache_that_raises_is_one_line(monkeypatch, fresh_notes):
    import jax._src.compilation_cache as cc

    def changed(*args):
        raise TypeError("reset_cache() missing 1 required positional argument: 'backend'")
    monkeypatch.setattr(cc, "reset_cache", changed)
    ji.reset_cache()
    ji.reset_cache()  # noted once per process
    assert ji.notes() == [(
        f"{JAX}: jax._src.compilation_cache.reset_cache() raised TypeError: reset_cache() "
        "missing 1 required positional argument: 'backend'; a cache dir set after this "
        "process's first compile may not apply")]


def test_key_lines_of_both_jax_generations():
    comp = [f"get_cache_key hash of serialized computation: {'a' * 64}",
            f"get_cache_key hash after serializing computation: {'b' * 64}",
            "Including XLA flag in cache key: --xla_foo=1",
            "Including XLA flag in cache key: --xla_foo=1"]
    new = ji.parse_key_lines(comp + [
        f"PERSISTENT COMPILATION CACHE MISS for 'jit_f' with key 'jit_f-{'b' * 64}'"])
    old = ji.parse_key_lines(comp + [  # jax 0.4.30: the key is only in the file cache's line
        "Persistent compilation cache hit for 'jit_f'", f"Cache hit for key: 'jit_f-{'b' * 64}'"])
    bare = ji.parse_key_lines(comp)
    assert new == old == {"cache_key": f"jit_f-{'b' * 64}", "components": {"computation": "a" * 64},
                          "xla_flags_in_key": ["--xla_foo=1"]}
    assert bare["cache_key"] == "b" * 64


# -- a recorded row's input_signature: every dtype spelled as JAX spells it -------------
# (dtype name, JAX's short name). Each is lowered by a real jax.jit at (8, 5) and as a
# scalar, and the recorder's parse of the lowered text must read exactly as JAX prints
# the argument's type (ShapedArray.str_short(short_dtypes=True)). Dtypes this jax lacks
# (the newer float8 and float4 kinds, int2 on the floor) are left out of the table, not
# skipped: ci/jax_legs.sh fails a leg that skips.
DTYPES = [
    ("float32", "f32"), ("float64", "f64"), ("float16", "f16"), ("bfloat16", "bf16"),
    ("complex64", "c64"), ("complex128", "c128"),
    ("bool", "bool"), ("int8", "i8"), ("int16", "i16"), ("int32", "i32"), ("int64", "i64"),
    ("uint8", "u8"), ("uint16", "u16"), ("uint32", "u32"), ("uint64", "u64"),
    ("int4", "i4"), ("uint4", "u4"), ("int2", "i2"), ("uint2", "u2"),
    ("float8_e4m3fn", "f8_e4m3fn"), ("float8_e5m2", "f8_e5m2"), ("float8_e4m3fnuz", "f8_e4m3fnuz"),
    ("float8_e5m2fnuz", "f8_e5m2fnuz"), ("float8_e4m3b11fnuz", "f8_e4m3b11fnuz"),
    ("float8_e3m4", "f8_e3m4"), ("float8_e4m3", "f8_e4m3"), ("float8_e8m0fnu", "f8_e8m0fnu"),
    ("float4_e2m1fn", "f4_e2m1fn"),
]


def _jax_dtype(name):
    import jax.numpy as jnp

    return getattr(jnp, name, None)


@pytest.fixture
def x64():
    import jax

    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", before)


@pytest.mark.jax
@pytest.mark.parametrize("name, short", [d for d in DTYPES if _jax_dtype(d[0]) is not None],
                         ids=[d[0] for d in DTYPES if _jax_dtype(d[0]) is not None])
def test_input_signature_spells_each_dtype_as_jax_does(name, short, x64):
    import jax

    dtype = _jax_dtype(name)
    for shape, dims in (((8, 5), "8,5"), ((), "")):
        spec = jax.ShapeDtypeStruct(shape, dtype)
        text = jax.jit(lambda x: x).lower(spec).as_text()
        assert ji.input_signature(text) == f"{short}[{dims}] -> {short}[{dims}]"
        assert f"{short}[{dims}]" == jax.core.ShapedArray(shape, dtype).str_short(short_dtypes=True)


@pytest.mark.jax
def test_input_signature_of_mixed_arguments_and_results(x64):
    import jax
    import jax.numpy as jnp

    def f(z, n, mask):
        return jnp.where(mask, z * n, 0).real, (z.imag > 0)

    args = (jnp.zeros((8, 5), jnp.complex64), jnp.int32(2), jnp.ones((8, 5), bool))
    assert ji.input_signature(jax.jit(f).lower(*args).as_text()) == \
        "c64[8,5], i32[], bool[8,5] -> f32[8,5], bool[8,5]"


@pytest.mark.jax
def test_input_signature_spells_tokens_as_jax_does():
    import jax

    def ordered(x):
        jax.debug.print("{}", x, ordered=True)  # the effect's token is an argument and a result
        return x + 1

    assert ji.input_signature(jax.jit(ordered).lower(1.0).as_text()) == "Tok, f32[] -> Tok, f32[]"


# -- function_kind: an eager op's compile, or the program's own jitted function ----------
# A program run in its own process (a fresh jax: every step compiles), with the
# compile path wrapped the way the recorder wraps it and function_kind() asked inside
# the wrapper. Each step uses its own shapes, so that it compiles what it names.
KIND_LIBRARY = textwrap.dedent('''
    import jax, jax.numpy as jnp

    @jax.jit
    def lens_likelihood(x):  # a library's own jitted function (autolens-like)
        return jnp.sum(jnp.sin(x) ** 2)
''')
KIND_PROGRAM = textwrap.dedent('''
    import json, sys
    import jax, jax.numpy as jnp
    from ledger.probes import jax_internals as ji
    import kindlib

    seen, step = [], ["import"]

    def make_wrapper(original):
        def wrapper(*args, **kwargs):
            name = ji.module_name(args[1])
            seen.append((step[0], name, ji.function_kind(), ji.call_site()))
            return original(*args, **kwargs)
        return wrapper

    assert ji.wrap_compile(make_wrapper)

    def user(x):
        return x * 3 + 1

    def loss(x):
        return jnp.sum(jnp.cos(x) * x)

    step[0] = "zeros"; x = jnp.zeros(3)
    step[0] = "add"; y = x + 1
    step[0] = "sum"; jnp.sum(jnp.ones((2, 2)))
    step[0] = "rfft2"; jnp.fft.rfft2(jnp.ones((4, 6)))
    step[0] = "user_jit"; jax.jit(user)(y)
    step[0] = "library_jit"; kindlib.lens_likelihood(y)
    step[0] = "lower_compile"; jax.jit(lambda v: v - 2).lower(y).compile()
    step[0] = "grad"; jax.grad(loss)(jnp.ones(7))
    json.dump({"seen": seen, "notes": ji.notes()}, sys.stdout)
''')
KIND_EXPECTED = {"zeros": "eager", "add": "eager", "sum": "eager", "rfft2": "eager",
                 "user_jit": "jit", "library_jit": "jit", "lower_compile": "jit", "grad": "eager"}


@pytest.mark.jax
def test_function_kind_tells_eager_ops_from_the_programs_jitted_functions(tmp_path):
    (tmp_path / "kindlib.py").write_text(KIND_LIBRARY)
    (tmp_path / "program.py").write_text(KIND_PROGRAM)
    done = subprocess.run([sys.executable, "program.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    kinds: dict[str, set] = {}
    for step, _name, kind, _site in out["seen"]:
        kinds.setdefault(step, set()).add(kind)
    assert kinds == {step: {kind} for step, kind in KIND_EXPECTED.items()}, out["seen"]
    # each compile's call site is the program's line of its step (past JAX's frames, and past
    # the library's @jax.jit, which is JAX's wrapper once called), relative to its sys.path entry
    lines = {step: next(i for i, ln in enumerate(KIND_PROGRAM.splitlines(), 1) if f'step[0] = "{step}"' in ln)
             for step in KIND_EXPECTED}
    loss = next(i for i, ln in enumerate(KIND_PROGRAM.splitlines(), 1) if "return jnp.sum(jnp.cos(x) * x)" in ln)
    assert {(step, site) for step, _, _, site in out["seen"]} == {
        (step, f"program.py:{lines[step]} <module>") for step in KIND_EXPECTED} | {
        ("grad", f"program.py:{loss} loss")}, out["seen"]  # an un-jitted grad's ops: the innermost is loss's line
    names = {(step, name) for step, name, _, _ in out["seen"]}
    # the program's own functions are named as JAX names them; the eager ones are JAX's
    assert {("user_jit", "jit_user"), ("library_jit", "jit_lens_likelihood"), ("add", "jit_add"),
            ("sum", "jit__reduce_sum")} <= names
    assert out["notes"] == []


@pytest.mark.jax
def test_input_signature_spells_prng_keys_from_the_compiles_own_avals(monkeypatch):
    """A key<fry>[] is lowered to its u32[2] data, so the module alone cannot say it is
    a key; the compile's avals (compile_avals(), read inside the wrapper) can."""
    import jax
    from jax._src import compiler

    seen = []
    original = compiler.compile_or_get_cached

    def wrapper(*args, **kwargs):
        text = ji.module_text(args[1])
        seen.append((ji.input_signature(text), ji.input_signature(text, ji.compile_avals())))
        return original(*args, **kwargs)

    def f(k, x):
        return jax.random.normal(k, (3,)) + x, jax.random.split(k, 4)

    key, x = jax.random.key(0), jax.numpy.ones(3)  # compiled before the wrapper is in place
    rbg = jax.random.key(1, impl="rbg")
    monkeypatch.setattr(compiler, "compile_or_get_cached", wrapper)
    jax.jit(f).lower(key, x).compile()
    jax.jit(lambda k: k).lower(rbg).compile()
    assert seen == [("u32[2], f32[3] -> f32[3], u32[4,2]", "key<fry>[], f32[3] -> f32[3], key<fry>[4]"),
                    ("u32[4] -> u32[4]", "key<rbg>[] -> key<rbg>[]")]
    assert not any("argument types" in n or "from_hlo" in n for n in ji.notes())
