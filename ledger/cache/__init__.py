"""`ledger cache`: what a JAX persistent-cache dir holds (entries), and what the ledger
knows of each (inventory). Read-only: nothing here writes to the dir or the ledger."""
