"""Starting a recording: in a recorded process at its jax import, or in-process.

``start_from_env()`` is what the sitecustomize of ``ledger record`` calls once the
program has imported jax (ledger/recorder/site/sitecustomize.py); ``recording()`` is
the same machinery for a notebook or a library::

    with ledger.recording(db="ledger.db", tag="fit-v2"):
        fit()

A recorded process imports only the standard library, the record contract and the
compile hook: rows go to its spool file, and the ledger is written by the ingester
(ledger/recorder/ingester.py), in another process or, for ``recording()``, when the
block ends.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import sys
import time
import uuid

from ledger.recorder import spool
from ledger.recorder.config import RecordConfig, command_text
from ledger.recorder.hook import Recorder, install, uninstall, warn_once

_process: Recorder | None = None
GOODBYE_WAIT_S = 120.0  # the longest the command's own process waits for its rows at exit


def start(config: RecordConfig, started: float | None = None) -> Recorder | None:
    """Record this process's compiles into the run's spool until it exits. ``started``:
    when the process started (epoch seconds; None: now)."""
    global _process
    if _process is not None:
        return _process
    writer = spool.SpoolWriter(config.run_dir)
    recorder = Recorder(config, writer, started)
    if not install(recorder):
        writer.note(spool.UNRECORDED, why="JAX's compile path could not be wrapped")
        return None
    _process = recorder
    recorder.announce()
    _watch_children(config, writer)
    if config.main_pid == os.getpid():
        atexit.register(_goodbye, config)
    else:
        atexit.register(_exiting)
    return recorder


_PYTHON = re.compile(r"python[0-9.]*(\.exe)?")


def _watch_children(config: RecordConfig, writer) -> None:
    """Say in the spool, so that the run's closing line says it, when this process starts
    a Python (through subprocess) whose environment drops the recording: its own
    PYTHONPATH, or a clean environment. Such a child runs no sitecustomize of ours, so
    its compiles are neither recorded nor heard of."""
    import subprocess

    init = subprocess.Popen.__init__
    if getattr(init, "_ledger_watch", False):
        return

    def __init__(self, args, *rest, **kw):
        try:
            env = kw.get("env", rest[9] if len(rest) > 9 else None)
            if env is not None and not kw.get("shell") and _drops_recording(env, config.run_dir) \
                    and _is_python(kw.get("executable") or _first(args)):
                writer.note(spool.UNRECORDED, why="it started a Python without the recording (its environment or"
                                                  f" PYTHONPATH replaced): {_first(args)[:120]}")
        except Exception:  # noqa: BLE001, S110 - never the program's failure
            pass
        init(self, args, *rest, **kw)

    __init__._ledger_watch = True
    subprocess.Popen.__init__ = __init__


def _first(args) -> str:
    first = args if isinstance(args, (str, bytes, os.PathLike)) else next(iter(args), "")
    return os.fsdecode(first)


def _is_python(program: str) -> bool:
    return bool(_PYTHON.fullmatch(os.path.basename(program))) or os.path.realpath(program) == os.path.realpath(
        sys.executable)


def _drops_recording(env, run_dir: str) -> bool:
    from ledger.recorder.config import ENV, SITE_DIR

    paths = (env.get("PYTHONPATH") or "").split(os.pathsep)
    return env.get(ENV) != run_dir or not any(os.path.realpath(p) == SITE_DIR for p in paths if p)


def _exiting() -> None:
    """At a normal exit of a process that waits for no answer: when it ended (its wall time)."""
    try:
        if _process is not None:
            _process.spool.note(spool.EXIT, at=time.time())
    except Exception:  # noqa: BLE001, S110 - exiting: the ingester sees it gone instead
        pass


def start_from_env(started: float | None = None) -> None:
    """The sitecustomize's entry, after jax is imported; never raises. ``started``: the
    process's start, by the sitecustomize's clock."""
    try:
        config = RecordConfig.from_env()
        if config is not None:
            start(config, started)
    except Exception as err:  # noqa: BLE001 - the program must run on regardless
        unrecorded(f"the recorder failed to start: {type(err).__name__}: {err}")


def unrecorded(why: str) -> None:
    """Say in the spool that this process's compiles were not recorded, and why."""
    run_dir = os.environ.get("LEDGER_RECORD")
    try:
        spool.SpoolWriter(run_dir).note(spool.UNRECORDED, why=why)  # the run's last line says it
    except (OSError, TypeError):
        warn_once(f"not recording: {why}")  # no spool to say it in: say it here


def _goodbye(config: RecordConfig) -> None:
    """At the command's own exit: wait until the ingester has its rows, and print its
    one line (how many were recorded, or where they were kept). Deaths by a signal
    skip this; the ingester takes the rows in on its own then."""
    at = time.time()  # the program's end: what follows is the ledger's wait
    if _process is not None:
        _process.active = False
    try:
        if not _anything_spooled(config.run_dir):
            _process.spool.note(spool.EXIT, at=at)
            return  # nothing compiled in any process of the run: nothing to wait for
        _process.spool.note(spool.BYE, at=at)
        answer = spool.done_file(config.run_dir, os.getpid())
        deadline = time.monotonic() + GOODBYE_WAIT_S
        while not os.path.exists(answer):
            if time.monotonic() > deadline or not spool.ingester_alive(config.run_dir):
                return
            time.sleep(0.005)
        with open(answer, encoding="utf-8") as f:
            line = f.read().strip()
        os.unlink(answer)
        if line:
            print(line, file=sys.stderr, flush=True)
    except Exception as err:  # noqa: BLE001 - exiting: one line at most
        warn_once("could not wait for the ledger", err)


def _anything_spooled(run_dir: str) -> bool:
    """Whether any process of the run spooled a compile (a file past its first line)."""
    for path in spool.spool_files(run_dir):
        try:
            with open(path, "rb") as f:
                if f.read().count(b"\n") > 1:
                    return True
        except OSError:
            continue
    return False


def _resolved_target(db: str | None):
    from ledger.storage.url import resolve

    return resolve(db)


@contextlib.contextmanager
def recording(db: str | None = None, tag: str | None = None, *, dataset_class: str | None = None,
              model_type: str | None = None, instrument: str | None = None):
    """Record every XLA compile inside the block; its rows are in the ledger when it
    ends. Yields the Recorder (``.config.run_id`` names the run)."""
    import jax  # noqa: F401 - the compile path must exist before it is wrapped

    from ledger.errors import LedgerError
    from ledger.record_validation import RecordError, check_text_value
    from ledger.recorder import ingester

    try:  # refused before the block runs, as the CLI refuses them before the command
        for name, value in (("tag", tag), ("dataset_class", dataset_class), ("model_type", model_type),
                            ("instrument", instrument)):
            if value is not None:
                check_text_value(name, value)
    except RecordError as err:
        raise LedgerError(str(err)) from None
    target = _resolved_target(db)
    config = RecordConfig(run_dir="", run_id=uuid.uuid4().hex, tag=tag,
                          command=command_text(sys.argv) if sys.argv and sys.argv[0] else None,
                          cell={"dataset_class": dataset_class, "model_type": model_type,
                                "instrument": instrument})
    lock = config.create(target)  # the block is this run's ingester: no one else takes it in
    recorder = Recorder(config, spool.SpoolWriter(config.run_dir))
    try:
        if not install(recorder):
            yield None
            return
        recorder.announce()  # the block's time is the run's
        try:
            yield recorder
        finally:
            uninstall(recorder)
            recorder.spool.note(spool.EXIT, at=time.time())
            line = ingester.drain_now(db, config.run_dir)
            if line:
                print(line, file=sys.stderr, flush=True)
    finally:
        os.close(lock)
