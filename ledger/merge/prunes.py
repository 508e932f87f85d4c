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
hits) integers from 0 to 2**63-1, its seconds finite and not negative, last_used and
pruned_at ISO 8601 times, and every column the table holds NOT NULL present; a
refused one stops the merge with one line naming the source and its id.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from ledger.merge import values as value
from ledger.merge.rows import checked, chunks
from ledger.record_validation import RecordError
from ledger.storage.models import cache_prunes

IDENTITY = ("hostname", "cache_dir", "cache_key", "entry", "pruned_at")
_CHECK = {"cache_dir": value.text, "cache_key": value.text, "entry": value.text, "bytes": value.count,
          "jax_compile_s": value.seconds, "hits": value.count, "saved_s": value.seconds, "last_used": value.time,
          "reason": value.text, "hostname": value.text, "pruned_at": value.time}
_REQUIRED = frozenset(c.name for c in cache_prunes.c if not c.nullable and not c.primary_key)
COLUMNS = ("id", *_CHECK)


@dataclass
class PruneMerge:
    added: int = 0
    present: int = 0


def checked_prune(raw: dict) -> dict:
    """The destination's row for a source prune (its id aside), or RecordError."""
    row = {}
    for name, check in _CHECK.items():
        if raw[name] is None and name in _REQUIRED:
            raise RecordError(f"{name} is missing")
        row[name] = None if raw[name] is None else check(name, raw[name])
    return row


def copy_prunes(src, dest, display: str) -> PruneMerge:
    out = PruneMerge()
    held = {tuple(r) for r in dest.execute(sa.text(f"SELECT {', '.join(IDENTITY)} FROM cache_prunes"))}
    for raws in chunks(src, display, "cache_prunes", COLUMNS):
        new = []
        for row in checked(raws, checked_prune, display, "cache prune"):
            identity = tuple(row[name] for name in IDENTITY)
            if identity in held:
                out.present += 1
                continue
            held.add(identity)
            new.append(row)
        if new:
            dest.execute(cache_prunes.insert(), new)
        out.added += len(new)
    return out
