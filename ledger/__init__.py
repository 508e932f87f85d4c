"""jax-compile-ledger: per-transform JAX compile measurements in SQLite.

Keep this module import-light: `ledger --help` must not pull in jax (or even
SQLAlchemy) before a command needs it.
"""

__version__ = "0.1.0"
