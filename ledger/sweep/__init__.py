"""`ledger sweep`: a grid of probe cells (spec.py), kept in a sweep directory
(store.py), run here (local.py) or as one SLURM job array (slurm.py), and followed up
from what the tasks left behind (status.py). The scheduler schedules; we write the
script and read the results."""
