"""Objective resolution: the built-in registry and ``package.module:builder``.

A builder's contract (the cell it receives, the ``(fn, x0)`` it returns) is in
probes/builders.py, which holds the built-ins. A user objective records as its
``model_type`` the builder's ``model_type`` attribute when it has one::

    def build(cell): ...
    build.model_type = "mge"

and otherwise its module's last name (``mylens:build`` records ``mylens``). A user
module is imported with the working directory on the import path, as ``python -m``,
pytest and uvicorn do: ``--objective mylens:build`` works from the folder holding
mylens.py (and the probe's child processes inherit that path).

Importing this module does not import jax.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ledger.probes import builders
from ledger.probes.errors import ProbeError

Builder = Callable[[dict], tuple[Callable, Any]]


@dataclass(frozen=True)
class Objective:
    """A resolved objective: its spec string, the model_type it records, its builder."""

    spec: str
    model_type: str
    builder: Builder
    builtin: bool


BUILTINS: dict[str, Builder] = {
    "toy": builders.build_toy,
    "mge": builders.build_mge,
    "pixelization": builders.build_pixelization,
}

_DESCRIPTIONS = {
    "toy": "8 parameters, a few elementwise ops: compiles in well under a second (smoke tests)",
    "mge": (f"multi-Gaussian lens model, {builders.MGE_GRID}x{builders.MGE_GRID} image, "
            f"2x{builders.MGE_COMPONENTS} Gaussians, amplitudes by a linear solve; 13 parameters"),
    "pixelization": (f"pixelized source ({builders.PIX_SOURCE}x{builders.PIX_SOURCE}) on a "
                     f"{builders.PIX_GRID}x{builders.PIX_GRID} image, regularized linear inversion "
                     "(Cholesky, log evidence); 8 parameters"),
}


def describe_builtins() -> list[tuple[str, str]]:
    """(name, one-line description) for each built-in objective, in registry order."""
    return [(name, _DESCRIPTIONS[name]) for name in BUILTINS]


def resolve_objective(spec: str) -> Objective:
    """A built-in name or ``package.module:builder``; ProbeError on anything else."""
    if not isinstance(spec, str) or not spec.strip():
        raise ProbeError("objective is empty: give a built-in name "
                         f"({', '.join(BUILTINS)}) or package.module:builder")
    spec = spec.strip()
    if spec in BUILTINS:
        return Objective(spec=spec, model_type=spec, builder=BUILTINS[spec], builtin=True)
    if ":" not in spec:
        raise ProbeError(f"unknown objective {spec!r}: built-ins are {', '.join(BUILTINS)}; "
                         "a user objective is package.module:builder")
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr or ":" in attr:
        raise ProbeError(f"bad objective {spec!r}: expected package.module:builder")
    builder = _lookup(spec, _import_user_module(spec, mod_name), attr)
    return Objective(spec=spec, model_type=user_model_type(builder, mod_name),
                     builder=builder, builtin=False)


def user_model_type(builder: Any, mod_name: str) -> str:
    """The builder's ``model_type`` attribute, else the module's last name."""
    named = getattr(builder, "model_type", None)
    if isinstance(named, str) and named.strip():
        return named.strip()
    return mod_name.rsplit(".", 1)[-1]


def _import_user_module(spec: str, mod_name: str):
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(mod_name)
    except ImportError as err:
        raise ProbeError(f"objective {spec!r}: cannot import {mod_name!r}: {err}") from None
    except Exception as err:  # the user's module raised while importing  # noqa: BLE001
        raise ProbeError(f"objective {spec!r}: importing {mod_name!r} raised "
                         f"{type(err).__name__}: {err}") from None


def _lookup(spec: str, module: Any, attr: str) -> Builder:
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ProbeError(f"objective {spec!r}: {module.__name__!r} has no attribute "
                             f"{attr!r}") from None
    if not callable(obj):
        raise ProbeError(f"objective {spec!r}: {attr!r} is not callable")
    return obj
