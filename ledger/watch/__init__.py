"""Watching the cache: sticky warm-compile pins, the check and its diagnosis (the
judging; ledger/report shows what it stored)."""
