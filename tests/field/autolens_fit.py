"""A small PyAutoLens fit, written as the field writes one: the program the field leg
(ci/field_leg.sh) records with `ledger record`. Nothing in it knows about the ledger.

It simulates a 40x40 imaging dataset with autolens's own simulator (an isothermal lens,
a cored Sersic source), then fits it with a lens model through a real search (L-BFGS,
a few iterations). autofit builds the likelihood itself, `jax.jit` of its
`Fitness.call`: the scalar likelihood that the initializer evaluates, and its value and
gradient that L-BFGS asks for (both are computations named `jit_call`).

The order of the imports is the field's: autolens and autofit first. They look jax up
(`importlib.util.find_spec("jax")`) and set JAX's environment (x64, XLA_FLAGS, the
cache's 1 s threshold) but do not import it; the program's `import jax` below is the
first. Its own `jax.monitoring` listeners are the oracle that the ledger is held to:
one entry per XLA compile (JAX's backend_compile_duration event, with the computation's
name), whether JAX wrote that compile to the persistent cache, and whether it was a hit.
They are written as JSON to the path given as the first argument.
"""

import json
import re
import sys
import threading
import time

import autofit as af
import autolens as al
import jax

out_path = sys.argv[1]
t_start = time.time()

_local = threading.local()
oracle = {"compiles": [], "events": {}}


def _on_event(event, **kwargs):
    if event.startswith("/jax/compilation_cache/"):
        oracle["events"][event] = oracle["events"].get(event, 0) + 1
        # both fire inside the compile they belong to, before its duration event
        if event == "/jax/compilation_cache/cache_hits":
            _local.hit = True
        elif event == "/jax/compilation_cache/cache_misses":  # JAX counts a written entry so
            _local.written = True


def _on_duration(event, duration, **kwargs):
    if event != "/jax/core/compile/backend_compile_duration":
        return
    fun_name = str(kwargs.get("fun_name"))
    oracle["compiles"].append({
        "fun_name": fun_name,
        # the module's name, as JAX derives it from fun_name (mlir.sanitize_name)
        "function": re.sub(r"[^\w.-]", "_", fun_name).rstrip("_"),
        "seconds": duration,
        "written": getattr(_local, "written", False),
        "hit": getattr(_local, "hit", False),
    })
    _local.written = _local.hit = False


jax.monitoring.register_event_listener(_on_event)
jax.monitoring.register_event_duration_secs_listener(_on_duration)

# -- simulate -----------------------------------------------------------------------
grid = al.Grid2D.uniform(shape_native=(40, 40), pixel_scales=0.1)
psf = al.Convolver.from_gaussian(shape_native=(11, 11), sigma=0.1, pixel_scales=grid.pixel_scales)
simulator = al.SimulatorImaging(exposure_time=300.0, psf=psf, background_sky_level=0.1,
                                add_poisson_noise_to_data=True, noise_seed=1)
lens = al.Galaxy(redshift=0.5, mass=al.mp.Isothermal(centre=(0.0, 0.0), einstein_radius=1.0, ell_comps=(0.1, 0.05)))
source = al.Galaxy(redshift=1.0, bulge=al.lp.SersicCore(centre=(0.05, 0.05), ell_comps=(0.05, 0.1), intensity=4.0,
                                                         effective_radius=0.2, sersic_index=1.0))
dataset = simulator.via_tracer_from(tracer=al.Tracer(galaxies=[lens, source]), grid=grid)
mask = al.Mask2D.circular(shape_native=dataset.shape_native, pixel_scales=dataset.pixel_scales, radius=1.8)
dataset = dataset.apply_mask(mask=mask)

# -- fit ----------------------------------------------------------------------------
model = af.Collection(galaxies=af.Collection(
    lens=af.Model(al.Galaxy, redshift=0.5, mass=al.mp.Isothermal),
    source=af.Model(al.Galaxy, redshift=1.0, bulge=al.lp.SersicCore),
))
analysis = al.AnalysisImaging(dataset=dataset, use_jax=True)
search = af.LBFGS(name="lbfgs", path_prefix="field_leg", maxiter=5)
result = search.fit(model=model, analysis=analysis)

oracle.update({
    "log_likelihood": float(result.log_likelihood),
    "seconds": time.time() - t_start,
    "jax": jax.__version__,
    "x64": bool(jax.config.jax_enable_x64),
    "cache_dir": jax.config.jax_compilation_cache_dir,
    "min_compile_time_secs": jax.config.jax_persistent_cache_min_compile_time_secs,
})
with open(out_path, "w") as f:
    json.dump(oracle, f, indent=1)
biggest = sorted(oracle["compiles"], key=lambda c: -c["seconds"])[:3]
print(f"oracle: {len(oracle['compiles'])} compiles, {sum(c['written'] for c in oracle['compiles'])} written,"
      f" {sum(c['hit'] for c in oracle['compiles'])} hits; biggest "
      + ", ".join(f"{c['function']} {c['seconds']:.2f}s" for c in biggest))
print(f"log likelihood {oracle['log_likelihood']:.3f} in {oracle['seconds']:.1f}s")
