"""`pytest --ledger`: every test's JAX compiles as rows, and compile budgets a suite holds.

plugin (the pytest hooks: options, phases, the session's summary; the pytest11 entry
point, so it loads in every pytest and costs an import of pytest's own names until
asked), session (the session's run: made once by the controller or the serial process,
joined by each pytest-xdist worker, drained into the ledger at the end), tally (each
process's compiles as the recorder spools them, per test and phase), after_jax (the
recorder starts once jax's own module has executed, never by importing it), budget
(`@pytest.mark.compile_budget`: judged over the test's call), pins (the compile counts
`--ledger-check` holds a test to, taken by `--ledger-pin`). The per-test diff is
ledger/report/diff_tests.py, shared with `ledger diff`.
"""
