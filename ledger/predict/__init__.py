"""`ledger predict`: warm or cold before the compile is paid, and why.

probes/predict.py computes each transform's persistent-cache key without compiling and
looks for its entry; this package judges a cold one against the ledger's evidence
(causes), stores each prediction and scores it against the compile rows that come
later (store), and runs the two for a command (run).
"""
