"""matplotlib as the HTML report draws with it: the Agg backend (no display is needed:
CI machines have none) and the few names ledger/report/html.py uses.

Importing it is a quarter of `ledger report --html` (about 0.6 s), so the report's drawing
process (html.drawing()) imports it as it starts, while the command opens the ledger and
runs its queries; the drawing functions import it from here where they run. Imported by
nothing at start-up: a command that draws nothing never loads matplotlib.
"""

import matplotlib

matplotlib.use("Agg")  # before anything draws

from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator

__all__ = ["AutoDateLocator", "ConciseDateFormatter", "Figure", "Line2D", "NullLocator"]
