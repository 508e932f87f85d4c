"""`ledger record` puts this directory first on PYTHONPATH, so every Python process of
the recorded command runs this at startup. It must cost nothing in a program that
never imports jax, and must not hide the program's own sitecustomize:

- this directory leaves sys.path again (the program sees its own path);
- an import hook waits for ``import jax``: only then is the ledger imported and JAX's
  compile path wrapped (ledger/recorder/boot.py). Nothing else happens before that;
- the next sitecustomize on the path, if there is one, runs as it would have.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _ledger_start():
    try:
        try:
            from ledger.recorder.boot import start_from_env
        except ImportError:
            # the program's Python lacks the ledger: use the launcher's, after its own
            extra = os.environ.get("LEDGER_RECORD_PATH")
            if not extra or extra in sys.path:
                raise
            sys.path.append(extra)
            from ledger.recorder.boot import start_from_env
        start_from_env()
    except Exception as err:  # noqa: BLE001 - the program runs on, unrecorded
        print(f"ledger record: not recording: {type(err).__name__}: {err}", file=sys.stderr, flush=True)


class _AfterJaxImport:
    """A meta path finder that finds nothing: it sees ``import jax`` go by and runs
    the recorder once jax's own module has executed."""

    def find_spec(self, name, path=None, target=None):
        if name != "jax":
            return None
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None:
            return spec

        def exec_then_record(module):
            # a loader may be shared by many modules (an editable install's): only jax's
            # own execution is followed by the recorder, and only once
            if getattr(module, "__name__", None) != "jax":
                return exec_module(module)
            try:
                del loader.exec_module
            except AttributeError:
                pass
            exec_module(module)
            _ledger_start()

        loader.exec_module = exec_then_record
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
if os.environ.get("LEDGER_RECORD") and "jax" not in sys.modules:
    sys.meta_path.insert(0, _AfterJaxImport())
_chain()
