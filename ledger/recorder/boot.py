"""Starting a recording: in a recorded process at its jax import, or in-process.

``start_from_env()`` is what the sitecustomize of ``ledger record`` calls once the
program has imported jax (ledger/recorder/site/sitecustomize.py); ``recording()`` is
the same machinery for a notebook or a library::

    with ledger.recording(db="ledger.db", tag="fit-v2"):
        fit()
"""

from __future__ import annotations

import atexit
import contextlib
import shlex
import sys
import uuid

from ledger.recorder.config import RecordConfig
from ledger.recorder.hook import Recorder, install, uninstall, warn_once
from ledger.recorder.sink import Sink

_process: tuple[Recorder, Sink] | None = None


def start(config: RecordConfig) -> Recorder | None:
    """Record this process's compiles into ``config.db`` until it exits."""
    global _process
    if _process is not None:
        return _process[0]
    sink = Sink(config.db)
    recorder = Recorder(config, sink.put)
    if not install(recorder):
        return None
    _process = (recorder, sink)
    sink.start()

    def _at_exit():
        uninstall(recorder)
        sink.close()

    atexit.register(_at_exit)
    return recorder


def start_from_env() -> None:
    """The sitecustomize's entry, after jax is imported; never raises."""
    try:
        config = RecordConfig.from_env()
        if config is not None:
            start(config)
    except Exception as err:  # noqa: BLE001 - the program must run on regardless
        warn_once("not recording", err)


def _resolved_db(db: str | None) -> str:
    from ledger.storage.url import resolve

    target = resolve(db)
    return str(target.path.resolve()) if target.path is not None else target.value


@contextlib.contextmanager
def recording(db: str | None = None, tag: str | None = None, *, dataset_class: str | None = None,
              model_type: str | None = None, instrument: str | None = None):
    """Record every XLA compile inside the block; rows are written when it ends at the
    latest. Yields the Recorder (``.config.run_id`` names the run)."""
    import jax  # noqa: F401 - the compile path must exist before it is wrapped

    config = RecordConfig(db=_resolved_db(db), run_id=uuid.uuid4().hex, tag=tag,
                          command=shlex.join(sys.argv) if sys.argv and sys.argv[0] else None,
                          cell={"dataset_class": dataset_class, "model_type": model_type,
                                "instrument": instrument})
    sink = Sink(config.db)
    recorder = Recorder(config, sink.put)
    if not install(recorder):
        yield None
        return
    try:
        yield recorder
    finally:
        uninstall(recorder)
        if _process is not None:  # a `ledger record` of this process goes on
            install(_process[0])
        sink.close()
