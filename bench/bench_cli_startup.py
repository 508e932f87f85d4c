"""CLI start-up, two ratios:

- `ledger --help` against `alembic --help`: the CLI must not import jax at start
  (target: ledger no slower, ratio <= 1.0);
- `ledger sql "select count(*) ..."` on a SQLite ledger against `ledger --help`: an
  ad-hoc query must not pay for SQLAlchemy or the revision gate (target <= 1.5x).

Median of 15 runs each, interleaved. Also checks which heavy modules each imports.
Run: .venv/bin/python bench/bench_cli_startup.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BIN, verdict


def once(cmd) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


HEAVY = "{'jax', 'jaxlib', 'ledger.probes', 'sqlalchemy', 'alembic', 'matplotlib'}"


def imported_by(*argv: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", (f"import sys; sys.argv={['ledger', *argv]!r}\n"
                                "from ledger.cli import app\ntry: app()\nexcept SystemExit: pass\n"
                                f"print(sorted({{'.'.join(m.split('.')[:2 if m.startswith('ledger.') else 1]) for m in sys.modules}}"
                                f" & {HEAVY}), file=sys.stderr)")],
        capture_output=True, text=True, check=True).stderr.strip().splitlines()[-1]


def main() -> None:
    corpus = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "legacy-results"
    db = Path(tempfile.mkdtemp()) / "ledger.db"
    subprocess.run([BIN / "ledger", "import", corpus, "--db", db], check=True, stdout=subprocess.DEVNULL)
    query = ["sql", "select count(*) from compile_records", "--db", str(db)]
    ledger, alembic, sql = [], [], []
    for _ in range(15):
        ledger.append(once([BIN / "ledger", "--help"]))
        alembic.append(once([BIN / "alembic", "--help"]))
        sql.append(once([BIN / "ledger", *query]))
    lm, am, sm = statistics.median(ledger), statistics.median(alembic), statistics.median(sql)
    print(f"ledger --help {lm * 1000:.0f} ms   alembic --help {am * 1000:.0f} ms   "
          f"ledger sql {sm * 1000:.0f} ms   (median of 15)")
    print(f"ledger --help / alembic --help {lm / am:.2f}x (target <= 1.0) {verdict(lm / am, 1.0)}")
    print(f"ledger sql / ledger --help {sm / lm:.2f}x (target <= 1.5) {verdict(sm / lm, 1.5)}")
    print(f"heavy modules imported by ledger --help: {imported_by('--help')}")
    print(f"heavy modules imported by ledger sql: {imported_by(*query)}")


if __name__ == "__main__":
    main()
