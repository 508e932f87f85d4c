"""Two markers for cases that cannot run just anywhere under pytest-xdist:

- `alone`: a case that holds the machine (a timing it asserts, a lock or a timeout it
  waits for, processes it counts) runs after every other case has finished, on one
  worker, with no other case beside it;
- `serial`: a case that shares one thing with the other serial cases, and only with them
  (the single-node SLURM: its CPUs and the queue it reads), runs one at a time on one
  worker, from the start, beside the other cases. (They were `alone` once: 47 s of the
  suite's tail, mostly waiting on SLURM, with the other core idle.)

`make test` runs the suite on both cores (`pytest -n 2`, xdist's load scheduling);
without -n nothing here does anything and the marked cases run in their place.

How: each worker writes the ids of the marked cases it collected into a folder of the
session's (the controller hands it over in the worker's input) before it reports its
collection. The scheduler is xdist's load scheduling, except that the first worker
sent any cases gets every serial case first, in one batch (a worker runs its batch in
order), and that it never hands out the alone cases while another case is left: then
it stops every worker but one and, when they have finished, gives the held cases to
that one. Case ids stay as they are.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

MARKER = "alone"
SERIAL = "serial"
_DIR = "ledger_alone_dir"
DOC = ("holds the machine (a timing it asserts, a lock or timeout waited for, processes counted): under"
       " xdist it runs after every other case, with none beside it (tests/alone.py)")
SERIAL_DOC = ("shares one thing with the other serial cases only (the SLURM node and its queue): under xdist"
              " they run one at a time on one worker, first, beside the other cases (tests/alone.py)")


def configure(config) -> None:
    """From conftest's pytest_configure: the markers, and on the controller of an xdist
    run the plugin that schedules the marked cases."""
    config.addinivalue_line("markers", f"{MARKER}: {DOC}")
    config.addinivalue_line("markers", f"{SERIAL}: {SERIAL_DOC}")
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput") \
            and config.getoption("numprocesses", None):
        config.pluginmanager.register(_Controller(), "ledger-alone")


def list_held(config, items) -> None:
    """From conftest's pytest_collection_modifyitems: on a worker, the marked cases' ids."""
    folder = getattr(config, "workerinput", {}).get(_DIR)
    if folder:
        marked = {name: [item.nodeid for item in items if item.get_closest_marker(name)] for name in (MARKER, SERIAL)}
        (Path(folder) / f"{config.workerinput['workerid']}.json").write_text(json.dumps(marked))


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
        serial: frozenset[int] = frozenset()  # indices run one at a time, first, by one worker
        keeper = None  # the worker that runs the held ones
        queue = None  # the worker that runs the serial ones

        def _hold(self) -> None:
            if self.held is None and self.collection is not None:
                ids = {MARKER: set(), SERIAL: set()}
                for path in folder.glob("*.json"):
                    for name, marked in json.loads(path.read_text()).items():
                        ids[name].update(marked)
                self.held = {i for i, nodeid in enumerate(self.collection) if nodeid in ids[MARKER]}
                self.serial = frozenset(i for i, nodeid in enumerate(self.collection) if nodeid in ids[SERIAL]) - self.held

        def _send_tests(self, node, num: int) -> None:
            self._hold()
            chosen = [i for i in self.pending if i not in self.held and i not in self.serial][:num]
            serial = [i for i in self.pending if i in self.serial]
            if serial and self.queue not in self.nodes:  # the first worker (or, if it died, the next)
                self.queue = node
            if serial and node is self.queue:
                chosen = serial + chosen
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
