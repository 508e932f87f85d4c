"""`ledger --help` against `alembic --help`: the CLI must not import jax at start.

Median of 15 runs each, interleaved; target: ledger no slower (ratio <= 1.0). Also
checks that neither jax nor probes is imported by `ledger --help`.
Run: .venv/bin/python bench/bench_cli_startup.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BIN, verdict  # noqa: E402


def once(cmd) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ledger, alembic = [], []
    for _ in range(15):
        ledger.append(once([BIN / "ledger", "--help"]))
        alembic.append(once([BIN / "alembic", "--help"]))
    lm, am = statistics.median(ledger), statistics.median(alembic)
    imported = subprocess.run(
        [sys.executable, "-c", "import sys; sys.argv=['ledger','--help']\n"
         "from ledger.cli import app\ntry: app()\nexcept SystemExit: pass\n"
         "print(sorted({m.split('.')[0] for m in sys.modules} & {'jax','jaxlib','probes'}), file=sys.stderr)"],
        capture_output=True, text=True, check=True).stderr.strip()
    print(f"ledger --help {lm * 1000:.0f} ms   alembic --help {am * 1000:.0f} ms   (median of 15)")
    print(f"ratio {lm / am:.2f}x (target <= 1.0) {verdict(lm / am, 1.0)}")
    print(f"heavy modules imported by ledger --help: {imported}")


if __name__ == "__main__":
    main()
