"""The one user-facing error type, caught once at the CLI root."""


class LedgerError(Exception):
    """A problem the user can fix: printed as one line, non-zero exit, no traceback."""

    exit_code = 1


# What a terminal (or str.splitlines) takes for a line break, shown escaped instead.
_LINE_BREAKS = str.maketrans({c: repr(c)[1:-1] for c in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"})


def one_line(text: str) -> str:
    """`text` on one line: a line break inside it (a quoted SQL token, a file name)
    is written as its escape, so an error stays one line on stderr."""
    return text.translate(_LINE_BREAKS)


def first_line(exc: BaseException) -> str:
    """The driver's own message (SQLAlchemy wraps it in .orig), first line only: an
    error is reported on one line."""
    return str(getattr(exc, "orig", None) or exc).splitlines()[0]
