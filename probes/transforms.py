"""The transforms: each one is its own jitted program, hence its own compiled module
(and its own persistent-cache entry).

The registry (names, descriptions, parsing, batch-shape checks) costs nothing to
import: numpy and jax are imported inside the functions that build programs, so
``ledger objectives`` lists the transforms for free.

``build_transform`` returns a Prepared: the function to jit, its example arguments,
and how to call the compiled executable for one timed "call" (for pyloop_vag one call
is a full sweep of n_batch/batch_size chunks from Python).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ledger.probes.errors import ProbeError

TRANSFORMS: dict[str, str] = {
    "jit": "jit of f",
    "grad": "jit of grad(f)",
    "vag": "jit of value_and_grad(f)",
    "vmap": "jit of vmap(f) over n_batch inputs",
    "vmap_vag": "jit of vmap(value_and_grad(f)) over n_batch inputs",
    "laxmap_vag": "jit of lax.map(value_and_grad(f), batch_size=batch_size) over n_batch inputs",
    "pyloop_vag": ("jit of vmap(value_and_grad(f)) over one batch_size chunk, called "
                   "n_batch/batch_size times from Python (first_s and steady_s are full sweeps)"),
}
# The transforms that split n_batch into batch_size chunks.
CHUNKED = ("laxmap_vag", "pyloop_vag")


def describe_transforms() -> list[tuple[str, str]]:
    """(name, one-line description) for each transform, in registry order."""
    return list(TRANSFORMS.items())


def _choices() -> str:
    return ", ".join(TRANSFORMS)


def parse_transforms(value: str | Iterable[str]) -> tuple[str, ...]:
    """'jit,vag' or ['jit', 'vag'] or 'all' -> validated names, in the given order."""
    items = value.split(",") if isinstance(value, str) else list(value)
    names = [s.strip() for s in items if s and s.strip()]
    if names == ["all"]:
        return tuple(TRANSFORMS)
    if not names:
        raise ProbeError("no transforms given: choose from " + _choices())
    bad = [n for n in names if n not in TRANSFORMS]
    if bad:
        raise ProbeError(f"unknown transform {bad[0]!r}: choose from {_choices()}")
    dup = [n for n in names if names.count(n) > 1]
    if dup:
        raise ProbeError(f"transform {dup[0]!r} given twice")
    return tuple(names)


def validate_batching(transforms: Iterable[str], n_batch: int, batch_size: int) -> None:
    if n_batch < 1 or batch_size < 1:
        raise ProbeError(f"n_batch ({n_batch}) and batch_size ({batch_size}) must be >= 1")
    chunked = set(CHUNKED) & set(transforms)
    if chunked and n_batch % batch_size:
        raise ProbeError(f"n_batch ({n_batch}) is not divisible by batch_size ({batch_size}), "
                         f"needed by {', '.join(sorted(chunked))}")


@dataclass
class Prepared:
    fn: Callable          # what jax.jit wraps
    args: tuple           # example arguments for lower()
    sweep: Callable       # sweep(compiled) -> outputs of one timed call (not yet blocked)


def batch_inputs(x0, n: int):
    """n distinct, deterministic points near x0 (numpy: no jax compile to build them)."""
    import numpy as np

    x0 = np.asarray(x0)
    ramp = np.linspace(-1.0, 1.0, max(n, 1), dtype=np.float64)[:n, None]
    scale = 1e-3 * (1.0 + np.abs(x0.astype(np.float64)))[None, :]
    return (x0[None, :] + ramp * scale).astype(x0.dtype)


def _once(*args) -> Callable:
    return lambda compiled: compiled(*args)


def build_transform(name: str, fn: Callable, x0: Any, n_batch: int, batch_size: int) -> Prepared:
    import jax
    import numpy as np

    if name not in TRANSFORMS:
        raise ProbeError(f"unknown transform {name!r}: choose from {_choices()}")
    x0 = np.asarray(x0)
    if x0.ndim != 1:
        raise ProbeError(f"the objective's x0 must be a 1-D parameter vector, got shape {x0.shape}")
    # Inputs live on the device before any timed window, so steady calls time the
    # executable and not a host-to-device copy. device_put compiles nothing.
    put = jax.device_put
    xs_host = batch_inputs(x0, n_batch)
    x0 = put(x0)
    single = {"jit": fn, "grad": jax.grad(fn), "vag": jax.value_and_grad(fn)}
    if name in single:
        return Prepared(single[name], (x0,), _once(x0))

    vag = jax.value_and_grad(fn)
    if name == "pyloop_vag":
        chunks = [put(xs_host[i:i + batch_size]) for i in range(0, n_batch, batch_size)]
        return Prepared(jax.vmap(vag), (chunks[0],),
                        lambda compiled: [compiled(c) for c in chunks])
    xs = put(xs_host)
    batched = {
        "vmap": jax.vmap(fn),
        "vmap_vag": jax.vmap(vag),
        "laxmap_vag": lambda b: _lax_map_chunked(vag, b, batch_size),
    }
    return Prepared(batched[name], (xs,), _once(xs))


def _lax_map_chunked(f: Callable, xs, batch_size: int):
    """``lax.map(f, xs, batch_size=batch_size)``. jax 0.4.30, the declared floor, has no
    batch_size: there the same program (a scan over vmapped chunks) is spelled out."""
    import inspect

    import jax
    from jax import lax

    if "batch_size" in inspect.signature(lax.map).parameters:
        return lax.map(f, xs, batch_size=batch_size)
    n = xs.shape[0]  # a multiple of batch_size (validate_batching)
    out = lax.map(jax.vmap(f), xs.reshape(n // batch_size, batch_size, *xs.shape[1:]))
    return jax.tree_util.tree_map(lambda y: y.reshape(n, *y.shape[2:]), out)
