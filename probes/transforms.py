"""The transforms: each one is its own jitted program, hence its own compiled module
(and its own persistent-cache entry).

``build_transform`` returns a Prepared: the function to jit, its example arguments,
and how to call the compiled executable for one timed "call" (for pyloop_vag one call
is a full sweep of n_batch/batch_size chunks from Python).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from probes.errors import ProbeError
from probes.records import TRANSFORMS


@dataclass
class Prepared:
    fn: Callable          # what jax.jit wraps
    args: tuple           # example arguments for lower()
    sweep: Callable       # sweep(compiled) -> outputs of one timed call (not yet blocked)


def batch_inputs(x0: np.ndarray, n: int) -> np.ndarray:
    """n distinct, deterministic points near x0 (numpy: no jax compile to build them)."""
    x0 = np.asarray(x0)
    ramp = np.linspace(-1.0, 1.0, max(n, 1), dtype=np.float64)[:n, None]
    scale = 1e-3 * (1.0 + np.abs(x0.astype(np.float64)))[None, :]
    return (x0[None, :] + ramp * scale).astype(x0.dtype)


def validate_batching(transforms, n_batch: int, batch_size: int) -> None:
    if n_batch < 1 or batch_size < 1:
        raise ProbeError(f"n_batch ({n_batch}) and batch_size ({batch_size}) must be >= 1")
    batched = {"laxmap_vag", "pyloop_vag"} & set(transforms)
    if batched and n_batch % batch_size:
        raise ProbeError(f"n_batch ({n_batch}) is not divisible by batch_size ({batch_size}), "
                         f"needed by {', '.join(sorted(batched))}")


def build_transform(name: str, fn: Callable, x0: Any, n_batch: int, batch_size: int) -> Prepared:
    import jax
    from jax import lax

    if name not in TRANSFORMS:
        raise ProbeError(f"unknown transform {name!r}: choose from {', '.join(TRANSFORMS)}")
    x0 = np.asarray(x0)
    if x0.ndim != 1:
        raise ProbeError(f"the objective's x0 must be a 1-D parameter vector, got shape {x0.shape}")
    # Inputs live on the device before any timed window, so steady calls time the
    # executable and not a host-to-device copy. device_put compiles nothing.
    put = jax.device_put
    xs_host = batch_inputs(x0, n_batch)
    x0 = put(x0)

    def once(*a):
        return lambda c: c(*a)

    if name == "jit":
        return Prepared(fn, (x0,), once(x0))
    if name == "grad":
        return Prepared(jax.grad(fn), (x0,), once(x0))
    if name == "vag":
        return Prepared(jax.value_and_grad(fn), (x0,), once(x0))

    xs = put(xs_host)
    if name == "vmap":
        return Prepared(jax.vmap(fn), (xs,), once(xs))
    if name == "vmap_vag":
        return Prepared(jax.vmap(jax.value_and_grad(fn)), (xs,), once(xs))
    if name == "laxmap_vag":
        vag = jax.value_and_grad(fn)
        return Prepared(lambda b: lax.map(vag, b, batch_size=batch_size), (xs,), once(xs))
    if name == "pyloop_vag":
        chunks = [put(xs_host[i:i + batch_size]) for i in range(0, n_batch, batch_size)]

        def sweep(compiled):
            return [compiled(c) for c in chunks]

        return Prepared(jax.vmap(jax.value_and_grad(fn)), (chunks[0],), sweep)
    raise AssertionError(name)
