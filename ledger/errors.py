"""The one user-facing error type, caught once at the CLI root."""


class LedgerError(Exception):
    """A problem the user can fix: printed as one line, non-zero exit, no traceback."""

    exit_code = 1
