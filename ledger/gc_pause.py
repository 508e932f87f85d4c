"""CPython's cyclic garbage collector, paused for bulk work that makes many objects and
few cycles: the check and the import.

The collector runs after every 700 new container objects (dicts, lists, tuples of
rows), and each run walks the young ones, each full run every live one. A daily
check at 1M rows (17,000 cells parsed, 35,000 rows read) spent 0.11-0.14 s of its
1.0-1.4 s there and freed 3 objects; an import of 100,000 records spent 0.19-0.25 s and
freed 433, all of them cycles made by importing modules. Reference counting frees
everything else as it always does: a pause delays only the freeing of cycles, to the
end of the block, where the collector is back as it was.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """No cyclic collection inside the block; afterwards, the collector as it was (a
    caller that had it off keeps it off), even when the block raises."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
