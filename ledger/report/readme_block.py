"""The report as a block of a README: rewrite it (`--update`) or check it (`--check`).

The block sits between two HTML comments, which markdown renders as nothing. Its text
holds no current time, so the same ledger always gives the same block and `--check`
in CI fails only when the ledger moved and the README did not.
"""

from __future__ import annotations

from pathlib import Path

from ledger.errors import LedgerError

START = "<!-- ledger-report:start -->"
END = "<!-- ledger-report:end -->"


def _span(text: str, name: str) -> tuple[int, int]:
    """Where the block's content starts and ends in `text`."""
    start = text.find(START)
    end = text.find(END, start + len(START)) if start >= 0 else -1
    if start < 0 or end < 0:
        raise LedgerError(f"{name} has no {START} ... {END} markers: add them where the report goes")
    if text.find(START, start + len(START)) >= 0 and text.find(START, start + len(START)) < end:
        raise LedgerError(f"{name} has two {START} markers before {END}")
    return start + len(START), end


def render(text: str, report: str, name: str = "the file") -> str:
    """`text` with the block between the markers replaced by `report`."""
    a, b = _span(text, name)
    return text[:a] + "\n" + report.rstrip("\n") + "\n" + text[b:]


def read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LedgerError(f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LedgerError(f"cannot read {path}: {exc}") from None


def update(path: Path, report: str, check: bool = False) -> bool:
    """Bring the block in `path` up to date; with `check`, write nothing. Returns
    whether the block was stale (was, or would have been, rewritten)."""
    from ledger.files import atomic_write

    text = read(path)
    new = render(text, report, str(path))
    stale = new != text
    if stale and not check:
        atomic_write(path, new)
    return stale
