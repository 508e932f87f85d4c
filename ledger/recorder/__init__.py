"""`ledger record`: each XLA compile of a program nobody changed, as a compile row.

config (what a recorded process is told: its run's spool dir), launch (checks the
ledger, starts the ingester, execs the command with the recorder on its path),
ledger/recorder/site/sitecustomize.py (waits for jax to be imported), boot (starts a
recording: at that import, or `ledger.recording()` in-process), hook (the compile
path wrapped: one record per compile), spool (each process appends its records to its
own file as each compile returns), ingest (spooled records into the ledger: beside
the command, when a block ends, or by the next command that writes).
"""
