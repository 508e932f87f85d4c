"""`ledger record`'s command line, read without Typer: what the ledger costs before the
program starts is added to every recorded run, and Typer (with pydantic) is most of it.

Only the plain form is read here: the record options (RECORD_OPTIONS, held to the
Typer command's own by tests/test_record_entry.py), then the command. Anything else
(--help, an unknown or incomplete option, a value the record contract refuses, no
command) returns None, and the full command line goes through Typer, which says
what is wrong as for every other command.
"""

from __future__ import annotations

import sys

from ledger.record import CELL_LABELS

# option -> record_cmd's parameter (ledger/cli/record.py)
RECORD_OPTIONS = {"--db": "db", "--tag": "tag", "--dataset-class": "dataset_class",
                  "--model-type": "model_type", "--instrument": "instrument"}


def parse(args: list[str]) -> dict | None:
    """{"command": [...], option parameters...}, or None for Typer to read."""
    out: dict = dict.fromkeys(RECORD_OPTIONS.values())
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-"):
            break
        name, eq, value = arg.partition("=")
        if name not in RECORD_OPTIONS:
            return None
        if not eq:
            if i + 1 >= len(args):
                return None
            i, value = i + 1, args[i + 1]
        out[RECORD_OPTIONS[name]] = value
        i += 1
    out["command"] = args[i:]
    if not out["command"] or not _valid(out):
        return None
    return out


def _valid(parsed: dict) -> bool:
    from ledger.record_validation import RecordError, check_text_value

    try:
        for option, param in RECORD_OPTIONS.items():
            if param != "db" and parsed[param] is not None:
                check_text_value(option, parsed[param])
    except RecordError:
        return False  # Typer's callback says why, as for every command
    return True


def run(args: list[str]) -> bool:
    """Record as the command line says (does not return once the command runs); False
    when the command line is for Typer to read."""
    from ledger.errors import one_line
    from ledger.recorder.launch import exec_recorded
    from ledger.storage.errors import as_ledger_error

    parsed = parse(args)
    if parsed is None:
        return False
    try:
        status = exec_recorded(parsed["command"], parsed["db"], parsed["tag"],
                               {k: parsed[k] for k in CELL_LABELS})
    except KeyboardInterrupt:
        sys.exit(130)  # Ctrl-C before the command ran: nothing recorded, as a shell reports it
    except Exception as exc:
        error = as_ledger_error(exc)
        if error is None:
            raise
        print(f"error: {one_line(str(error))}", file=sys.stderr, flush=True)
        sys.exit(error.exit_code)
    sys.exit(status)
