"""`ledger merge`: per-node ledgers into one, idempotent, sources never changed, pins by
their sticky rule, conflicts reported, all or nothing. The destination is a SQLite
file and a PostgreSQL database (`any_db`)."""

from __future__ import annotations

import hashlib
import sqlite3

from ledger.storage.revisions import HEAD
from .conftest import (CORPUS, CORPUS_COMPILE, CORPUS_SIBLINGS, CORPUS_STATES, compile_records_of_corpus, db_at,
                       insert_legacy, query, run_cli, write_json)

CPU, GPU = CORPUS / "local_cpu", CORPUS / "local_gpu_NVIDIA_A100_80GB_PCIe"
STATES_SQL = "SELECT cache_state, count(*) FROM compile_records GROUP BY cache_state ORDER BY cache_state"
COUNTS_SQL = "SELECT (SELECT count(*) FROM compile_records), (SELECT count(*) FROM instrument_records)"


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _node(path, *trees, pin=True):
    """A per-node ledger: some of the corpus, pinned."""
    for tree in trees:
        assert run_cli("import", tree, "--db", path).exit_code == 0
    if pin:
        assert run_cli("pins", "update", "--db", path).exit_code == 0
    return path


def test_two_nodes_merged_twice_give_their_union_once(any_db, tmp_path):
    a = _node(tmp_path / "a.db", CPU)
    b = _node(tmp_path / "b.db", *(p for p in CORPUS.iterdir() if p.name != "local_cpu"))
    before = _sha(a), _sha(b)
    first = run_cli("merge", a, b, "--db", any_db)
    assert first.exit_code == 0, first.output
    assert query(any_db, COUNTS_SQL) == [(CORPUS_COMPILE, CORPUS_SIBLINGS)]
    assert dict(query(any_db, STATES_SQL)) == CORPUS_STATES
    again = run_cli("merge", a, b, "--db", any_db)
    assert again.exit_code == 0
    assert again.output.splitlines()[-1] == f"2 ledgers merged into {any_db}: 0 compile rows added"
    assert query(any_db, COUNTS_SQL) == [(CORPUS_COMPILE, CORPUS_SIBLINGS)]
    assert (_sha(a), _sha(b)) == before


def test_merged_pins_are_the_pins_of_the_whole(any_db, tmp_path):
    """Pinning each node and merging gives the pins that pinning the union gives."""
    a = _node(tmp_path / "a.db", CPU)
    b = _node(tmp_path / "b.db", *(p for p in CORPUS.iterdir() if p.name != "local_cpu"))
    assert run_cli("merge", a, b, "--db", any_db).exit_code == 0
    whole = _node(tmp_path / "whole.db", CORPUS)
    pins_sql = "SELECT pin_key, compile_s, tag, timestamp FROM pins ORDER BY pin_key"
    assert query(any_db, pins_sql) == query(whole, pins_sql) and len(query(whole, pins_sql)) == 25
    # each merged pin points at the same measurement, under the destination's row id
    moved = query(any_db, "SELECT count(*) FROM pins p JOIN compile_records r ON r.id = p.row_id"
                          " WHERE r.compile_s = p.compile_s AND r.tag = p.tag AND r.cache_state = 'warm'")
    assert moved == [(25,)]
    assert query(any_db, "SELECT action, count(*) FROM pin_history GROUP BY action") == [("merge", 25)]
    assert query(any_db, "SELECT count(*) FROM verdicts") == [(0,)]


def test_a_key_pinned_on_both_sides_keeps_this_ledgers_pin_and_says_so(tmp_path, db):
    (rec,) = [r for r in compile_records_of_corpus() if r["tag"] == "cache-warm"]
    here = _node(db, write_json(tmp_path / "here.json", [rec]))
    later = dict(rec, compile_s=rec["compile_s"] * 3, timestamp="2026-09-01T00:00:00")
    there = _node(tmp_path / "there.db", write_json(tmp_path / "there.json", [later]))
    result = run_cli("merge", there, "--db", here)
    assert result.exit_code == 0
    (conflict,) = [line for line in result.output.splitlines() if "conflict" in line]
    assert conflict.startswith("  conflict: pin local_cpu/") and conflict.endswith(
        f": {later['compile_s']:.4g}s in the source, {rec['compile_s']:.4g}s here"
        " (kept; `ledger pins update --repin` moves it)")
    assert query(here, "SELECT compile_s FROM pins") == [(rec["compile_s"],)]
    assert query(here, "SELECT count(*) FROM compile_records") == [(2,)]


def test_the_same_row_with_another_cache_state_is_a_conflict(tmp_path, db):
    (rec,) = [r for r in compile_records_of_corpus() if r["tag"] == "cache-warm"]
    _node(db, write_json(tmp_path / "here.json", [rec]), pin=False)
    there = _node(tmp_path / "there.db", write_json(tmp_path / "there.json", [dict(rec, cache_state="unknown")]),
                  pin=False)
    result = run_cli("merge", there, "--db", db)
    assert result.exit_code == 0
    assert f"  conflict: row vag 'cache-warm' {rec['timestamp']}: cache_state unknown in the source, warm here (kept)" \
        in result.output.splitlines()
    assert query(db, "SELECT cache_state FROM compile_records") == [("warm",)]


def test_an_older_source_is_upgraded_in_a_copy_and_left_byte_identical(tmp_path, db):
    old = db_at(tmp_path / "old.db", "0001")
    insert_legacy(old, compile_records_of_corpus())
    before = _sha(old)
    result = run_cli("merge", old, "--db", db)
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"merged {old} (at 0001: merged from a copy brought to {HEAD}): "
                                    f"{CORPUS_COMPILE} compile rows added")
    assert _sha(old) == before and query(old, "SELECT version_num FROM alembic_version") == [("0001",)]
    assert dict(query(db, STATES_SQL)) == CORPUS_STATES  # backfilled in the copy
    # the same rows imported from their files are the same identities: nothing more
    assert run_cli("import", CORPUS, "--db", db).output.strip().endswith(
        f"0 compile rows added (cold 0, warm 0, none 0, unknown 0), {CORPUS_SIBLINGS} instrument records added,"
        f" {CORPUS_COMPILE} already present")


def test_refusals_are_one_line_and_write_nothing(tmp_path, db):
    good = _node(tmp_path / "good.db", CPU)
    newer = _node(tmp_path / "newer.db", GPU)
    con = sqlite3.connect(newer)
    with con:
        con.execute("UPDATE alembic_version SET version_num = '9999'")
    con.close()
    (tmp_path / "junk.db").write_bytes(b"not a database at all, not even close" * 10)
    cases = {
        str(newer): f"{newer} is at revision 9999, which this ledger does not know",
        str(tmp_path / "missing.db"): f"no ledger database at {tmp_path / 'missing.db'}",
        str(tmp_path / "junk.db"): f"cannot read {tmp_path / 'junk.db'}: file is not a database",
    }
    for bad, message in cases.items():
        result = run_cli("merge", good, bad, "--db", db)  # the good one first: all or nothing
        assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
        assert message in result.output
        assert not db.exists() or query(db, "SELECT count(*) FROM compile_records") == [(0,)]
    itself = run_cli("merge", good, "--db", good)
    assert (itself.exit_code, itself.output) == (1, f"error: {good} is the destination: a ledger is not merged into itself\n")


def test_the_installed_command_merges(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    a = _node(tmp_path / "a.db", CPU)
    out = subprocess.run([Path(sys.executable).with_name("ledger"), "merge", a, "--db", tmp_path / "all.db"],
                         capture_output=True, text=True)
    assert out.returncode == 0 and out.stderr == ""
    assert out.stdout.splitlines()[-1] == f"1 ledgers merged into {tmp_path / 'all.db'}: 78 compile rows added"


def test_a_server_ledger_merges_into_a_file(any_db, tmp_path):
    """A node that wrote to a server (or a file) gathered into a laptop's file."""
    _node(any_db, CORPUS)
    here = tmp_path / "laptop.db"
    result = run_cli("merge", any_db, "--db", here)
    assert result.exit_code == 0, result.output
    assert query(here, COUNTS_SQL) == [(CORPUS_COMPILE, CORPUS_SIBLINGS)]
    assert query(here, "SELECT count(*) FROM pins") == [(25,)]
