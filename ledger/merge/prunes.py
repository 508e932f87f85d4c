"""A source's cache prunes (`ledger cache prune`, ledger/cache/prune.py), carried into the
destination, so that the merged ledger's explain, check and predict say a cold compile
was cold because its entry was pruned (ledger/watch/causes.py), as the node's own do.

A prune's identity is where, what and when: its hostname, cache_dir, cache_key, entry
and pruned_at (IDENTITY). The entry is in it because one prune can remove two files of
one key (``<key>`` as jax 0.4.30 names it and ``<key>-cache`` as later JAX does, in a dir
both wrote), each a row of its own. One whose identity the destination holds already is
not added again, so merging the same source twice adds nothing. The id is not carried:
the destination gives its own.

Every prune is checked before it is written: its text storable, its counts (bytes,
hits) integers from 0 to 2**63-1, its seconds finite and not negative (saved_s of either
sign: a cache read slower than its compile saved less than nothing, ledger/savings.py), last_used and
pruned_at ISO 8601 times, and every column the table holds NOT NULL present; a
refused one stops the merge with one line naming the source and its id.
"""

from __future__ import annotations

from ledger.merge import values as value
from ledger.merge.keyed import KeyedMerge, copy_keyed
from ledger.storage.models import cache_prunes

IDENTITY = ("hostname", "cache_dir", "cache_key", "entry", "pruned_at")
_CHECK = {"cache_dir": value.text, "cache_key": value.text, "entry": value.text, "bytes": value.count,
          "jax_compile_s": value.seconds, "hits": value.count, "saved_s": value.signed_seconds, "last_used": value.time,
          "reason": value.text, "hostname": value.text, "pruned_at": value.time}
COLUMNS = ("id", *_CHECK)
PruneMerge = KeyedMerge


def copy_prunes(src, dest, display: str) -> PruneMerge:
    return copy_keyed(src, dest, display, cache_prunes, _CHECK, IDENTITY, "cache prune")
