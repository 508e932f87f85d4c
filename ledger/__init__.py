"""jax-compile-ledger: per-transform JAX compile measurements in SQLite.

Keep this module import-light: `ledger --help` must not pull in jax (or even
SQLAlchemy) before a command needs it.
"""

DIST_NAME = "jax-compile-ledger"


def recording(db=None, tag=None, **cell):
    """Record every XLA compile inside a ``with`` block (ledger/recorder/boot.py)."""
    from ledger.recorder.boot import recording as _recording

    return _recording(db, tag, **cell)


def __getattr__(name: str):
    # The version is written once, in pyproject.toml; the installed distribution's
    # metadata carries it. Looked up on first use only (importlib.metadata is not free).
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version(DIST_NAME)
        except PackageNotFoundError:
            return "0+unknown (not installed: pip install .)"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
