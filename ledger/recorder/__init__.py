"""`ledger record`: each XLA compile of a program nobody changed, as a compile row.

config (what a recorded process is told), launch (the command, exec'd with the
recorder on its path), ledger/recorder/site/sitecustomize.py (waits for jax to be imported), boot
(starts a recording: at that import, or `ledger.recording()` in-process), hook (the
compile path wrapped: one record per compile), sink (the writer thread).
"""
