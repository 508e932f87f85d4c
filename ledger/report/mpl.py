"""matplotlib as the HTML report draws with it: the Agg backend (no display is needed:
CI machines have none) and the few names ledger/report/html.py uses.

Importing it is a quarter of `ledger report --html` (about 0.6 s), so html.preload() starts
it on a thread as the command begins, while the report's queries run inside the database,
which releases the GIL (bench/bench_runs.py); the drawing imports it from here and waits
for that import, if it is still running, by Python's own module lock.
"""

import matplotlib

matplotlib.use("Agg")  # before anything draws

from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator

__all__ = ["AutoDateLocator", "ConciseDateFormatter", "Figure", "Line2D", "NullLocator"]
