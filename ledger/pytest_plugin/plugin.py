"""The pytest hooks: `pytest --ledger`, `--ledger-check`, `--ledger-pin` and compile_budget.

Loaded in every pytest session of an environment that has the ledger (the pytest11
entry point `ledger`; `-p no:ledger` keeps it out). Until asked it only adds its options
and its marker: no jax, no SQLAlchemy, no file. A test marked compile_budget is judged
in any session, recorded or not: the marker is the asking.
"""

from __future__ import annotations

import contextlib
import sys

import pytest

from ledger.record import PHASE_CALL, PHASE_COLLECT, PHASE_SETUP, PHASE_TEARDOWN

NAME = "ledger-session"
MARKER_HELP = ("compile_budget(compiles=N, seconds=S): fail the test when its call compiles more than N times, or"
               " spends more than S seconds in compiles that were not cache reads (judged on a host not loaded);"
               " JAX's in-memory caches are cleared before its call (jax-compile-ledger)")


def pytest_addoption(parser):
    group = parser.getgroup("ledger", "jax-compile-ledger: each test's JAX compiles as rows of a ledger")
    group.addoption("--ledger", action="store_true",
                    help="record every XLA compile of every test (its node id, and its fixtures' setup and teardown"
                         " apart) into the ledger: one run per session, pytest-xdist workers included")
    group.addoption("--ledger-db", metavar="PATH_OR_URL",
                    help="the ledger (implies --ledger); default $LEDGER_DB, else ./ledger.db. A URL with a password"
                         " goes in LEDGER_DB, not here")
    group.addoption("--ledger-tag", metavar="TAG", help="a tag on the session's rows (implies --ledger)")
    group.addoption("--ledger-isolate", action="store_true",
                    help="clear JAX's in-memory caches before each test's setup and call, so that each test compiles what it"
                         " uses whatever ran before it, on any worker (implies --ledger)")
    group.addoption("--ledger-check", action="store_true",
                    help="fail a test whose call compiles a function more times than its pin, with the `ledger diff`"
                         " line (implies --ledger --ledger-isolate)")
    group.addoption("--ledger-pin", action="store_true",
                    help="at the end, pin the compile counts of each passed test that has no pin (implies --ledger"
                         " --ledger-isolate)")
    group.addoption("--ledger-repin", action="store_true", help="as --ledger-pin, and move existing pins too")


def pytest_configure(config):
    config.addinivalue_line("markers", MARKER_HELP)
    plugin = LedgerPlugin(config)
    config.pluginmanager.register(plugin, NAME)
    plugin.open()


class LedgerPlugin:
    def __init__(self, config):
        o = config.option
        self.config = config
        self.pin = bool(o.ledger_pin or o.ledger_repin)
        self.check = bool(o.ledger_check)
        self.isolate = bool(o.ledger_isolate or self.check or self.pin)
        self.record = bool(o.ledger or o.ledger_db or o.ledger_tag or self.isolate)
        self.worker = getattr(config, "workerinput", None)  # a pytest-xdist worker's, else None
        self.run = self.lock = self.recording = None
        self.pins: dict | None = None
        self.passed: set[str] = set()
        self.verdicts = {"held": 0, "grew": 0, "unpinned": 0}
        self.notes: list[str] = []
        self.lines: list[str] = []

    # -- the session's run ------------------------------------------------------------
    def open(self) -> None:
        if not self.record:
            return
        from ledger.pytest_plugin.session import WORKER_KEY, Recording, SessionRun

        if self.worker is not None and WORKER_KEY in self.worker:
            self.run = SessionRun(**self.worker[WORKER_KEY])
        else:
            self.run, self.lock = self._make_run()
        self.recording = Recording(self.run)
        self.recording.start()

    def _make_run(self):
        from ledger.errors import LedgerError
        from ledger.pytest_plugin.session import open_run
        from ledger.record_validation import RecordError, check_text_value

        o = self.config.option
        try:
            if o.ledger_tag is not None:
                check_text_value("--ledger-tag", o.ledger_tag)
            return open_run(o.ledger_db, o.ledger_tag, list(self.config.invocation_params.args),
                            str(self.config.rootpath))
        except (LedgerError, RecordError) as err:
            raise pytest.UsageError(f"ledger: {err}") from None
        except OSError as err:
            raise pytest.UsageError(f"ledger: cannot make the session's spool dir: {err}") from None

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node):
        """pytest-xdist, in the controller: each worker records into this run."""
        from ledger.pytest_plugin.session import WORKER_KEY

        if self.run is not None:
            node.workerinput[WORKER_KEY] = self.run.as_input()

    def pytest_sessionstart(self, session):
        if self.check and self._runs_tests():
            self.pins = self._read_pins()

    def _runs_tests(self) -> bool:
        return self.worker is not None or not self.config.pluginmanager.hasplugin("dsession")

    def _read_pins(self) -> dict:
        from ledger.errors import LedgerError
        from ledger.pytest_plugin.pins import read_pins
        from ledger.storage.open import open_ledger

        try:
            with open_ledger(self.config.option.ledger_db, "read") as ledger:
                return read_pins(ledger.engine)
        except LedgerError:
            return {}  # no ledger yet: no pins; the summary says nothing was judged

    # -- which test, which phase ------------------------------------------------------
    @contextlib.contextmanager
    def _phase(self, nodeid: str, phase: str):
        if self.recording is None:
            yield
            return
        self.recording.enter(nodeid, phase)
        try:
            yield
        finally:
            self.recording.leave()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(self, collector):
        with self._phase(collector.nodeid, PHASE_COLLECT) if isinstance(collector, pytest.File) \
                else contextlib.nullcontext():
            yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item):
        if self.isolate:
            _clear_jax_caches()  # its function-scoped fixtures compile what they use, whatever ran before
        with self._phase(item.nodeid, PHASE_SETUP):
            yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        budgeted = item.get_closest_marker("compile_budget") is not None
        if budgeted and self.recording is None:
            self._budget_recording()
        if budgeted or self.isolate:
            _clear_jax_caches()  # the call compiles what it uses, whatever ran before it
        with self._phase(item.nodeid, PHASE_CALL):
            yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item):
        with self._phase(item.nodeid, PHASE_TEARDOWN):
            yield

    def _budget_recording(self) -> None:
        """A session that records into no ledger: its budgeted tests' compiles, kept in hand."""
        import uuid

        from ledger.pytest_plugin.session import Recording, SessionRun

        self.recording = Recording(SessionRun(None, uuid.uuid4().hex, None, "pytest", None))
        self.recording.start()

    # -- judging a test's call --------------------------------------------------------
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        judged = self._judge(item) if call.when == "call" and self.recording is not None else None
        if judged and judged[0] and call.excinfo is None:
            call.excinfo = _failure(judged[0])
        report = (yield).get_result()
        if judged:
            report.ledger_notes, report.ledger_check = judged[1], judged[2]

    def _judge(self, item) -> tuple[str | None, list[str], str | None]:
        """(why the call fails, or None; notes for the summary; the check's verdict)."""
        from ledger.pytest_plugin.budget import Budget, BudgetError, judge

        compiles = self.recording.writer.of(item.nodeid, PHASE_CALL)
        failures, notes = [], []
        mark = item.get_closest_marker("compile_budget")
        if mark is not None:
            try:
                over, note = judge(Budget.of_marker(mark), compiles)
            except BudgetError as err:
                over, note = f"ledger: {err}", None
            failures += [over] if over else []
            notes += [note] if note else []
        verdict = None
        if self.pins is not None:
            grew, verdict = self._against_pin(item.nodeid, compiles)
            failures += grew
        return ("\n".join(failures) or None), notes, verdict

    def _against_pin(self, nodeid: str, compiles) -> tuple[list[str], str]:
        from ledger.report.diff_tests import FAILS, compiled_by_function, line, unit_changes

        pinned = self.pins.get(nodeid)
        if pinned is None:
            return [], "unpinned"
        changes = unit_changes(nodeid, PHASE_CALL, pinned, compiled_by_function(compiles))
        grew = [line(c) for c in changes if c["change"] in FAILS]
        return ([f"ledger-check: {text}" for text in grew], "grew" if grew else "held")

    def pytest_runtest_logreport(self, report):
        if report.when != "call":
            return
        if report.passed:
            self.passed.add(report.nodeid)
        self.notes += [f"{report.nodeid}: {n}" for n in getattr(report, "ledger_notes", None) or ()]
        verdict = getattr(report, "ledger_check", None)
        if verdict in self.verdicts:
            self.verdicts[verdict] += 1

    def pytest_runtest_logfinish(self, nodeid, location):
        if self.recording is not None:
            self.recording.writer.forget()  # judged: what it compiled is in the spool, or nowhere needed

    # -- the end ----------------------------------------------------------------------
    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        if self.recording is not None:
            self.recording.stop()
        if self.lock is None:
            return  # a worker: the first process takes its rows in
        from ledger.pytest_plugin.report import finish

        try:
            self.lines = finish(self)
        finally:
            import os

            os.close(self.lock)
            self.lock = None

    def pytest_terminal_summary(self, terminalreporter):
        from ledger.pytest_plugin.report import check_line, notes_lines

        lines = [*self.lines, *notes_lines(self.notes)]
        if self.check and self.worker is None:
            lines.append(check_line(self.verdicts))
        for text in lines:
            terminalreporter.write_line(text)


def _clear_jax_caches() -> None:
    if "jax" in sys.modules:  # nothing compiled yet otherwise, and jax is never imported here
        sys.modules["jax"].clear_caches()


def _failure(message: str):
    """The call's outcome as a failure with ``message``: the test fails as if it had
    raised pytest.fail(message) (a failure with its one line in the short summary)."""
    try:
        pytest.fail(message, pytrace=False)
    except pytest.fail.Exception:
        return pytest.ExceptionInfo.from_current()
