"""`ledger check` and `ledger explain` on real temp databases."""

from __future__ import annotations

import json

import pytest

from .conftest import CORPUS, compile_records_of_corpus, query, run_cli
from .ledgers import add, rec

LATER = "2026-07-02T10:00:00"
KEY = "local_cpu/node1 jax 0.10.2 imaging/mge/hst jit (n_batch 1, batch_size 1)"
COMPONENTS = {"XLA flags": "f0", "jax_lib version": "j0", "compile_options": "o0", "computation": "c0"}


def pinned(db, tmp_path, **fields) -> int:
    (row,) = add(db, tmp_path, rec(**fields))
    assert run_cli("pins", "update", "--db", db).exit_code == 0
    return row


def test_a_10x_warm_row_is_a_regression(db, tmp_path):
    pin_row = pinned(db, tmp_path, compile_s=2.0)
    (slow,) = add(db, tmp_path, rec(compile_s=20.0, timestamp=LATER))
    result = run_cli("check", "--db", db)
    assert result.exit_code == 1
    assert result.output == (
        f"regression    {KEY}: row {slow} compile_s 20s vs pin 2s (pin 1) = 10.00x > 1.5x\n"
        "check run 1 (tolerance 1.5x): 0 ok, 1 regression, 0 inconclusive, 0 went-cold\n"
    )
    assert query(db, "SELECT check_run_id, pin_id, row_id, compile_s, pin_compile_s, ratio, tolerance, verdict"
                     " FROM verdicts") == [(1, 1, slow, 20.0, 2.0, 10.0, 1.5, "regression")]
    assert query(db, "SELECT id, tolerance, filters, exit_code FROM check_runs") == [(1, 1.5, "{}", 1)]
    assert pin_row != slow


def test_noise_within_the_tolerance_is_ok_and_stored(db, tmp_path):
    pinned(db, tmp_path, compile_s=2.0)
    (noisy,) = add(db, tmp_path, rec(compile_s=2.4, timestamp=LATER))
    result = run_cli("check", "--db", db)
    assert (result.exit_code, result.output) == (0, "check run 1 (tolerance 1.5x): 1 ok, 0 regression, 0 inconclusive, 0 went-cold\n")
    assert query(db, "SELECT row_id, round(ratio, 3), verdict, cause FROM verdicts") == [(noisy, 1.2, "ok", None)]
    tight = run_cli("check", "--tolerance", "1.1", "--db", db)
    assert tight.exit_code == 1 and tight.output.startswith("regression ")
    assert query(db, "SELECT id, tolerance, exit_code FROM check_runs") == [(1, 1.5, 0), (2, 1.1, 1)]


def test_ok_rows_are_one_verdict_per_pin_and_each_finding_its_own(db, tmp_path):
    pinned(db, tmp_path, compile_s=2.0)
    times = [f"2026-07-0{d}T10:00:00" for d in (2, 3, 4, 5)]
    ids = add(db, tmp_path, *(rec(compile_s=s, timestamp=t) for s, t in zip((2.2, 2.8, 2.1, 30.0), times)))
    result = run_cli("check", "--db", db)
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == (
        "check run 1 (tolerance 1.5x): 3 ok, 1 regression, 0 inconclusive, 0 went-cold")
    assert query(db, "SELECT verdict, n_rows, row_id, compile_s, round(ratio, 3) FROM verdicts ORDER BY id") == [
        ("ok", 3, ids[2], 2.8, 1.4), ("regression", 1, ids[3], 30.0, 15.0)]


def test_a_loaded_host_row_is_inconclusive_and_does_not_fail(db, tmp_path):
    pinned(db, tmp_path, compile_s=2.0)
    (busy,) = add(db, tmp_path, rec(compile_s=20.0, timestamp=LATER, host_load_avg_1m=12.5, host_cpu_count=8))
    result = run_cli("check", "--db", db)
    assert result.exit_code == 0
    assert result.output == (
        f"inconclusive  {KEY}: row {busy} compile_s 20s vs pin 2s (pin 1) = 10.00x, not judged:"
        " loaded host: 1-minute load 12.5 > 8 usable cores\n"
        "check run 1 (tolerance 1.5x): 0 ok, 0 regression, 1 inconclusive, 0 went-cold\n"
    )


def test_another_hosts_row_triggers_nothing(db, tmp_path):
    pinned(db, tmp_path, compile_s=2.0)
    add(db, tmp_path, rec(compile_s=20.0, timestamp=LATER, hostname="laptop"),
        rec(compile_s=20.0, timestamp=LATER, jax_version="0.10.3"),
        rec(compile_s=20.0, timestamp=LATER, transform="grad"))
    result = run_cli("check", "--db", db)
    assert (result.exit_code, result.output) == (0, "check run 1 (tolerance 1.5x): 0 ok, 0 regression, 0 inconclusive, 0 went-cold\n")
    assert query(db, "SELECT count(*) FROM verdicts") == [(0,)]


def test_rows_older_than_the_pin_are_not_judged(db, tmp_path):
    add(db, tmp_path, rec(compile_s=50.0, timestamp="2026-06-01T00:00:00"))
    pinned(db, tmp_path, compile_s=2.0)
    assert run_cli("check", "--db", db).exit_code == 0
    assert query(db, "SELECT count(*) FROM verdicts") == [(0,)]


def test_filters_and_since_narrow_the_check(db, tmp_path):
    pinned(db, tmp_path, compile_s=2.0)
    add(db, tmp_path, rec(compile_s=20.0, timestamp=LATER))
    add(db, tmp_path, rec(model_type="other", cache_state="cold"))  # a filter must match a row (test_row_filters)
    assert run_cli("check", "--model-type", "other", "--db", db).exit_code == 0
    assert run_cli("check", "--since", "2026-07-03", "--db", db).exit_code == 0
    assert run_cli("check", "--since", "2026-07-02", "--hostname", "node1", "--db", db).exit_code == 1
    assert query(db, "SELECT filters, exit_code FROM check_runs ORDER BY id")[-1] == (
        '{"hostname": "node1", "since": "2026-07-02"}', 1)


@pytest.mark.slow
def test_json_for_ci(db, tmp_path):
    pinned(db, tmp_path, compile_s=2.0)
    (slow,) = add(db, tmp_path, rec(compile_s=20.0, timestamp=LATER))
    result = run_cli("check", "--json", "--db", db)
    doc = json.loads(result.output)
    assert result.exit_code == 1
    assert doc["counts"] == {"ok": 0, "regression": 1, "inconclusive": 0, "went-cold": 0, "cache-off": 0,
                             "cache-not-reused": 0, "jax-changed": 0, "cache-not-written": 0, "evicted": 0,
                             "below-threshold": 0, "recompiled": 0}
    assert (doc["check_run_id"], doc["exit_code"], doc["tolerance"]) == (1, 1, 1.5)
    (finding,) = doc["findings"]
    assert {k: finding[k] for k in ("verdict", "row_id", "ratio", "hostname", "transform", "mixed_precision")} == {
        "verdict": "regression", "row_id": slow, "ratio": 10.0, "hostname": "node1", "transform": "jit",
        "mixed_precision": False}
    assert finding["fails"] is True


def test_usage_errors_exit_2(db, tmp_path):
    pinned(db, tmp_path)
    for args in (["--tolerance", "0.5"], ["--tolerance", "nan"], ["--tolerance", "x"], ["--since", "yesterday"]):
        result = run_cli("check", *args, "--db", db)
        assert result.exit_code == 2, (args, result.output)
    assert query(db, "SELECT count(*) FROM check_runs") == [(0,)]


def test_check_on_a_missing_database_creates_nothing(tmp_path):
    missing = tmp_path / "nope.db"
    assert run_cli("check", "--db", missing).output == f"error: no ledger database at {missing}\n"
    assert not missing.exists()


# -- went cold ---------------------------------------------------------------------------

def _cold_after_warm(db, tmp_path, warm=None, cold=None):
    warm_id, cold_id = add(db, tmp_path, rec(**(warm or {})),
                           rec(cache_state="cold", compile_s=60.0, timestamp=LATER, **(cold or {})))
    return warm_id, cold_id


def _evidence(components=COMPONENTS, fingerprint="p0", files_before=3, **changes):
    return {"cache_key_components": json.dumps({**components, **changes}), "program_fingerprint": fingerprint,
            "cache_files_before": files_before}


def test_went_cold_names_the_component_that_changed(db, tmp_path):
    warm, cold = _cold_after_warm(db, tmp_path, _evidence(), _evidence(**{"XLA flags": "f1"}))
    result = run_cli("check", "--db", db)
    assert result.exit_code == 1
    assert result.output == (
        f"went-cold     {KEY}, cache dir /tmp/jax-cache: row {cold} is cold: XLA flags (last warm row {warm})\n"
        "check run 1 (tolerance 1.5x): 0 ok, 0 regression, 0 inconclusive, 1 went-cold\n"
    )
    assert query(db, "SELECT pin_id, row_id, verdict, cause FROM verdicts") == [
        (None, cold, "went-cold", f"XLA flags (last warm row {warm})")]


def _went_cold_cells(db, tmp_path, n: int) -> tuple[list[int], list[int]]:
    """n cells warm, checked, then each compiled cold after its XLA flags changed; their rows."""
    warm = add(db, tmp_path, *[rec(hostname=f"h{i}", **_evidence()) for i in range(n)])
    assert run_cli("check", "--db", db).exit_code == 0
    cold = add(db, tmp_path, *[rec(hostname=f"h{i}", cache_state="cold", compile_s=60.0, timestamp=LATER,
                                   **_evidence(**{"XLA flags": "f1"})) for i in range(n)])
    return warm, cold


def _statements_of_a_check(db) -> int:
    """The statements a check of `db` sent to the database (the library's run_check)."""
    import sqlalchemy as sa

    from ledger.storage.open import open_ledger
    from ledger.watch.check import run_check

    sent = []
    with open_ledger(str(db), "write", create=False) as led:
        sa.event.listen(led.engine, "before_cursor_execute", lambda *args: sent.append(args[2]))
        run_check(led.engine)
    return len(sent)


def test_many_went_cold_cells_cost_the_check_the_queries_few_do(db, tmp_path):
    """Each went-cold cause compares its cold row with its warm row (whole rows) and the warm
    key's prunes: read for all of them together, not two queries each. A cache dir emptied
    under 2,000 warm cells read so: `ledger check` 3.1 s on SQLite, 5.2 s on PostgreSQL
    (0.8 s and 1.0-1.2 s together). Each finding still gets its own pair."""
    few, many = db, tmp_path / "many.db"
    sent = {}
    for ledger_db, n in ((few, 3), (many, 12)):
        warm, cold = _went_cold_cells(ledger_db, tmp_path, n)
        sent[n] = _statements_of_a_check(ledger_db)
        assert query(ledger_db, "SELECT row_id, cause FROM verdicts WHERE check_run_id = 2 ORDER BY row_id") == [
            (c, f"XLA flags (last warm row {w})") for w, c in zip(warm, cold, strict=True)]
    assert sent[12] == sent[3]


def test_many_cells_never_reused_cost_the_check_the_queries_few_do(db, tmp_path):
    """Each cell compiled cold by two runs into one dir, never warm: a cache-not-reused
    streak, whose cause compares the pair of cold rows. Read for all streaks together: 2,000
    cells' check took 1.43 s read a pair at a time, 0.96 s together (SQLite)."""
    few, many = db, tmp_path / "many.db"
    sent = {}
    for ledger_db, n in ((few, 3), (many, 12)):
        for run, day in (("r1", "2026-07-01"), ("r2", "2026-07-02")):
            add(ledger_db, tmp_path, *[rec(hostname=f"h{i}", cache_state="cold", run_id=run,
                                           timestamp=f"{day}T10:00:00", **_evidence(files_before=0))
                                       for i in range(n)])
            if run == "r1":
                assert run_cli("check", "--db", ledger_db).exit_code == 0
        sent[n] = _statements_of_a_check(ledger_db)
        causes = query(ledger_db, "SELECT verdict, cause FROM verdicts WHERE check_run_id = 2")
        assert len(causes) == n and {v for v, _ in causes} == {"cache-not-reused"}, causes
    assert sent[12] == sent[3]


@pytest.mark.parametrize(("seconds", "text"), [(9.514, "9.51"), (6000.0, "6000"), (123456.7, "123457"),
                                              (0.00412, "0.00412"), (0.0000153, "0.0000153"), (0.0, "0")])
def test_seconds_are_three_digits_never_an_exponent(seconds, text):
    """A root cause's cost, a threshold's span, a recorded run's tally: 2,000 went-cold cells
    cost "6e+03 s a run" as ':.3g' wrote it."""
    from ledger.output import three_digits

    assert three_digits(seconds) == text


def test_went_cold_links_the_pin_of_its_key(db, tmp_path):
    pinned(db, tmp_path, compile_s=2.0, **_evidence())
    add(db, tmp_path, rec(cache_state="cold", compile_s=60.0, timestamp=LATER, **_evidence(**{"jax_lib version": "j1"})))
    assert run_cli("check", "--db", db).exit_code == 1
    assert query(db, "SELECT pin_id, pin_compile_s, ratio, cause LIKE 'jax_lib version (%' FROM verdicts") == [
        (1, 2.0, 30.0, 1)]


def test_computation_same_program_different_hash(db, tmp_path):
    _cold_after_warm(db, tmp_path, _evidence(), _evidence(computation="c1"))
    run_cli("check", "--db", db)
    assert query(db, "SELECT cause FROM verdicts")[0][0].startswith(
        "computation (same program, different hash) (last warm row ")


def test_computation_program_changed(db, tmp_path):
    _cold_after_warm(db, tmp_path, _evidence(), _evidence(computation="c1", fingerprint="p1"))
    run_cli("check", "--db", db)
    assert query(db, "SELECT cause FROM verdicts")[0][0].startswith("computation (program changed) (last warm row ")


def test_an_emptied_cache_dir_is_a_cause(db, tmp_path):
    _cold_after_warm(db, tmp_path, _evidence(), _evidence(files_before=0))
    run_cli("check", "--db", db)
    assert query(db, "SELECT cause FROM verdicts")[0][0].startswith("cache dir was empty before the compile (last")


def test_a_cell_that_is_warm_again_or_was_never_warm_is_not_went_cold(db, tmp_path):
    add(db, tmp_path, rec(cache_state="cold", timestamp="2026-06-01T00:00:00"), rec(),  # cold then warm
        rec(cache_state="cold", transform="grad"),  # only ever cold: the first compile
        rec(transform="vag"), rec(transform="vag", cache_state="cold", cache_dir="/other", timestamp=LATER))
    assert run_cli("check", "--db", db).output.endswith("0 went-cold\n")


def test_a_legacy_cold_row_after_a_warm_one_has_cause_unknown(db, tmp_path):
    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    warm = next(r for r in compile_records_of_corpus() if r["tag"] == "prodigy-census-warm" and r["transform"] == "jit")
    # a legacy record: no cache_state, no evidence; the backfill reads "cold" from its tag
    (cold,) = add(db, tmp_path, {**warm, "tag": "prodigy-census-cold", "timestamp": "2026-08-01T00:00:00"})
    assert query(db, "SELECT cache_state, cache_state_source FROM compile_records WHERE id = ?", (cold,)) == [("cold", "tag")]
    result = run_cli("explain", cold, "--db", db)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"row {cold}: cold, compile_s {warm['compile_s']:.4g}, tag prodigy-census-cold, 2026-08-01T00:00:00"
    assert lines[2].startswith("last warm row before it: row ") and lines[3:] == ["cause: cause unknown"]
    check = run_cli("check", "--db", db)
    assert check.exit_code == 1
    assert check.output.splitlines()[0].startswith(f"went-cold     local_cpu/{warm['hostname']} jax 0.10.2 imaging/")
    assert f"row {cold} is cold: cause unknown (last warm row " in check.output


def test_explain_names_the_warm_row_and_the_values(db, tmp_path):
    warm, cold = _cold_after_warm(db, tmp_path, {**_evidence(), "xla_flags": ""},
                                  {**_evidence(**{"XLA flags": "f1"}), "xla_flags": "--xla_cpu_enable_fast_math=false"})
    result = run_cli("explain", cold, "--db", db)
    assert result.exit_code == 0
    assert result.output == (
        f"row {cold}: cold, compile_s 60, tag t, {LATER}\n"
        f"cell: {KEY}, cache dir /tmp/jax-cache\n"
        f"last warm row before it: row {warm}, compile_s 2, tag t, 2026-07-01T10:00:00\n"
        "cause: XLA flags\n"
        "  xla_flags: (none) -> --xla_cpu_enable_fast_math=false\n"
    )
    before = db.read_bytes()
    assert run_cli("explain", cold, "--db", db).exit_code == 0 and db.read_bytes() == before


def test_explain_refuses_a_warm_row_and_a_missing_id(db, tmp_path):
    warm, _ = _cold_after_warm(db, tmp_path)
    assert run_cli("explain", warm, "--db", db).output == (
        f"error: row {warm} is warm, not cold or none: explain diagnoses cold rows and rows without a cache dir\n")
    assert run_cli("explain", warm, "--db", db).exit_code == 1
    missing = run_cli("explain", 999, "--db", db)
    assert (missing.exit_code, missing.output) == (1, "error: no compile row with id 999\n")
    assert run_cli("explain", "x", "--db", db).exit_code == 2


def test_explain_a_first_cold_compile(db, tmp_path):
    (cold,) = add(db, tmp_path, rec(cache_state="cold"))
    assert run_cli("explain", cold, "--db", db).output.splitlines()[-1].startswith("no earlier warm row of this cell")


# -- the threshold from each key's own history, and the absolute floor --------------------

def _history(db, tmp_path, values, **fields) -> None:
    """Warm rows of one key, a day apart, then the pin (from the newest)."""
    add(db, tmp_path, *(rec(compile_s=v, timestamp=f"2026-06-{i + 1:02d}T10:00:00", **fields)
                             for i, v in enumerate(values)))
    assert run_cli("pins", "update", "--db", db).exit_code == 0


TIGHT = [2.00, 2.01, 1.99, 2.005, 1.995, 2.01, 2.00, 1.99]  # a quiet node: within 1%
NOISY = [2.0, 2.8, 2.2, 2.6, 1.9, 2.7, 2.4, 2.1]  # a shared node: 40% spread


def test_a_tight_key_flags_a_slowdown_well_under_1_5x(any_db, tmp_path):
    _history(any_db, tmp_path, TIGHT)
    (n, med, mad, thr), = query(any_db, "SELECT history_n, history_median_s, history_mad_s, threshold_s FROM pins")
    assert (n, round(med, 4), round(mad, 4), round(thr, 4)) == (8, 2.0, 0.0075, round(2.0 + 5 * 1.4826 * 0.0075, 4))
    inside, slow = add(any_db, tmp_path, rec(compile_s=2.03, timestamp=LATER),
                            rec(compile_s=2.8, timestamp="2026-07-03T10:00:00"))  # 1.41x: passes a 1.5x tolerance
    check = run_cli("check", "--db", any_db)
    assert check.exit_code == 1
    assert check.output.splitlines()[0] == (
        f"regression    {KEY}: row {slow} compile_s 2.8s > history rule: threshold {thr:.4g}s = median 2s"
        f" + 5 x 1.4826 x MAD 0.0075s, n 8; pin 1.99s (pin 1)")
    assert query(any_db, "SELECT verdict, row_id, rule, threshold_s FROM verdicts ORDER BY id") == [
        ("ok", inside, "history", pytest.approx(thr)), ("regression", slow, "history", pytest.approx(thr))]


@pytest.mark.slow
def test_a_noisy_key_passes_its_own_spread_and_flags_far_outside_it(any_db, tmp_path):
    _history(any_db, tmp_path, NOISY)
    (thr,), = query(any_db, "SELECT threshold_s FROM pins")
    assert 4.0 < thr < 5.0  # median 2.3 + 5 x 1.4826 x MAD 0.3
    (noisy,) = add(any_db, tmp_path, rec(compile_s=3.3, timestamp=LATER))  # 1.57x the 2.1 s pin
    check = run_cli("check", "--db", any_db)
    assert (check.exit_code, check.output.splitlines()[-1]) == (
        0, "check run 1 (tolerance 1.5x): 1 ok, 0 regression, 0 inconclusive, 0 went-cold")
    assert run_cli("check", "--tolerance", "1.5", "--db", any_db).exit_code == 0  # the history still judges
    (far,) = add(any_db, tmp_path, rec(compile_s=9.0, timestamp="2026-07-03T10:00:00"))
    check = run_cli("check", "--db", any_db)
    assert check.exit_code == 1 and check.output.startswith(f"regression    {KEY}: row {far} compile_s 9s > history")
    assert noisy < far


@pytest.mark.slow
def test_below_six_warm_rows_the_fixed_tolerance_judges(any_db, tmp_path):
    _history(any_db, tmp_path, TIGHT[:5])
    assert query(any_db, "SELECT history_n, threshold_s FROM pins") == [(5, None)]
    (slow,) = add(any_db, tmp_path, rec(compile_s=2.8, timestamp=LATER))
    assert run_cli("check", "--db", any_db).exit_code == 0  # 1.41x < 1.5x
    (slower,) = add(any_db, tmp_path, rec(compile_s=3.2, timestamp="2026-07-03T10:00:00"))
    check = run_cli("check", "--db", any_db)
    assert check.output.splitlines()[0] == (
        f"regression    {KEY}: row {slower} compile_s 3.2s vs pin 1.995s (pin 1) = 1.60x > 1.5x")
    assert query(any_db, "SELECT rule FROM verdicts WHERE verdict = 'regression'") == [("tolerance",)]
    assert slow < slower


def test_loaded_rows_never_enter_a_keys_history_and_stay_inconclusive(any_db, tmp_path):
    busy = {"host_load_avg_1m": 12.0, "host_cpu_count": 8}
    add(any_db, tmp_path, *(rec(compile_s=9.0, timestamp=f"2026-05-{d:02d}T10:00:00", **busy) for d in (1, 2, 3)))
    _history(any_db, tmp_path, TIGHT)
    assert query(any_db, "SELECT history_n, history_median_s FROM pins") == [(8, pytest.approx(2.0))]
    (loaded,) = add(any_db, tmp_path, rec(compile_s=9.0, timestamp=LATER, **busy))
    check = run_cli("check", "--db", any_db)
    assert check.exit_code == 0 and check.output.startswith(f"inconclusive  {KEY}: row {loaded} ")


def test_a_millisecond_compile_is_not_judged_by_its_ratio_alone(any_db, tmp_path):
    pin = rec(compile_s=0.004)
    add(any_db, tmp_path, pin)
    assert run_cli("pins", "update", "--db", any_db).exit_code == 0
    (busy,) = add(any_db, tmp_path, rec(compile_s=0.0123, timestamp=LATER))  # 3.07x, 8 ms slower
    check = run_cli("check", "--db", any_db)
    assert (check.exit_code, check.output) == (
        0, "check run 1 (tolerance 1.5x): 1 ok, 0 regression, 0 inconclusive, 0 went-cold\n")
    strict = run_cli("check", "--min-diff", "0", "--db", any_db)
    assert (strict.exit_code, strict.output.splitlines()[0]) == (
        1, f"regression    {KEY}: row {busy} compile_s 0.0123s vs pin 0.004s (pin 1) = 3.08x > 1.5x")
    assert query(any_db, "SELECT min_diff_s FROM check_runs ORDER BY id") == [(0.05,), (0.0,)]
    for bad in ("-1", "nan", "x"):
        assert run_cli("check", "--min-diff", bad, "--db", any_db).exit_code == 2


# -- the cache findings on imported rows: --since, --json ------------------------------------

def test_cache_off_respects_since_and_json_says_what_fails(db, tmp_path):
    warm, off = add(db, tmp_path, rec(), rec(cache_state="none", cache_dir="", compile_s=9.0, timestamp=LATER))
    # cold runs never written by design: reported, and --json says it does not fail
    add(db, tmp_path, *(rec(transform="grad", cache_state="cold", compile_s=0.5, timestamp=t, cache_files_before=0,
                            cache_files_after=0, cache_min_compile_time_s=1.0, cache_requests=1, cache_misses=0)
                        for t in ("2026-07-03T10:00:00", "2026-07-04T10:00:00")))
    doc = json.loads(run_cli("check", "--json", "--db", db).output)
    assert doc["exit_code"] == 1 and doc["min_diff_s"] == 0.05
    assert [(f["verdict"], f["fails"]) for f in doc["findings"]] == [("cache-off", True), ("cache-not-reused", False)]
    assert doc["findings"][0]["row_id"] == off and f"(last warm row {warm})" in doc["findings"][0]["cause"]
    assert "every compile (0.5 s) was under jax_persistent_cache_min_compile_time_secs 1" in doc["findings"][1]["cause"]
    later = run_cli("check", "--since", "2026-07-03", "--db", db)  # the cache went off before that
    assert (later.exit_code, later.output.splitlines()[-1]) == (
        0, "check run 2 (tolerance 1.5x): 0 ok, 0 regression, 0 inconclusive, 0 went-cold, 1 cache-not-reused")


def test_a_new_finding_kind_is_one_kind_and_one_pass(db, tmp_path, monkeypatch):
    """docs/layout.md's recipe for a new finding kind, followed: its Kind in
    ledger/watch/kinds.py, its pass in judge.PASSES and its cause's words in causes.WORDS.
    check counts and lists it, fails on it, gives it in --json, and the report ranks it by
    its severity."""
    from ledger.watch import causes, judge, kinds

    def throwaway_pass(rows, ev):
        newest = rows[-1]
        return [judge.Finding("throwaway", newest["id"], causes.Cause("throwaway", {"tag": tag}), True)
                for tag in [ev.rows(newest["id"])[0]["tag"]] if tag == "mark-me"]

    line = kinds.Kind("throwaway", 9, True, True, False, lambda f, head: f"{head}: row {f['row_id']}: {f['cause']}")
    monkeypatch.setitem(kinds.KINDS, "throwaway", line)
    monkeypatch.setitem(causes.WORDS, "throwaway", lambda f: f"tag {f['tag']}")
    monkeypatch.setattr(judge, "PASSES", [*judge.PASSES, throwaway_pass])
    (row,) = add(db, tmp_path, rec(cache_state="cold", tag="mark-me", cache_dir="/c"))
    result = run_cli("check", "--db", db)
    assert (result.exit_code, result.output) == (1, (
        f"throwaway     {KEY}: row {row}: tag mark-me\n"
        "check run 1 (tolerance 1.5x): 0 ok, 0 regression, 0 inconclusive, 0 went-cold, 1 throwaway\n"))
    assert json.loads(run_cli("check", "--json", "--db", db).output)["counts"]["throwaway"] == 1
    assert "| - | throwaway | mark-me |" in run_cli("report", "--db", db).output  # the key's verdict


@pytest.mark.slow
def test_the_compiles_of_one_run_are_one_run_for_check_and_explain(db, tmp_path):
    """check counted compiles as runs: a run that compiled a cell twice read "2 cold runs"
    and was a cache-not-reused. A run is its run id (and phase); check and explain agree."""
    cold = {"transform": "grad", "cache_state": "cold", "compile_s": 2.0, "cache_dir": "/c"}
    _, second = add(db, tmp_path, rec(**cold, run_id="run-a", timestamp="2026-07-03T10:00:00"),
                    rec(**cold, run_id="run-a", timestamp="2026-07-03T10:00:01"))
    one = run_cli("check", "--db", db)
    summary = "check run 1 (tolerance 1.5x): 0 ok, 0 regression, 0 inconclusive, 0 went-cold\n"
    assert (one.exit_code, one.output) == (0, summary)
    assert "cache-not-reused" not in run_cli("explain", str(second), "--db", db).output
    (later,) = add(db, tmp_path, rec(**cold, run_id="run-b", timestamp="2026-07-04T10:00:00"))
    said = "2 cold runs in /c, never warm: cause unknown (the rows show no missing entry)"
    two = run_cli("check", "--db", db)
    assert (two.exit_code, two.output.splitlines()[0]) == (
        0, f"cache-not-reused {KEY.replace(' jit', ' grad')}: row {later}: {said} [does not fail]")
    assert f"cause: cache-not-reused: {said}" in run_cli("explain", str(later), "--db", db).output
