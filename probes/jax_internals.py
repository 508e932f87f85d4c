"""Everything the probe reads from JAX beyond its public API, in one place, and what the
probe does when one of those things has moved.

The cache evidence (probes/evidence.py) rests on names JAX does not promise to keep:
- the ``jax.monitoring`` event names for cache requests, hits, written misses and the
  backend compile time;
- the DEBUG lines of the ``jax._src.cache_key``, ``jax._src.compiler`` and
  ``jax._src.lru_cache`` loggers: the hash of each cache-key component, and the key;
- how ``jax._src.lru_cache`` names an entry on disk (``<key>-cache`` since jax 0.4.31,
  a bare ``<key>`` in 0.4.30);
- ``jax._src.compilation_cache.reset_cache``, so that a cache configured after this
  process's first compile takes effect;
- the names of the cache's config options and of their environment variables;
- for `ledger record` (ledger/recorder): ``jax._src.compiler.compile_or_get_cached``,
  wrapped; the compiled module's ``sym_name`` and text (``mlir.module_to_string``); the
  trace and lowering duration events; the "Not writing persistent cache entry" lines;
  and, read from the compile's Python stack, the frames of pjit's
  ``_pjit_call_impl_python`` (its ``jaxpr``'s debug info) and ``cache_miss`` (its
  ``jit_info.fun_sourceinfo``), stages' ``compile`` (function_kind), and pxla's
  ``from_hlo`` (its ``global_in_avals``/``global_out_avals``: compile_avals); the same
  stack, past JAX's frames, gives the program's line that asked (call_site).

Tested on the declared floor (jax 0.4.30) and on the newest jax by ci/jax_legs.sh.
When one of them is missing or behaves differently, nothing raises: the probe records
one line naming the JAX version (``notes()``: the CLI prints each once, and each
record keeps them in its provenance) and measures what it still can. The rows say
what could not be measured: ``cache_state_source`` is ``measured_files`` when JAX's
events were missing and ``unknown`` when the files could not be counted either; the
event counts, the key or its components are NULL when they were not seen.

Importing this module does not import jax.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import sys
import threading

from ledger.record import FUNCTION_KIND_EAGER, FUNCTION_KIND_JIT

# -- jax.monitoring event names ---------------------------------------------------------
EV_REQUEST = "/jax/compilation_cache/compile_requests_use_cache"
EV_HIT = "/jax/compilation_cache/cache_hits"
EV_MISS_WRITTEN = "/jax/compilation_cache/cache_misses"  # fires only when the miss is written
EV_BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"
# `ledger record` (ledger/recorder): the durations JAX reports before a compile
EV_TRACE = "/jax/core/compile/jaxpr_trace_duration"  # jax 0.4.30-0.12: jax._src.dispatch
EV_LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"  # jax 0.4.30-0.12: jax._src.dispatch

# -- loggers and their lines --------------------------------------------------------------
CACHE_KEY_LOGGER = "jax._src.cache_key"
COMPILER_LOGGER = "jax._src.compiler"
LRU_CACHE_LOGGER = "jax._src.lru_cache"  # jax 0.4.30 logs the key only here
LOGGERS = (CACHE_KEY_LOGGER, COMPILER_LOGGER, LRU_CACHE_LOGGER)
# the recorder also reads why a miss was not written: the size check logs here
COMPILATION_CACHE_LOGGER = "jax._src.compilation_cache"  # jax 0.4.30-0.12
RECORD_LOGGERS = (*LOGGERS, COMPILATION_CACHE_LOGGER)
# "Not writing persistent cache entry ..." (jax._src.compiler._cache_write and
# jax._src.compilation_cache.put_executable_and_time, jax 0.4.30-0.12)
_NOT_WRITTEN = (("process_id != 0", "process_index"),
                ("because it took <", "min_compile_time"),
                ("since its size", "min_entry_size"))

_COMPONENT_RE = re.compile(r"get_cache_key hash of serialized (.+?): ([0-9a-f]+)$")
_CUMULATIVE_RE = re.compile(r"get_cache_key hash after serializing (.+?): ([0-9a-f]+)$")
_FLAG_RE = re.compile(r"Including XLA flag in cache key: (.*)$")
_KEY_RES = (re.compile(r"(?:hit|MISS) for '[^']*' with key '([^']*)'"),  # jax.compiler
            re.compile(r"Cache (?:hit|miss) for key: '([^']*)'"))  # jax._src.lru_cache

# -- config options and the environment variables that set them ------------------------
OPT_CACHE_DIR = "jax_compilation_cache_dir"
OPT_MIN_COMPILE_TIME = "jax_persistent_cache_min_compile_time_secs"
OPT_MIN_ENTRY_SIZE = "jax_persistent_cache_min_entry_size_bytes"
ENV_CACHE_DIR = "JAX_COMPILATION_CACHE_DIR"
ENV_MIN_COMPILE_TIME = "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"
ENV_MIN_ENTRY_SIZE = "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"
# The settings that decide whether and how the persistent cache applies; recorded as
# they are (None for one this JAX does not have).
CACHE_SETTINGS = (
    OPT_CACHE_DIR,
    "jax_enable_compilation_cache",
    OPT_MIN_COMPILE_TIME,
    OPT_MIN_ENTRY_SIZE,
    "jax_compilation_cache_max_size",
    "jax_persistent_cache_enable_xla_caches",
    "jax_compilation_cache_include_metadata_in_key",
    "jax_explain_cache_misses",
)

FILES_ONLY = "cache_state from cache files only"

# -- the one line per moved internal ----------------------------------------------------
_notes: dict[str, None] = {}  # insertion-ordered set: each line once per process
_lock = threading.Lock()


def jax_version() -> str:
    try:
        import jax
        return str(jax.__version__)
    except Exception:  # noqa: BLE001 - a jax that does not import is reported by its importer
        return "?"


def x64_enabled() -> bool | None:
    """Whether JAX runs with 64-bit types (jax_enable_x64) now: from its public config,
    else from what float64 canonicalizes to (public on every jax this supports)."""
    try:
        import jax
    except Exception:  # noqa: BLE001 - no jax: not known
        return None
    try:
        return bool(jax.config.jax_enable_x64)
    except AttributeError:
        import numpy
        return jax.dtypes.canonicalize_dtype(numpy.float64) == numpy.float64


def note(what: str, consequence: str) -> None:
    """Record ``jax <version>: <what>; <consequence>``, once per process."""
    with _lock:
        _notes.setdefault(f"jax {jax_version()}: {what}; {consequence}", None)


def notes() -> list[str]:
    """The lines noted so far in this process, in order."""
    with _lock:
        return list(_notes)


def notes_of(records) -> list[str]:
    """The distinct lines the probe noted in ``records`` (kept in their provenance), for
    whoever shows them to the user (the CLI: once each, on stderr)."""
    seen: dict[str, None] = {}
    for rec in records:
        try:
            prov = json.loads(rec.get("provenance") or "{}")
        except (TypeError, ValueError):
            continue
        for line in prov.get("jax_internals") or ():
            seen.setdefault(str(line), None)
    return list(seen)


def _internal(module: str, attr: str | None, consequence: str):
    """``module.attr`` (or the module), else None with its line noted."""
    try:
        obj = importlib.import_module(module)
        return getattr(obj, attr) if attr else obj
    except (ImportError, AttributeError):
        note(f"{module}.{attr} is gone" if attr else f"{module} is gone", consequence)
        return None


# -- the persistent cache's configuration ----------------------------------------------
def reset_cache() -> None:
    """Drop JAX's initialised cache so that the configuration now set applies."""
    consequence = "a cache dir set after this process's first compile may not apply"
    reset = _internal("jax._src.compilation_cache", "reset_cache", consequence)
    if reset is None:
        return
    try:
        reset()
    except Exception as err:  # noqa: BLE001 - changed, not gone: same consequence
        note(f"jax._src.compilation_cache.reset_cache() raised {type(err).__name__}: {err}",
             consequence)


def set_option(name: str, value) -> bool:
    """``jax.config.update(name, value)``; False, with its line noted, if JAX refuses."""
    import jax

    try:
        jax.config.update(name, value)
        return True
    except Exception as err:  # noqa: BLE001 - a renamed option or a refused value
        note(f"config option {name} cannot be set ({type(err).__name__}: {err})",
             "small compiles may not be written, so file counts may read warm"
             if name != OPT_CACHE_DIR else "no persistent cache")
        return False


def option(name: str):
    """A config option's value, or None if this JAX has no such option."""
    import jax

    try:
        return getattr(jax.config, name)
    except AttributeError:
        return None


def cache_settings() -> dict:
    return {name: option(name) for name in CACHE_SETTINGS}


# -- events ------------------------------------------------------------------------------
def register_listeners(on_event, on_duration) -> bool:
    """Register with jax.monitoring; False (noted) if its listener API is gone."""
    register = _internal("jax.monitoring", "register_event_listener", FILES_ONLY)
    register_duration = _internal("jax.monitoring", "register_event_duration_secs_listener",
                                  "backend_compile_s not measured")
    if register_duration is not None:
        register_duration(on_duration)
    if register is None:
        return False
    register(on_event)
    return True


def note_missing_evidence(summary: dict) -> None:
    """After a compile that succeeded with a cache dir: name what JAX did not report.
    Every such compile requests the cache and computes a key, so silence means a moved
    event or logger (or a backend without the persistent cache)."""
    if summary["cache_requests"] == 0:
        note(f"no {EV_REQUEST!r} event from a compile with a cache dir", FILES_ONLY)
    if summary["cache_key_components"] is None:
        note(f"no 'get_cache_key hash of serialized' lines from logger {CACHE_KEY_LOGGER}",
             "cache_key_components not measured")


# -- the cache key, from the loggers' lines ------------------------------------------
def parse_key_lines(messages: list[str]) -> dict:
    """The key JAX used, each component's hash and the XLA flags in the key."""
    components: dict[str, str] = {}
    final = key = None
    flags: list[str] = []
    for m in messages:
        if (mt := _COMPONENT_RE.search(m)):
            components[mt.group(1)] = mt.group(2)
        elif (mt := _CUMULATIVE_RE.search(m)):
            final = mt.group(2)
        elif (mt := _FLAG_RE.search(m)):
            if mt.group(1) not in flags:  # logged again when JAX re-hashes for DEBUG
                flags.append(mt.group(1))
        elif key is None:
            key = next((mt.group(1) for r in _KEY_RES if (mt := r.search(m))), None)
    # The key is "<module name>-<cumulative hash>", logged on a hit or a miss; the bare
    # hash stands in if no such line was seen.
    return {"cache_key": key if key is not None else final,
            "components": components, "xla_flags_in_key": flags}


# -- entries on disk ---------------------------------------------------------------------
_UNSET = object()
_suffix = _UNSET


def entry_suffix() -> str | None:
    """The file-name suffix of one cache entry ('' for the bare key of jax 0.4.30), or
    None (noted) if this JAX's file cache is not where it was."""
    global _suffix
    if _suffix is _UNSET:
        lru = _internal("jax._src.lru_cache", None, "cache files not counted")
        _suffix = None if lru is None else getattr(lru, "_CACHE_SUFFIX", "")
    return _suffix


def count_entries(cache_dir: str) -> int | None:
    """Entries in JAX's file cache, flat in the dir; None if this JAX's naming is unknown.
    Not entries: the LRU cache's ``-atime`` companions and its ``.lockfile``."""
    suffix = entry_suffix()
    if suffix is None:
        return None
    try:
        with os.scandir(cache_dir) as it:
            return sum(1 for e in it if e.name.endswith(suffix) and not e.name.startswith(".")
                       and not e.name.endswith("-atime") and e.is_file())
    except FileNotFoundError:
        return 0


# -- the cache key without compiling (`ledger predict`) --------------------------------
# jax._src.compiler._cache_read(module_name, cache_key, ...) is called by
# compile_or_get_cached once the key is known and before anything is compiled: the
# same two leading arguments from jax 0.4.30 to 0.12. Its backend compile is
# backend_compile (0.4.30 to 0.4.3x) or backend_compile_and_load (later): reached only
# when no key was computed (cache disabled or not used), and stopped there too.
COMPILER_MODULE = "jax._src.compiler"
CACHE_READ = "_cache_read"
BACKEND_COMPILES = ("backend_compile", "backend_compile_and_load")
UNPREDICTABLE = "the persistent-cache key cannot be computed without compiling"


class _KeyReached(BaseException):
    """Raised from inside JAX's compile path at its cache read; a BaseException so that
    JAX's own ``except Exception`` handlers let it through."""

    def __init__(self, key):
        super().__init__(key)
        self.key = key


class _CompileReached(BaseException):
    """Raised where JAX would compile because it computed no cache key."""


class Unpredictable(Exception):
    """This JAX cannot be predicted on: the message is one line naming its version."""


def cache_key_without_compiling(lowered) -> str | None:
    """The persistent-cache key ``lowered.compile()`` would look up, or None when JAX
    computes none (no cache dir, or the cache not used for this backend). Compiles
    nothing: the compile path is stopped at its cache read, or at its backend compile."""
    compiler = _internal(COMPILER_MODULE, None, UNPREDICTABLE)
    if compiler is None or not hasattr(compiler, CACHE_READ):
        raise Unpredictable(f"jax {jax_version()}: {COMPILER_MODULE}.{CACHE_READ} is gone; "
                            f"{UNPREDICTABLE}")
    compiles = [n for n in BACKEND_COMPILES if hasattr(compiler, n)]
    if not compiles:
        raise Unpredictable(f"jax {jax_version()}: {COMPILER_MODULE} has none of "
                            f"{', '.join(BACKEND_COMPILES)}; {UNPREDICTABLE}")

    def read(module_name, cache_key, *args, **kwargs):
        raise _KeyReached(cache_key)

    def compile_(*args, **kwargs):
        raise _CompileReached()

    saved = {n: getattr(compiler, n) for n in (CACHE_READ, *compiles)}
    setattr(compiler, CACHE_READ, read)
    for n in compiles:
        setattr(compiler, n, compile_)
    try:
        lowered.compile()
    except _KeyReached as reached:
        return str(reached.key)
    except _CompileReached:
        return None
    finally:
        for n, fn in saved.items():
            setattr(compiler, n, fn)
    raise Unpredictable(f"jax {jax_version()}: lowered.compile() returned without reaching "
                        f"{COMPILER_MODULE}.{CACHE_READ}; {UNPREDICTABLE}")


def entry_name(key: str) -> str | None:
    """The file name of ``key``'s entry in the cache dir (``<key>-cache`` since jax
    0.4.31, ``<key>`` in 0.4.30); None if this JAX's file cache is not where it was."""
    suffix = entry_suffix()
    return None if suffix is None else f"{key}{suffix}"


def not_persisted_cause(messages: list[str]) -> str | None:
    """Why JAX wrote no entry for a miss, from its "Not writing" lines (the causes of
    ledger.record.NOT_PERSISTED_CAUSES), or None when it said nothing."""
    for m in messages:
        if m.startswith("Not writing") or "Not writing" in m:
            for needle, cause in _NOT_WRITTEN:
                if needle in m:
                    return cause
    return None


# -- the compile path, for `ledger record` -------------------------------------------------
# jax 0.4.30-0.12: jax._src.compiler.compile_or_get_cached(backend, computation, ...) is
# the one call every XLA compile goes through (pxla calls it as compiler.<name>, so a
# wrapper on the module attribute sees them all), inside the window of the
# backend_compile_duration event. Its computation is an MLIR module whose sym_name is
# the name JAX gives the computation (jit_f), the prefix of its cache key.
COMPILER_MODULE, COMPILE_FN = "jax._src.compiler", "compile_or_get_cached"
NO_RECORDING = "nothing recorded"


def wrap_compile(make_wrapper) -> bool:
    """Replace compile_or_get_cached by make_wrapper(original); False (noted) if gone."""
    compiler = _internal(COMPILER_MODULE, None, NO_RECORDING)
    original = getattr(compiler, COMPILE_FN, None) if compiler is not None else None
    if original is None:
        note(f"{COMPILER_MODULE}.{COMPILE_FN} is gone", NO_RECORDING)
        return False
    if getattr(original, "__ledger_original__", None) is None:
        wrapper = make_wrapper(original)
        wrapper.__ledger_original__ = original
        setattr(compiler, COMPILE_FN, wrapper)
    return True


def module_name(computation) -> str | None:
    """The computation's name as JAX gives it (its sym_name), or None (noted)."""
    try:
        from jax._src.lib.mlir import ir

        return ir.StringAttr(computation.operation.attributes["sym_name"]).value
    except Exception as err:  # noqa: BLE001 - moved: the row keeps the rest
        note(f"the compiled module's sym_name cannot be read ({type(err).__name__})", "function not recorded")
        return None


def module_text(computation) -> str | None:
    """The module as text, without debug info (as ``Lowered.as_text()`` gives it)."""
    to_string = _internal("jax._src.interpreters.mlir", "module_to_string",
                          "input_signature and program_fingerprint not recorded")
    if to_string is None:
        return None
    try:
        return to_string(computation)
    except Exception as err:  # noqa: BLE001
        note(f"module_to_string raised {type(err).__name__}", "input_signature and program_fingerprint not recorded")
        return None


_MAIN_RE = re.compile(r"func\.func public @main\((.*)$", re.MULTILINE)
# One MLIR type: a tensor (whose element type may nest one level: complex<f32>) or a
# dialect type such as !stablehlo.token.
_TYPE = r"tensor<(?:[^<>]|<[^<>]*>)*>|![\w.]+"
_TYPE_RE = re.compile(_TYPE)
_ARGS_RE = re.compile(rf"%arg\d+: ({_TYPE})")
_DIMS_RE = re.compile(r"((?:(?:\d+|\?)x)*)(.*)")  # 8x5x | complex<f32> (dims: static or ?)
_FLOAT_KIND_RE = re.compile(r"f(\d+)(E\w+)")  # f8E4M3FN, f4E2M1FN, f8E8M0FNU


def _dtype_text(element: str) -> str:
    """An MLIR element type spelled as JAX spells the dtype (the short names of
    ``ShapedArray.str_short(short_dtypes=True)``): i1 -> bool, ui8 -> u8,
    complex<f32> -> c64, f8E4M3FN -> f8_e4m3fn; f32, bf16, i32 are the same in both.
    An element type JAX has no dtype for is kept as MLIR spells it."""
    if element == "i1":
        return "bool"
    if element.startswith("ui") and element[2:].isdigit():
        return f"u{element[2:]}"
    if element.startswith("complex<f") and element.endswith(">") and element[9:-1].isdigit():
        return f"c{2 * int(element[9:-1])}"
    if (m := _FLOAT_KIND_RE.fullmatch(element)):
        return f"f{m.group(1)}_{m.group(2).lower()}"
    return element


def _type_text(raw: str) -> str:
    # "tensor<3x4xf32>" -> "f32[3,4]"; "tensor<f32>" -> "f32[]"; "tensor<2xcomplex<f64>>"
    # -> "c128[2]"; a token as JAX shows one ("Tok"), another dialect type as it is
    if raw == "!stablehlo.token":
        return "Tok"
    if not raw.startswith("tensor<"):
        return raw
    body = raw[len("tensor<"):-1].partition(",")[0].strip()  # no encoding
    dims, element = _DIMS_RE.match(body).groups()  # always matches: dims may be none
    return f"{_dtype_text(element)}[{','.join(dims.split('x')[:-1])}]"


def input_signature(text: str | None, avals=None) -> str | None:
    """The main function's argument types and, after ``->``, its result types, each
    spelled as JAX prints an array type: ``f32[3,4], i32[] -> c64[3]``. Static
    arguments are folded into the program, so the results are where most of them show
    (a broadcast to shape (3,) or to (5,)).

    The module has no PRNG key type (a ``key<fry>[]`` is lowered to its ``u32[2]``
    data): ``avals`` (compile_avals(), the compile's own argument and result types)
    gives a key its JAX spelling, where they line up one for one with the module's
    arguments and results other than tokens."""
    if not text or not (m := _MAIN_RE.search(text)):
        return None
    line = m.group(1)
    head, _, results = line.partition(") -> ")
    args = [_type_text(t) for t in _ARGS_RE.findall(head)]
    outs = [_type_text(t.group(0)) for t in _TYPE_RE.finditer(results)]
    if avals is not None:
        args, outs = _with_key_types(args, avals[0]), _with_key_types(outs, avals[1])
    args_text, outs_text = ", ".join(args), ", ".join(outs)
    return f"{args_text} -> {outs_text}".lstrip() if outs_text else args_text


def _with_key_types(types: list[str], avals) -> list[str]:
    """`types` with each extended-dtype aval (a PRNG key) spelled as JAX spells it;
    unchanged unless the avals match the non-token types one for one."""
    try:
        import jax

        avals = list(avals)
        slots = [i for i, t in enumerate(types) if t != "Tok"]
        if len(slots) != len(avals):
            return types
        out = list(types)
        for i, aval in zip(slots, avals):
            if jax.dtypes.issubdtype(aval.dtype, jax.dtypes.extended):
                out[i] = aval.str_short(short_dtypes=True)
        return out
    except Exception as err:  # noqa: BLE001 - moved: the module's own types stand
        note(f"a compile's argument types cannot be read ({type(err).__name__})",
             "PRNG keys read as their u32 data")
        return types


def compile_avals(frame=None):
    """(argument avals, result avals) of the compile in progress, from pxla's
    UnloadedMeshExecutable.from_hlo(name, hlo, global_in_avals, global_out_avals, ...)
    on the stack (jax 0.4.30-0.12, for a call of a jitted function and for
    ``Lowered.compile()`` alike); None (noted) if no such frame. Call it from inside the
    compile_or_get_cached wrapper, as function_kind()."""
    jax_dirs = _code_dirs()[0]
    f = frame if frame is not None else sys._getframe(1)
    while f is not None:
        if _is(f, "pxla.py", "from_hlo", jax_dirs):
            ins, outs = f.f_locals.get("global_in_avals"), f.f_locals.get("global_out_avals")
            if ins is not None and outs is not None:
                return ins, outs
            break
        f = f.f_back
    note("no pxla from_hlo frame with global_in_avals and global_out_avals", "PRNG keys read as their u32 data")
    return None


# -- eager primitive or the program's own jitted function, for `ledger record` ------------
# Called from inside the compile_or_get_cached wrapper, so the Python stack is the
# compile's. What JAX compiles is always a jitted function: an op run outside jit is
# jitted by JAX itself (dispatch.apply_primitive's prim_fun, jnp's @jit helpers such as
# _reduce_sum), so the question is whose function it is. JAX says so itself, in the
# frames of its compile path (jax 0.4.30-0.12):
# - pjit._pjit_call_impl_python(*args, jaxpr, ...): the traced function's source,
#   ``jaxpr.jaxpr.debug_info.func_src_info`` ("f at FILE:LINE"); None under a transform
#   on 0.4.30, which drops the debug info;
# - pjit's cache_miss (the C++ fast path's fallback): ``jit_info.fun_sourceinfo``;
# - stages' compile (``Lowered.compile()``): the program's own ahead-of-time compile.
# A function whose source is in jax or jaxlib is JAX's own: eager. Where neither says
# (a transpose on 0.4.30), the program's entry into JAX decides: an op, a transform
# (jax.grad) or an array method is eager.
_NO_KIND = "function_kind not recorded"
_dirs: tuple[tuple[str, ...], tuple[str, ...]] | None = None


def _code_dirs() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(JAX's own dirs: jax, jaxlib; every dir that is not the program's: JAX's, this
    package's and the ledger's), each with a trailing separator; found once."""
    global _dirs
    if _dirs is None:
        jax_dirs = []
        for name in ("jax", "jaxlib"):
            spec = importlib.util.find_spec(name)
            if spec is not None and spec.origin:
                jax_dirs.append(os.path.dirname(os.path.abspath(spec.origin)) + os.sep)
        import ledger.record

        here = os.path.dirname(os.path.abspath(__file__))
        # this package (probes/ in a checkout, ledger/probes in the wheel) and the ledger's
        ours = (here + os.sep, os.path.dirname(os.path.abspath(ledger.record.__file__)) + os.sep)
        _dirs = (tuple(jax_dirs), (*jax_dirs, *ours))
    return _dirs


def _kind_of_source(src) -> str | None:
    """"f at FILE:LINE" -> eager when FILE is JAX's own, jit otherwise; None if unparsable."""
    if not isinstance(src, str) or " at " not in src:
        return None
    path = src.rpartition(" at ")[2].rpartition(":")[0]
    if not path:
        return None
    if path.startswith("<"):  # <stdin>, <string>, a notebook cell: the program's
        return FUNCTION_KIND_JIT
    return FUNCTION_KIND_EAGER if os.path.abspath(path).startswith(_code_dirs()[0]) else FUNCTION_KIND_JIT


def _is(frame, module_file: str, name: str, jax_dirs: tuple[str, ...]) -> bool:
    code = frame.f_code
    return (code.co_name == name and code.co_filename.endswith(os.sep + module_file)
            and code.co_filename.startswith(jax_dirs))


def function_kind(frame=None) -> str | None:
    """Whose function this compile is: ``"eager"`` when JAX compiles an op run outside
    jit (jnp.zeros -> jit_broadcast_in_dim, x + 1 -> jit_add, an eager jnp.sum ->
    jax's own @jit helper jit__reduce_sum, the ops of an un-jitted jax.grad), ``"jit"``
    when it is a jitted function of the program or of a library it uses (jax.jit(f)(x),
    jax.jit(f).lower(x).compile(), a library's @jax.jit); None (noted) when the stack
    says neither. Call it from inside the compile_or_get_cached wrapper: it reads the
    Python stack of the compile, from its innermost JAX frame (``frame``: where to start
    instead of the caller's)."""
    try:
        jax_dirs, not_program = _code_dirs()
        f = frame if frame is not None else sys._getframe(1)
        while f is not None and not f.f_code.co_filename.startswith(jax_dirs):
            f = f.f_back  # the wrappers around compile_or_get_cached (the recorder's)
        entry = None  # the outermost JAX frame below the program's (api_boundary's aside)
        while f is not None:
            code = f.f_code
            if _is(f, "pjit.py", "_pjit_call_impl_python", jax_dirs):
                jaxpr = f.f_locals.get("jaxpr")
                info = getattr(getattr(jaxpr, "jaxpr", None), "debug_info", None)
                if (kind := _kind_of_source(getattr(info, "func_src_info", None))) is not None:
                    return kind
            elif _is(f, "pjit.py", "cache_miss", jax_dirs):
                jit_info = f.f_locals.get("jit_info")
                if (kind := _kind_of_source(getattr(jit_info, "fun_sourceinfo", None))) is not None:
                    return kind
            elif _is(f, "stages.py", "compile", jax_dirs):
                return FUNCTION_KIND_JIT
            if not code.co_filename.startswith(not_program):
                break  # the program's frame: `entry` is what it called
            if code.co_filename.startswith(jax_dirs) and not code.co_filename.endswith(
                    os.sep + "traceback_util.py"):
                entry = f
            f = f.f_back
        if f is not None and entry is not None:
            # the program called JAX (an op, an array method, a transform) and no jitted
            # function of its own was found on the way to the compile
            return FUNCTION_KIND_EAGER
    except Exception as err:  # noqa: BLE001 - moved: the row keeps the rest
        note(f"the compile's stack cannot be read ({type(err).__name__}: {err})", _NO_KIND)
        return None
    note("no pjit or stages frame names the compiled function, and no program frame called JAX",
         _NO_KIND)
    return None


# -- where the program asked for the compile, for `ledger record` -------------------------
# The innermost frame on the compile's stack that is neither JAX's (jax, jaxlib), the
# ledger's, nor Python's own library (a contextlib or threading frame says nothing): the
# program's line, or a library's outside JAX (autogalaxy's, autofit's), that led to the
# compile. Its file is shown relative to the sys.path entry holding it, so one line reads
# the same on every node and `ledger sql` can group by it.
_site_files: dict[str, str | None] = {}  # co_filename -> shown path, or None: not the program's


def _site_path(filename: str) -> str | None:
    shown = _site_files.get(filename, "")
    if shown != "":
        return shown
    import sysconfig

    not_program = _code_dirs()[1]
    libs = tuple(os.path.join(p, "") for p in {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib")} if p)
    path = os.path.abspath(filename) if not filename.startswith("<") else filename
    installed = f"{os.sep}site-packages{os.sep}" in path or f"{os.sep}dist-packages{os.sep}" in path
    if filename.startswith("<frozen") or path.startswith(not_program) or (path.startswith(libs) and not installed):
        shown = None
    elif filename.startswith("<"):
        shown = filename  # <string>, <stdin>: the program's own
    else:
        roots = sorted((os.path.join(os.path.abspath(p or os.curdir), "") for p in sys.path if isinstance(p, str)),
                       key=len, reverse=True)
        root = next((r for r in roots if path.startswith(r)), None)
        shown = path[len(root):] if root else path
    _site_files[filename] = shown
    return shown


def call_site(frame=None) -> str | None:
    """``file:line function`` of the program's (or a library's outside JAX) innermost
    frame on the compile's stack; None when every frame is JAX's or Python's.
    Call it from inside the compile_or_get_cached wrapper, as function_kind()."""
    try:
        jax_dirs = _code_dirs()[0]
        f = frame if frame is not None else sys._getframe(1)
        while f is not None and not f.f_code.co_filename.startswith(jax_dirs):
            f = f.f_back  # the wrappers around compile_or_get_cached (the recorder's)
        while f is not None:
            shown = _site_path(f.f_code.co_filename)
            if shown is not None:
                return f"{shown}:{f.f_lineno} {f.f_code.co_name}"
            f = f.f_back
    except Exception as err:  # noqa: BLE001 - the row keeps the rest
        note(f"the compile's stack cannot be read ({type(err).__name__}: {err})", "call_site not recorded")
        return None
    return None  # every frame JAX's or Python's (a compile in a thread the program never saw)


def process_index() -> int | None:
    """This process's index (JAX reads and writes the persistent cache from process 0),
    or None where the backend cannot say."""
    try:
        import jax

        return int(jax.process_index())
    except Exception:  # noqa: BLE001 - public API; a backend that cannot say
        return None
