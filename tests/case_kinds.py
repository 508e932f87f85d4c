"""The kinds of test case that need more than the venv, how to tell whether this
machine has what each needs, and the one rule for a case whose need is not met:
it skips, saying why; where the run must be complete (LEDGER_REQUIRE_ALL=1, as
.ci/run sets) it fails instead.

A case has a kind by a marker of that name (`@pytest.mark.chromium`); conftest.py
marks the PostgreSQL cases itself (a "postgresql" parameter, or the pg_db fixture),
checks each case's kinds before its fixtures are set up, and counts the cases that
ran by kind in the summary line.
"""

from __future__ import annotations

import multiprocessing
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

import pytest

REQUIRE_ALL = "LEDGER_REQUIRE_ALL"
# The per-kind switches that came first; still honoured.
REQUIRE_ONE = {"postgresql": "LEDGER_REQUIRE_PG", "slurm": "LEDGER_REQUIRE_SLURM"}
PG_ENV = "LEDGER_TEST_PG_URL"
LEDGER = Path(sys.executable).with_name("ledger")


def chromium() -> str | None:
    return shutil.which("chromium") or ("/usr/bin/chromium" if shutil.which("/usr/bin/chromium") else None)


# Mount namespaces a test may make its mounts in (a read-only bind, a small tmpfs),
# tried in order: an unprivileged user namespace, else, for root where user
# namespaces are off, a mount namespace of its own. unshare(1) makes mounts private,
# so none of them is seen outside, and all go with the namespace's last process.
NAMESPACES = (["unshare", "--user", "--map-root-user", "--mount"], ["unshare", "--mount"])


@cache
def mount_namespace() -> tuple[list[str] | None, str | None]:
    """(the unshare command that gives a mount namespace where a tmpfs mounts, None)
    or (None, why there is none here)."""
    if shutil.which("unshare") is None:
        return None, "no unshare(1) here (util-linux)"
    why = []
    with tempfile.TemporaryDirectory() as tmp:
        for command in NAMESPACES:
            try:
                r = subprocess.run([*command, "sh", "-ec", 'mount -t tmpfs -o size=64k tmpfs "$1"', "sh", tmp],
                                   capture_output=True, text=True, timeout=30, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                why.append(f"{' '.join(command)}: {exc}")
                continue
            if r.returncode == 0:
                return command, None
            why.append(f"{' '.join(command)}: {r.stderr.strip()}")
    return None, "no private mount namespace here (" + "; ".join(why) + ")"


@cache
def unprivileged() -> tuple[list[str] | None, str | None]:
    """(the command prefix that runs a program as a user that permission bits bind,
    None) or (None, why there is none). Not root: itself, no prefix. Root, whom
    permission bits do not stop: `nobody`, through setpriv."""
    if os.geteuid() != 0:
        return [], None
    if shutil.which("setpriv") is None:
        return None, "running as root and no setpriv(1) to become nobody (util-linux)"
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        return None, "running as root and there is no user nobody to become"
    prefix = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"]
    # nobody must be able to run this venv's ledger (a clone under /root is not readable)
    r = subprocess.run([*prefix, LEDGER, "--version"], capture_output=True, text=True, timeout=60, cwd="/", check=False)
    if r.returncode != 0:
        return None, f"running as root and nobody cannot run {LEDGER}: {r.stderr.strip()[-300:]}"
    return prefix, None


def _postgresql() -> str | None:
    return None if os.environ.get(PG_ENV) else f"no PostgreSQL server: set {PG_ENV} (ci/postgres.sh start prints it)"


def _slurm() -> str | None:
    return None if os.environ.get("LEDGER_TEST_SLURM") else \
        "no SLURM here: as root, ci/slurm.sh start starts a single-node one and prints LEDGER_TEST_SLURM=1"


def _chromium() -> str | None:
    return None if chromium() else "no chromium: ci/chromium.sh installs Debian's package"


def _fork() -> str | None:
    return None if "fork" in multiprocessing.get_all_start_methods() else "no fork start method on this platform"


# kind: (what it needs, for `pytest --markers`; why it cannot run here, or None)
KINDS = {
    "postgresql": ("a PostgreSQL server (ci/postgres.sh start)", _postgresql),
    "slurm": ("a SLURM cluster (ci/slurm.sh start)", _slurm),
    "chromium": ("headless Chromium (ci/chromium.sh)", _chromium),
    "namespace": ("a private mount namespace (unshare), for read-only and full filesystems",
                  lambda: mount_namespace()[1]),
    "unprivileged": ("a user that permission bits bind: not root, or root able to become nobody",
                     lambda: unprivileged()[1]),
    "fork": ("the fork start method (the importer's parallel readers)", _fork),
}


def required_by() -> list[str]:
    """The switches set that make every kind, or some, required."""
    return [name for name in (REQUIRE_ALL, *REQUIRE_ONE.values()) if os.environ.get(name)]


def switch_requiring(kind: str) -> str | None:
    """The environment variable that makes cases of `kind` fail rather than skip."""
    for name in (REQUIRE_ALL, REQUIRE_ONE.get(kind)):
        if name and os.environ.get(name):
            return name
    return None


def require(kind: str) -> None:
    """Return if this machine can run a case of `kind`; else skip saying why, or fail
    where a switch says every such case must run."""
    why = KINDS[kind][1]()
    if why is None:
        return
    switch = switch_requiring(kind)
    if switch:
        pytest.fail(f"a {kind} case cannot run here and {switch} is set: {why}", pytrace=False)
    pytest.skip(f"{kind}: {why}")
