"""`ledger cache DIR` on 10,000 synthetic entries (zlib, as JAX writes them without
zstandard: 4 bytes of compile seconds, then 32 kB of executable that does not compress),
against the floor: listing the dir and stat-ing every file (os.scandir), in the same run.
Both as fresh processes, best of 3. Target: under 10 s.
Run: .venv/bin/python bench/bench_cache.py [N]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BIN

TRIES, TARGET_S = 3, 10.0
FLOOR = "import os, sys; print(sum(e.stat().st_size for e in os.scandir(sys.argv[1])))"


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        cache.mkdir()
        for i in range(n):
            body = (i % 90).to_bytes(4, "big") + os.urandom(32_768)
            (cache / f"jit_fn{i % 300}-{i:064x}-cache").write_bytes(zlib.compress(body, 1))
        size = sum(p.stat().st_size for p in cache.iterdir())
        floor = min(timed([sys.executable, "-c", FLOOR, str(cache)]) for _ in range(TRIES))
        took = min(timed([str(BIN / "ledger"), "cache", str(cache), "--db", str(Path(tmp) / "none.db")])
                   for _ in range(TRIES))
    print(f"{n:,} entries, {size / 1e6:.0f} MB")
    print(f"floor (scandir + stat): {floor:.2f} s")
    print(f"ledger cache: {took:.2f} s = {took / floor:.1f}x the floor: "
          f"{'PASS' if took < TARGET_S else 'FAIL'} (target: under {TARGET_S:.0f} s)")


if __name__ == "__main__":
    main()
