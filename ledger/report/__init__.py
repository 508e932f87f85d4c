"""Presentation: the ledger per comparability key, as markdown (text.py), as one
self-contained HTML page with charts (html.py) or as a block of a README kept fresh
(readme_block.py), all from the same lines (lines.py).

The judging (pins, check, explain) is the watch's (ledger/watch); a report only
shows what the watch stored, and never ranks across keys.
"""
