"""The suite's own listener, loaded into optax's test session with `-p ledger_oracle`:
one line per backend compile ("c") and per persistent-cache hit ("h"), naming the test
and phase pytest says is running (PYTEST_CURRENT_TEST; "-" outside any: a module's
import while pytest collects it). JAX's own events, heard in the process that compiled:
what the ledger's rows must say, test by test."""

import os

SEEN = os.environ["ORACLE_FILE"]
os.environ.pop("PYTEST_CURRENT_TEST", None)  # an outer pytest's, if any: this session's comes per test


def _saw(kind: str) -> None:
    now = os.environ.get("PYTEST_CURRENT_TEST", "-")
    fd = os.open(SEEN, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, f"{kind}|{now}\n".encode())
    os.close(fd)


def pytest_configure(config):
    import jax.monitoring

    def duration(event, seconds, **kw):
        if event == "/jax/core/compile/backend_compile_duration":
            _saw("c")

    def event(name, **kw):
        if name == "/jax/compilation_cache/cache_hits":
            _saw("h")

    jax.monitoring.register_event_duration_secs_listener(duration)
    jax.monitoring.register_event_listener(event)
