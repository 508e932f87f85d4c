"""The field leg (ci/field_leg.sh): `ledger record` on a real PyAutoLens fit, on the
field's stack (Python 3.12, the newest autolens and the jax it resolves).

The program (tests/field/autolens_fit.py) runs twice under `ledger record` with one
persistent cache: cold, then warm. Its own `jax.monitoring` listeners are the oracle;
the ledger must hold one row per compile the oracle saw, with the same functions and
JAX's own compile seconds, all cold on run 1, and warm on run 2 exactly where run 1
wrote a cache entry (the rows whose `cache_not_persisted` is NULL). The compile that
matters is there: the likelihood autofit jits, `jit_call`, the most costly of run 1.
Each row's input signature reads as types (the program convolves through FFTs:
complex arrays), and the program's stdout is its own: autofit points the root logger
at stdout, so anything the ledger logs would land there. Then the cache dir the fit
filled: `ledger cache` finds one entry per write with JAX's seconds read from each and
run 2's hits, a dry-run prune changes nothing, and `ledger check` finds the compiles
under the 1 s threshold that every run pays again.

Not part of the main suite (pyproject.toml ignores tests/field): the suite runs on a jax
that autolens refuses. The leg runs this file from a copy outside the tree, so the
ledger under test is the installed wheel.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

PROGRAM = Path(__file__).with_name("autolens_fit.py")
FOREIGN_LOGGERS = re.compile(r" - (alembic|sqlalchemy|ledger|probes)[.\w]* - ")
LIKELIHOOD = "jit_call"  # autofit's jax.jit of Fitness.call: the scalar likelihood, and its value and gradient


def _ledger() -> str:
    beside = Path(sys.executable).with_name("ledger")  # the venv's console script
    found = str(beside) if beside.exists() else shutil.which("ledger")
    assert found, "no `ledger` command beside this Python or on PATH: install the ledger's wheel"
    return found


def _record(tmp: Path, run: str, cache: Path) -> tuple[dict, list[dict]]:
    """Run the program under `ledger record` in a directory of its own (autofit keeps
    a finished search's output there and would not fit again); its oracle and its rows."""
    workdir = tmp / run
    workdir.mkdir()
    oracle_path, db = workdir / "oracle.json", tmp / "ledger.db"
    env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=str(cache),
               # autolens's own switch: no plots (seconds of matplotlib a run, no compile the
               # ledger would not also see)
               PYAUTO_SKIP_VISUALIZATION="1")
    for name in ("LEDGER_DB", "JAX_ENABLE_X64", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"):
        env.pop(name, None)  # autolens's own defaults, whatever the caller's environment says
    # the oracle's path relative to the run's own dir: both runs are one command, one program
    cmd = [_ledger(), "record", "--db", str(db), "--tag", f"field-{run}", "--",
           sys.executable, str(PROGRAM), oracle_path.name]
    proc = subprocess.run(cmd, check=False, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{run}: exit {proc.returncode}\n{out[-4000:]}"
    assert oracle_path.exists(), f"{run}: the program wrote no oracle\n{out[-4000:]}"
    oracle = json.loads(oracle_path.read_text())
    oracle["ledger_lines"] = [line for line in out.splitlines() if line.startswith("ledger")]
    # what the ledger's own libraries said on the program's stdout, through the root logger
    # that autofit configures (INFO, to stdout): the program's output is to be its own
    oracle["foreign_stdout"] = [line for line in proc.stdout.splitlines() if FOREIGN_LOGGERS.search(line)]
    rows = []
    if db.exists():  # the ledger is made at the first recorded compile
        con = sqlite3.connect(db)
        con.row_factory = sqlite3.Row
        rows = [dict(r) for r in con.execute(
            "SELECT id, function, input_signature, cache_state, cache_not_persisted, compile_s, backend_compile_s,"
            " run_id"
            " FROM compile_records WHERE tag = ? ORDER BY id", (f"field-{run}",))]
        con.close()
    return oracle, rows


def _same_compiles(run: str, oracle: dict, rows: list[dict]) -> None:
    seen = oracle["compiles"]
    assert len(rows) == len(seen), (
        f"{run}: the ledger recorded {len(rows)} rows, the program's oracle saw {len(seen)} compiles "
        f"({len({c['function'] for c in seen})} functions); ledger said: {oracle['ledger_lines'] or 'nothing'}")
    assert Counter(r["function"] for r in rows) == Counter(c["function"] for c in seen)
    # each row's compile seconds are JAX's own backend_compile_duration, the event the oracle heard
    assert sorted((r["function"], round(r["backend_compile_s"], 6)) for r in rows) == \
        sorted((c["function"], round(c["seconds"], 6)) for c in seen)


TYPE = re.compile(r"[a-z]\w*(<\w+>)?\[[\d,?]*\]|![\w.]+")  # f64[3,4], complex<f64>[2], !stablehlo.token


def _types(signature: str | None) -> bool:
    """Whether a signature is `TYPE, ... -> TYPE, ...` (either side may be empty)."""
    if not signature:
        return False
    sides = signature.split(" -> ") if " -> " in signature else [signature.removeprefix("-> ")]
    return all(TYPE.fullmatch(t) for side in sides for t in side.split(", ") if t)


def _report(**runs) -> None:
    path = os.environ.get("LEDGER_FIELD_LEG_REPORT")
    if not path:
        return
    summary = {}
    for run, (oracle, rows) in runs.items():
        biggest = sorted(oracle["compiles"], key=lambda c: -c["seconds"])[:3]
        summary[run] = {
            "compiles": len(oracle["compiles"]),
            "functions": len({c["function"] for c in oracle["compiles"]}),
            "written": sum(c["written"] for c in oracle["compiles"]),
            "hits": oracle["events"].get("/jax/compilation_cache/cache_hits", 0),
            "biggest": [(c["function"], round(c["seconds"], 2)) for c in biggest],
            "seconds": round(oracle["seconds"], 1),
            "rows": len(rows),
            "states": dict(Counter(r["cache_state"] for r in rows)),
        }
    Path(path).write_text(json.dumps(summary, indent=1))


def test_record_a_pyautolens_fit_cold_then_warm(tmp_path):
    cache = tmp_path / "jax-cache"
    cold, cold_rows = _record(tmp_path, "cold", cache)
    warm, warm_rows = _record(tmp_path, "warm", cache)
    _report(cold=(cold, cold_rows), warm=(warm, warm_rows))

    # The program, by its own oracle: it compiled, the likelihood costliest; run 1 found an
    # empty cache, run 2 read back each entry run 1 wrote (the compiles over autolens's 1 s
    # threshold) and nothing else.
    assert cold["x64"] and cold["min_compile_time_secs"] == 1.0 and cold["cache_dir"] == str(cache)
    assert cold["compiles"] and max(cold["compiles"], key=lambda c: c["seconds"])["function"] == LIKELIHOOD
    assert Counter(c["function"] for c in cold["compiles"] if c["function"] == LIKELIHOOD)[LIKELIHOOD] >= 2
    assert not any(c["hit"] for c in cold["compiles"])
    written = Counter(c["function"] for c in cold["compiles"] if c["written"])
    assert written[LIKELIHOOD] >= 1
    assert Counter(c["function"] for c in warm["compiles"] if c["hit"]) == written

    # The ledger: one row per compile, the same functions and seconds, in each run.
    _same_compiles("run 1 (cold)", cold, cold_rows)
    _same_compiles("run 2 (warm)", warm, warm_rows)

    # Run 1: every row cold; persisted (cache_not_persisted NULL) exactly where JAX wrote.
    assert Counter(r["cache_state"] for r in cold_rows) == Counter(cold=len(cold_rows))
    assert Counter(r["function"] for r in cold_rows if r["cache_not_persisted"] is None) == written
    assert {r["cache_not_persisted"] for r in cold_rows} <= {None, "min_compile_time"}

    # Run 2: warm exactly where run 1 persisted, cold elsewhere.
    assert Counter(r["function"] for r in warm_rows if r["cache_state"] == "warm") == written
    assert {r["cache_state"] for r in warm_rows if r["cache_state"] != "warm"} <= {"cold"}

    # The likelihood's rows: in double precision (autolens turns x64 on through JAX_ENABLE_X64).
    likelihood = [r for r in cold_rows if r["function"] == LIKELIHOOD]
    assert max(cold_rows, key=lambda r: r["compile_s"])["function"] == LIKELIHOOD
    assert all(r["input_signature"] and r["input_signature"].startswith("f64[") for r in likelihood)

    # Every signature is types, complex ones included (`tensor<60x31xcomplex<f64>>`).
    odd = sorted({r["input_signature"] for r in cold_rows + warm_rows if not _types(r["input_signature"])})
    assert odd == [], odd[:5]

    # The program's stdout is its own, in both runs.
    assert cold["foreign_stdout"] == [] and warm["foreign_stdout"] == [], cold["foreign_stdout"][:5]

    _cache_dir_read_pruned_dry_and_checked(tmp_path, cache, cold, warm, warm_rows)
    _what_the_ledger_says(tmp_path, warm, warm_rows)


def _run_ledger(*args) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LEDGER_DB"}
    return subprocess.run([_ledger(), *map(str, args)], check=False, env=env, capture_output=True, text=True,
                          timeout=300)


def _hashes(root: Path) -> dict[str, str]:
    return {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(root.rglob("*")) if f.is_file()}


def _cache_dir_read_pruned_dry_and_checked(tmp_path: Path, cache: Path, cold: dict, warm: dict,
                                           warm_rows: list[dict]) -> None:
    db = tmp_path / "ledger.db"
    # what either run wrote: a compile near the 1 s threshold may cross it in run 2 on a busy host
    written = sum(c["written"] for c in cold["compiles"] + warm["compiles"])

    # the inventory: one entry per write, each one's JAX seconds read (a written compile took
    # over the 1 s threshold: JAX keeps int(seconds) >= 1), run 2's hits on them
    out = _run_ledger("cache", cache, "--json", "--db", db)
    assert out.returncode == 0, out.stderr
    inventory = json.loads(out.stdout)
    entries = inventory["entries"]
    assert len(entries) == written == len([f for f in cache.iterdir() if f.name.endswith("-cache")])
    assert sum(e["bytes"] for e in entries) == sum(f.stat().st_size for f in cache.iterdir()
                                                   if f.name.endswith("-cache"))
    assert [e["unread"] for e in entries if e["unread"]] == []
    assert all(isinstance(e["jax_compile_s"], int) and e["jax_compile_s"] >= 1 for e in entries), entries
    hits = sum(c["hit"] for c in warm["compiles"])
    assert sum(e["hits"] for e in entries) == hits == sum(r["cache_state"] == "warm" for r in warm_rows)
    # saved: by the one definition, or where run 1's cold rows were all on a loaded host (CI
    # runs this leg beside the suite) unknown, with what those rows give said apart
    assert sum(e["saved_s"] + e["saved_loaded_s"] for e in entries) > 0, entries

    # a dry-run prune of every entry: the plan, and nothing written, neither dir nor ledger
    before = _hashes(tmp_path)
    dry = _run_ledger("cache", "prune", cache, "--unused-days", "0", "--dry-run", "--db", db)
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()  # a line per entry, then the sum
    assert [line.startswith("would remove ") for line in lines] == [True] * (written + 1), lines
    assert lines[-1].startswith(f"would remove {written} entries, "), lines
    assert _hashes(tmp_path) == before

    # the compiles under the threshold, in run 2, every one paid again: below-threshold
    quick = [r for r in warm_rows if r["cache_state"] == "cold" and r["cache_not_persisted"] == "min_compile_time"]
    assert quick, "run 2 compiled nothing under autolens's 1 s threshold"
    checked = _run_ledger("check", "--below-threshold-s", "0", "--db", db)
    found = [line for line in checked.stdout.splitlines() if line.startswith("below-threshold ")]
    assert found and all("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0" in line for line in found), checked.stdout
    # one line for the root cause: the program's cells never written, and its newest run's count
    said = (f" (run {warm_rows[0]['run_id'][:12]}: {len(quick)} compiles): never written: every compile was under"
            " jax_persistent_cache_min_compile_time_secs = 1 s; ")
    assert len(found) == 1 and said in found[0] and "autolens_fit.py oracle.json`" in found[0], (said, found)


def _what_the_ledger_says(tmp_path: Path, warm: dict, warm_rows: list[dict]) -> None:
    """What a lens modeller reads after the two runs: the one root cause said once, by
    check and by explain; record's closing line of run 2 on what the cache kept; the
    program in the markdown report though its compiles are eager."""
    db = tmp_path / "ledger.db"
    threshold = "jax_persistent_cache_min_compile_time_secs"
    quick = [r for r in warm_rows if r["cache_state"] == "cold" and r["cache_not_persisted"] == "min_compile_time"]

    # record, run 2: what of its cold compiles the cache kept: nothing, all under the threshold
    # (unless one crossed it on a busy host, said as such)
    cold2 = [r for r in warm_rows if r["cache_state"] == "cold"]
    kept = sum(r["cache_not_persisted"] is None for r in cold2)
    closing = [line for line in warm["ledger_lines"] if "cold compiles were written to the cache" in line]
    assert closing and f"{kept} of {len(cold2)} cold compiles were written to the cache ({'all ' * (kept == 0)}" \
        f"{len(quick)} under {threshold} = 1 s;" in closing[-1], warm["ledger_lines"]

    # check: a few lines, the threshold the root cause of the program's cells, in one line
    checked = _run_ledger("check", "--db", db)
    lines = checked.stdout.splitlines()
    assert checked.returncode in (0, 1) and 0 < len(lines) <= 15, checked.stdout + checked.stderr
    rooted = [line for line in lines if "autolens_fit.py oracle.json" in line
              and f"never written: every compile was under {threshold} = 1 s" in line]
    assert len(rooted) == 1 and rooted[0].startswith(("below-threshold ", "cache-not-reused ")), lines

    # explain, of a cold row of run 2: the threshold
    explained = _run_ledger("explain", quick[0]["id"], "--db", db)
    assert explained.returncode == 0 and threshold in explained.stdout, explained.stdout + explained.stderr

    # the markdown report shows the program, its compiles all eager
    report = _run_ledger("report", "--db", db)
    assert report.returncode == 0 and "autolens_fit.py oracle.json" in report.stdout, report.stdout[-3000:]

    # and the HTML page: the program at a glance (found through revision 0020's index, its
    # seconds saved read by cell id), written whole, nothing on stderr
    page = tmp_path / "report.html"
    html = _run_ledger("report", "--html", page, "--db", db)
    assert (html.returncode, html.stderr) == (0, "") and html.stdout.startswith(f"wrote {page} ("), html.stderr
    glance = page.read_text().split('<section id="programs">', 1)[-1].split("</section>", 1)[0]
    assert "autolens_fit.py oracle.json" in glance and "<ol class=\"top\"><li>" in glance, glance[:3000]
