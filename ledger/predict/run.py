"""One prediction run: the keys from ledger.probes/predict.py, judged against the ledger,
stored, and shaped for the command's lines or --json."""

from __future__ import annotations

from dataclasses import dataclass, field

from ledger.errors import LedgerError
from ledger.predict import causes as cz
from ledger.predict import store

COLD, WARM = "cold", "warm"
# Seconds the key child may take: building the objective and tracing each transform.
# A large model's tracing fits in it; a builder that never returns is stopped by it.
DEFAULT_TIMEOUT_S = 600.0
JSON_FIELDS = ("transform", "predicted", "cause", "cache_key", "expected_compile_s", "expected_n",
               "entry", "cache_dir", "details", "prediction_id")


class UsageError(LedgerError):
    """A usage error, or a JAX that cannot be predicted on: exit 2."""

    exit_code = 2


@dataclass
class Outcome:
    results: list[dict]
    notes: list[str] = field(default_factory=list)
    objective: str = ""

    @property
    def exit_code(self) -> int:
        return 1 if any(r["predicted"] == COLD for r in self.results) else 0


def spec_of(options: dict):
    """The validated ProbeSpec of predict's options (None: the default); a missing cache
    dir or a bad option is a one-line usage error (exit 2), before anything runs."""
    import os

    from ledger.probes import ProbeError, ProbeSpec
    from ledger.probes.jax_internals import ENV_CACHE_DIR

    if not options.get("cache_dir") and not os.environ.get(ENV_CACHE_DIR):
        raise UsageError(f"no cache dir: give --cache-dir or set {ENV_CACHE_DIR} "
                         "(without one nothing is cached, and there is nothing to predict)")
    try:
        return ProbeSpec.make(**{k: v for k, v in options.items() if v is not None})
    except ProbeError as exc:
        raise UsageError(str(exc)) from None


def compute(spec, timeout_s: float = DEFAULT_TIMEOUT_S, flag: str | None = None):
    """probes' key report for a validated spec; one-line errors as exit-2 usage errors
    (past ``timeout_s``, one naming ``flag``, the option that sets the limit, if any)."""
    from ledger.probes.errors import ProbeError
    from ledger.probes.predict import PredictTimeout, UnpredictableJax, compute_keys

    try:
        return compute_keys(spec, timeout_s)
    except UnpredictableJax as err:
        raise UsageError(str(err)) from None
    except PredictTimeout as err:
        raise UsageError(timed_out(spec, err, flag)) from None
    except ProbeError as err:
        raise LedgerError(str(err)) from None


def timed_out(spec, err, flag: str | None) -> str:
    text = (f"{err}: objective {spec.objective} did not build and trace in time "
            "(its process was killed)")
    return text + (f"; give a longer {flag} if it needs more" if flag else "")


def judge(conn, spec, report) -> list[dict]:
    """Each key report entry with its cell, its cause and expected cost when cold
    (``conn`` None: no ledger to read, so no history)."""
    cell = spec.cell()
    out = []
    for p in report.predictions:
        pred = dict(report.context, **cell, **p, objective=spec.objective)
        pred["cause"], pred["details"] = None, []
        pred["expected_compile_s"], pred["expected_n"] = None, 0
        if conn is None:  # no ledger yet: nothing to compare with
            pred["cause"] = (cz.EMPTY_DIR if pred["cache_entries"] == 0 else cz.NO_WARM_ROW
                             ) if pred["predicted"] == COLD else None
            out.append(pred)
            continue
        pred["expected_compile_s"], pred["expected_n"] = cz.expected_cost(conn, pred)
        if pred["predicted"] == COLD:
            found, warm, cause = cz.causes(conn, pred)
            pred["cause"], pred["details"] = "; ".join(found), cz.details(pred, warm, cause)
        out.append(pred)
    return out


def predict(spec, engine, report=None) -> Outcome:
    """Predict each transform of ``spec`` (validated) and store the predictions."""
    report = report or compute(spec)
    with engine.connect() as conn:
        results = judge(conn, spec, report)
    for pred, pid in zip(results, store.save(engine, results), strict=True):
        pred["prediction_id"] = pid
    return Outcome(results, report.notes, spec.objective)


def line(pred: dict) -> str:
    """One transform, for people."""
    text = f"{pred['transform']}: {pred['predicted']}"
    if pred["predicted"] != COLD:
        return text
    text += f" ({pred['cause']})"
    cost = pred["expected_compile_s"]
    text += (f"; expected cold compile {cost:.4g} s (median of {pred['expected_n']})"
             if cost is not None else "; expected cold compile unknown (no cold row of this cell on a host not loaded)")
    return text


def as_json(pred: dict) -> dict:
    return {k: pred.get(k) for k in JSON_FIELDS}
