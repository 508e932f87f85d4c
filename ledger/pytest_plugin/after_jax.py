"""Start something once jax's own module has executed, never by importing jax.

A suite's conftest may set JAX_ENABLE_X64 or XLA_FLAGS before its own `import jax`, and
jax reads some of them as it executes: a plugin that imported jax first would change the
suite it measures. So the recorder waits for the suite's import. A meta path finder
that finds nothing itself: for ``jax`` it asks the finders after it, and has the spec's
loader call back once the module executed (ledger/recorder/site/sitecustomize.py does
the same in a recorded program, which cannot import the ledger before jax).
"""

from __future__ import annotations

import sys


def when_jax_imported(callback) -> None:
    """``callback()`` now if jax is imported, else right after its module executes."""
    if "jax" in sys.modules:
        callback()
        return
    sys.meta_path.insert(0, _AfterJax(callback))


class _AfterJax:
    """Stays until jax's module executed, whatever looked jax up first: the field's
    libraries call ``importlib.util.find_spec("jax")`` to test for it, which makes a spec
    the real import never uses."""

    def __init__(self, callback):
        self.callback, self.done = callback, False

    def find_spec(self, name, path=None, target=None):
        if name != "jax" or self.done:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None) if finder is not self else None
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        exec_module = getattr(spec.loader, "exec_module", None)
        if exec_module is None or getattr(exec_module, "_ledger_wrapped", False):
            return spec

        def exec_then_call(module):
            if getattr(module, "__name__", None) != "jax":  # a loader shared by many modules
                return exec_module(module)
            exec_module(module)
            self._call()

        exec_then_call._ledger_wrapped = True
        try:
            spec.loader.exec_module = exec_then_call
        except AttributeError:  # a loader that takes no attributes: the plugin starts at the next test
            pass
        return spec

    def _call(self) -> None:
        self.done = True
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        self.callback()
