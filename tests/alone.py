"""The `alone` marker under pytest-xdist: a case that holds the machine (a timing it
asserts, a lock or a timeout it waits for, processes it counts, a SLURM node it fills)
runs after every other case has finished, on one worker, with no other case beside it.

`make test` runs the suite on both cores (`pytest -n 2`, xdist's load scheduling);
without -n nothing here does anything and the marked cases run in their place.

How: each worker writes the ids of the marked cases it collected into a folder of the
session's (the controller hands it over in the worker's input) before it reports its
collection. The scheduler is xdist's load scheduling that never hands those out while
another case is left: then it stops every worker but one and, when they have
finished, gives the held cases to that one. Case ids stay as they are.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

MARKER = "alone"
_DIR = "ledger_alone_dir"
DOC = ("holds the machine (a timing it asserts, a lock or timeout waited for, processes counted, SLURM's node): under"
       " xdist it runs after every other case, with none beside it (tests/alone.py)")


def configure(config) -> None:
    """From conftest's pytest_configure: the marker, and on the controller of an xdist
    run the plugin that holds the marked cases back."""
    config.addinivalue_line("markers", f"{MARKER}: {DOC}")
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput") \
            and config.getoption("numprocesses", None):
        config.pluginmanager.register(_Controller(), "ledger-alone")


def list_held(config, items) -> None:
    """From conftest's pytest_collection_modifyitems: on a worker, the marked cases' ids."""
    folder = getattr(config, "workerinput", {}).get(_DIR)
    if folder:
        held = [item.nodeid for item in items if item.get_closest_marker(MARKER)]
        (Path(folder) / f"{config.workerinput['workerid']}.json").write_text(json.dumps(held))


class _Controller:
    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="ledger-alone-"))

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:
        node.workerinput[_DIR] = str(self.folder)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config, log):
        if config.getvalue("dist") != "load":
            return None  # another --dist was asked for: xdist's own, nothing held back
        return _scheduler(config, log, self.folder)

    def pytest_unconfigure(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _scheduler(config, log, folder: Path):
    from xdist.scheduler import LoadScheduling

    class AloneLast(LoadScheduling):
        held: set[int] | None = None  # indices into the collection, run last
        keeper = None  # the worker that runs them

        def _hold(self) -> None:
            if self.held is None and self.collection is not None:
                ids = set()
                for path in folder.glob("*.json"):
                    ids.update(json.loads(path.read_text()))
                self.held = {i for i, nodeid in enumerate(self.collection) if nodeid in ids}

        def _send_tests(self, node, num: int) -> None:
            self._hold()
            chosen = [i for i in self.pending if i not in self.held][:num]
            if chosen:
                taken = set(chosen)
                self.pending[:] = [i for i in self.pending if i not in taken]
                self.node2pending[node].extend(chosen)
                node.send_runtest_some(chosen)

        def schedule(self) -> None:
            super().schedule()
            if self.collection:  # where the first chunks left only held cases, nothing completes to start them
                for node in self.nodes:
                    self.check_schedule(node)

        def check_schedule(self, node, duration: float = 0) -> None:
            self._hold()
            if not self.pending or any(i not in self.held for i in self.pending):
                super().check_schedule(node, duration)
                return
            # Only the held cases are left: every worker but the keeper finishes what it
            # has and stops; once the keeper is alone, it gets them.
            if self.keeper not in self.nodes:
                self.keeper = self.nodes[0]
                for other in self.nodes[1:]:
                    other.shutdown()
            if self.nodes == [self.keeper]:
                held, self.pending[:] = list(self.pending), []
                self.node2pending[self.keeper].extend(held)
                self.keeper.send_runtest_some(held)
                self.keeper.shutdown()

        def remove_node(self, node):
            crashed = super().remove_node(node)
            if self.pending and self.nodes:
                self.check_schedule(self.nodes[0])
            return crashed

    return AloneLast(config, log)
