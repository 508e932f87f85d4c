"""The one user-facing error type, caught once at the CLI root."""


class LedgerError(Exception):
    """A problem the user can fix: printed as one line, non-zero exit, no traceback."""

    exit_code = 1


def first_line(exc: BaseException) -> str:
    """The driver's own message (SQLAlchemy wraps it in .orig), first line only: an
    error is reported on one line."""
    return str(getattr(exc, "orig", None) or exc).splitlines()[0]
