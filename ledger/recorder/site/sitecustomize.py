"""`ledger record` puts this directory first on PYTHONPATH, so every Python process of
the recorded command runs this at startup. It must cost nothing in a program that
never imports jax, and must not hide the program's own sitecustomize:

- this directory leaves sys.path again (the program sees its own path);
- an import hook waits for jax's own module to have executed: only then is the ledger
  imported and JAX's compile path wrapped (ledger/recorder/boot.py). It stays in
  place until then, whatever looked jax up first: the field's libraries call
  ``importlib.util.find_spec("jax")`` to test for it, which makes a spec (and, for a
  plain file, a loader) that the real import never uses;
- at exit, a process that imported jax but was never recorded says so in the spool,
  so the run ends with a line saying why, not with silence;
- the next sitecustomize on the path, if there is one, runs as it would have.
"""

import os
import sys
import time

_T0 = time.time()  # the process's start, near enough: the interpreter has just begun (its wall time)


def _forked():
    global _T0
    _T0 = time.time()  # a fork (a forkserver's child): its own start, not its parent's


_HERE = os.path.dirname(os.path.abspath(__file__))
_started = []  # non-empty once the recorder was started (or refused) in this process


def _import_boot():
    try:
        from ledger.recorder import boot
    except ImportError:
        # the program's Python lacks the ledger: use the launcher's, after its own
        extra = os.environ.get("LEDGER_RECORD_PATH")
        if not extra or extra in sys.path:
            raise
        sys.path.append(extra)
        from ledger.recorder import boot
    return boot


def _ledger_start():
    if _started:
        return
    _started.append(True)
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _AfterJaxImport)]
    try:
        _import_boot().start_from_env(_T0)
    except Exception as err:  # noqa: BLE001 - the program runs on, unrecorded
        print(f"ledger record: not recording: {type(err).__name__}: {err}", file=sys.stderr, flush=True)


def _at_exit():
    """A process that imported jax without the recorder starting: say so in the spool."""
    if _started or "jax" not in sys.modules:
        return
    try:
        _import_boot().unrecorded("jax was imported but the recorder never started in this process")
    except Exception:  # noqa: BLE001, S110 - exiting: nothing more can be done
        pass


class _AfterJaxImport:
    """A meta path finder that finds nothing itself: for ``jax`` it asks the finders
    after it, and has the spec's loader run the recorder once jax's module executed."""

    def find_spec(self, name, path=None, target=None):
        if name != "jax" or _started:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None or getattr(exec_module, "_ledger_wrapped", False):
            return spec

        def exec_then_record(module):
            # a loader may be shared by many modules (an editable install's): only jax's
            # own execution is followed by the recorder
            if getattr(module, "__name__", None) != "jax":
                return exec_module(module)
            exec_module(module)
            _ledger_start()

        exec_then_record._ledger_wrapped = True
        try:
            loader.exec_module = exec_then_record
        except AttributeError:  # a loader that takes no attributes: not followed
            return spec
        return spec


def _chain():
    """Run the sitecustomize this one shadows, as Python would have."""
    import importlib.machinery
    import importlib.util

    others = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
if os.environ.get("LEDGER_RECORD"):
    import atexit

    atexit.register(_at_exit)
    os.register_at_fork(after_in_child=_forked)
    if "jax" in sys.modules:  # imported before us (a .pth file): it is there already
        _ledger_start()
    else:
        sys.meta_path.insert(0, _AfterJaxImport())
_chain()
