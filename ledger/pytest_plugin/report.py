"""What the session says at its end, in pytest's terminal summary: the rows it kept
(or where they wait, and why), the pins it took, what `--ledger-check` judged, and the
budgets whose seconds could not be judged. Silence is never the answer: a session that
compiled nothing says so."""

from __future__ import annotations

NOTES_SHOWN = 10


def finish(plugin) -> list[str]:
    """Take the session's spool into the ledger (and pin, if asked): its lines."""
    from ledger.errors import LedgerError, first_line
    from ledger.recorder.ingester import drain

    run = plugin.run
    try:
        ing, display = drain(plugin.config.option.ledger_db, run.run_dir)
    except LedgerError as err:
        return [(f"ledger: the session's compiles are kept in {run.run_dir} ({first_line(str(err))}); the next"
                " ledger command that writes to this ledger takes them in")]
    lines = [_recorded(ing, display, run.run_id)]
    problems = ing.summary(display, run.run_id) if ing.held or ing.unrecorded or ing.invalid or ing.bad else ""
    if problems:
        lines.append(problems.replace("ledger record: ", "ledger: ", 1))
    if plugin.pin and not ing.held:
        lines.append(_pin(plugin))
    return lines


def _recorded(ing, display: str, run_id: str) -> str:
    if not ing.written:
        return f"ledger: no compile recorded: no test of this session compiled with JAX (session {run_id[:12]})"
    states = ", ".join(f"{n} {s}" for s, n in sorted(ing.states.items(), key=lambda x: str(x[0])))
    return f"ledger: {ing.written} compiles recorded into {display} ({states}), session {run_id}"


def _pin(plugin) -> str:
    from ledger.pytest_plugin.pins import pin_session
    from ledger.storage.open import open_ledger

    o = plugin.config.option
    with open_ledger(o.ledger_db, "write") as ledger:
        pinned = pin_session(ledger.engine, plugin.run.run_id, plugin.passed, plugin.run.git_commit,
                             bool(o.ledger_repin))
    return pinned.line(plugin.run.run_id)


def check_line(verdicts: dict) -> str:
    judged = verdicts["held"] + verdicts["grew"]
    if not judged:
        return (f"ledger check: no test judged: none of the {verdicts['unpinned']} tests has a pin"
                " (pytest --ledger-pin takes them)")
    text = f"ledger check: {judged} tests judged against their pins: {verdicts['grew']} grew"
    if verdicts["unpinned"]:
        text += f"; {verdicts['unpinned']} not pinned (pytest --ledger-pin pins them)"
    return text


def notes_lines(notes: list[str]) -> list[str]:
    out = [f"ledger: {n}" for n in notes[:NOTES_SHOWN]]
    if len(notes) > NOTES_SHOWN:
        out.append(f"ledger: and {len(notes) - NOTES_SHOWN} more budgets not judged on a loaded host")
    return out
