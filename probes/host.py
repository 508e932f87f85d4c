"""Host state and environment provenance: what a reader needs to judge a number later.

Sampled outside the timed windows. XLA compiles on the host cores, so load and the
CPUs this process may use (fewer than the node has on a SLURM allocation) matter.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import sys


def timestamp() -> str:
    """Now, by the record contract's one clock (UTC, aware, seconds)."""
    from ledger.record import now_timestamp

    return now_timestamp()


def load_avg() -> tuple[float, float, float] | tuple[None, None, None]:
    import psutil  # here, not at the top: a recorded process imports this module at `import jax`

    try:
        return tuple(float(v) for v in psutil.getloadavg())  # type: ignore[return-value]
    except (OSError, AttributeError):
        return None, None, None


def host_state() -> dict:
    import psutil

    l1, l5, l15 = load_avg()
    try:
        affinity = len(psutil.Process().cpu_affinity())
    except (AttributeError, OSError):  # not available on macOS
        affinity = None
    vm = psutil.virtual_memory()
    return {
        "host_cpu_count": psutil.cpu_count(logical=True),
        "host_load_avg_1m": l1,
        "host_load_avg_5m": l5,
        "host_load_avg_15m": l15,
        "host_cpu_affinity": affinity,
        "host_mem_total_mb": round(vm.total / 2**20, 1),
        "host_mem_available_mb": round(vm.available / 2**20, 1),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID") or os.environ.get("SLURM_JOBID"),
        "slurm_node": os.environ.get("SLURMD_NODENAME") or os.environ.get("SLURM_NODELIST"),
        **sweep_state(),
        "hostname": socket.gethostname(),
    }


# Set by `ledger sweep task` for the probe of one of its tasks (ledger/cli/sweep.py).
SWEEP_ID_ENV, SWEEP_TASK_ENV = "LEDGER_SWEEP_ID", "LEDGER_SWEEP_TASK"


def _int_env(name: str) -> int | None:
    value = os.environ.get(name)
    return int(value) if value and value.isdigit() else None


def sweep_state() -> dict:
    """Which sweep task and SLURM array task this probe runs for, if any."""
    return {
        "sweep_id": os.environ.get(SWEEP_ID_ENV) or None,
        "sweep_task": _int_env(SWEEP_TASK_ENV),
        "slurm_array_job_id": os.environ.get("SLURM_ARRAY_JOB_ID") or None,
        "slurm_array_task_id": _int_env("SLURM_ARRAY_TASK_ID"),
    }


def hardware_name(platform_name: str, device_kind: str) -> str:
    if platform_name == "cpu":
        return "local_cpu"
    return f"local_{platform_name}_{device_kind.replace(' ', '_')}"


def jax_environment() -> dict:
    """Versions, backend and device; call once jax is imported (it initialises the backend)."""
    import jax
    import jaxlib

    dev = jax.devices()[0]
    kind = str(getattr(dev, "device_kind", "") or "")
    platform_name = dev.platform
    return {
        "jax_version": jax.__version__,
        "jaxlib_version": getattr(jaxlib, "__version__", None),
        "backend": jax.default_backend(),
        "device_kind": kind,
        "hardware": hardware_name(platform_name, kind),
        "device_count": jax.device_count(),
    }


def static_provenance() -> dict:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "pid": os.getpid(),
        "argv0": sys.argv[0] if sys.argv else None,
    }


def dumps(obj) -> str:
    return json.dumps(obj, sort_keys=True, default=str)
