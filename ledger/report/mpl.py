"""matplotlib as the HTML report draws with it: the Agg backend (no display is needed:
CI machines have none) and the few names ledger/report/html.py uses.

Importing it is a quarter of `ledger report --html` (about 0.6 s), so the report's drawing
process (html.drawing()) imports it as it starts, while the command opens the ledger and
runs its queries; the drawing functions import it from here where they run. Imported by
nothing at start-up: a command that draws nothing never loads matplotlib.
"""

import matplotlib

matplotlib.use("Agg")  # before anything draws
# A chart's words are a ledger's values (a function named f$1$ is no formula), and
# matplotlib's math parser, built at its first use, was a fifth of the report's drawing.
matplotlib.rcParams["text.parse_math"] = False
# Glyphs drawn without FreeType's hinting: the labels read the same at this size, and
# hinting each glyph was a fifth of drawing the bar chart.
matplotlib.rcParams["text.hinting"] = "no_hinting"

from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, NullLocator

# A log axis's decades as plain numbers (0.01, 1, 100): its default writes them as math.
PLAIN = FuncFormatter(lambda value, _: f"{value:g}")

__all__ = ["PLAIN", "AutoDateLocator", "ConciseDateFormatter", "Figure", "Line2D", "NullLocator"]
