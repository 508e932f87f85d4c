"""`ledger record` meets programs as they are: however they first reach jax, whatever
stops the recorder (said, never silent), whatever the command line is, and refusing
a ledger it cannot use before anything runs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .case_kinds import LEDGER, unprivileged
from .conftest import query
from .helpers import program, program_stderr, recorded, summary

PY = sys.executable
# The program's own count of its compiles, printed last.
ORACLE = '''
import jax as _jax_for_the_oracle
_seen = []
_jax_for_the_oracle.monitoring.register_event_duration_secs_listener(
    lambda ev, d, **kw: _seen.append(d) if ev == "/jax/core/compile/backend_compile_duration" else None)
import atexit
atexit.register(lambda: print("seen", len(_seen), flush=True))
'''

FIRST_IMPORTS = {
    "find_spec first": "import importlib.util\nassert importlib.util.find_spec('jax')\nimport jax\n",
    "import_module": "import importlib\njax = importlib.import_module('jax')\n",
    "from jax import numpy": "from jax import numpy\nimport jax\n",
    "in a thread": ("import threading\nt = threading.Thread(target=lambda: __import__('jax'))\n"
                    "t.start(); t.join()\nimport jax\n"),
    "by a library at import": "import lenslib\nimport jax\n",
}


@pytest.mark.jax
@pytest.mark.parametrize("how", list(FIRST_IMPORTS))
def test_recorded_however_jax_is_first_imported(tmp_path, how):
    (tmp_path / "lenslib.py").write_text("import importlib.util\nimportlib.util.find_spec('jax')\nimport jax\n")
    body = FIRST_IMPORTS[how] + ORACLE + "jax.jit(lambda v: v * 3)(jax.numpy.ones(3))\n"
    out = recorded(tmp_path, tmp_path / "ledger.db", PY, program(tmp_path, body))
    assert (out.returncode, program_stderr(out)) == (0, "")
    n = int(out.stdout.split()[-1])
    assert n >= 2 and summary(out)[0] == n
    assert query(tmp_path / "ledger.db", "SELECT count(*) FROM compile_records") == [(n,)]


@pytest.mark.jax
def test_a_process_that_compiled_unrecorded_says_so(tmp_path):
    # whatever the cause (here the program takes the recorder's hook away before it
    # imports jax), a run that compiled and recorded nothing ends with a line saying why
    body = ("import sys\nsys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != '_AfterJaxImport']\n"
            "import jax\njax.jit(lambda v: v + 1)(1.0)\nprint('done')\n")
    out = recorded(tmp_path, tmp_path / "ledger.db", PY, program(tmp_path, body))
    assert (out.returncode, out.stdout, program_stderr(out)) == (0, "done\n", "")
    assert out.stderr == ("ledger record: not recorded: jax was imported but the recorder never started "
                          f"in this process (pid {out.stderr.split('(pid ')[1].split(')')[0]})\n")
    assert not (tmp_path / "ledger.db").exists()


@pytest.mark.jax
def test_a_program_without_a_compile_is_silent(tmp_path):
    out = recorded(tmp_path, tmp_path / "ledger.db", PY, "-c", "import jax; print(jax.__name__)")
    assert (out.returncode, out.stdout, out.stderr) == (0, "jax\n", "")


@pytest.mark.slow
@pytest.mark.parametrize("db", ["notascheme://x", "/dev/null", "missing-dir/ledger.db"])
def test_a_ledger_that_cannot_be_opened_or_made_is_refused_before_the_command_runs(tmp_path, db):
    out = recorded(tmp_path, db, PY, "-c", "open('ran', 'w')")
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr.startswith("error: ") and len(out.stderr.splitlines()) == 1, out.stderr
    assert not (tmp_path / "ran").exists()


@pytest.mark.unprivileged
def test_a_read_only_dir_is_refused_before_the_command_runs(tmp_path):
    import pwd
    import shutil
    import tempfile

    prefix, why = unprivileged()
    assert prefix is not None, why
    base = tempfile.mkdtemp(prefix="ledger-ro-")  # nobody may enter /tmp/..., not root's tmp_path
    try:
        ro = os.path.join(base, "ro")
        os.mkdir(ro)
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            for path in (base, ro):
                os.chown(path, nobody.pw_uid, nobody.pw_gid)
        os.chmod(ro, 0o555)
        r = subprocess.run([*prefix, str(LEDGER), "record", "--db", f"{ro}/ledger.db", "--", PY, "-c",
                            "print('ran')"], capture_output=True, text=True, cwd=base, timeout=120, check=False)
        assert (r.returncode, r.stdout) == (1, "")
        assert r.stderr == f"error: cannot create the ledger {ro}/ledger.db: Permission denied\n"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _bash(tmp_path, *command) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", '"$@"', "bash", *command], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60, check=False)


@pytest.mark.slow
def test_commands_that_cannot_run_end_as_a_shell_ends_them(tmp_path):
    no_shebang = tmp_path / "no-shebang"
    no_shebang.write_text("echo from sh $1\n")
    no_shebang.chmod(0o755)
    bad = tmp_path / "bad-interpreter"
    bad.write_text("#!/no/such/python\nprint(1)\n")
    bad.chmod(0o755)
    plain = tmp_path / "not-executable"
    plain.write_text("#!/bin/sh\necho no\n")
    for command, status, message in [
        (str(no_shebang), 0, None),
        (str(bad), 127, f"ledger record: {bad}: /no/such/python: bad interpreter: No such file or directory\n"),
        ("no-such-command-here", 127, "ledger record: no-such-command-here: command not found\n"),
        (str(tmp_path / "missing"), 127, f"ledger record: {tmp_path / 'missing'}: No such file or directory\n"),
        (str(plain), 126, f"ledger record: {plain}: Permission denied\n"),
    ]:
        shell = _bash(tmp_path, command, "arg")
        out = recorded(tmp_path, tmp_path / "ledger.db", command, "arg")
        assert (out.returncode, out.stdout) == (shell.returncode, shell.stdout) == (status, shell.stdout)
        if message is not None:
            assert out.stderr == message and "Traceback" not in out.stderr
    assert out.stdout == "" and _bash(tmp_path, str(no_shebang), "x").stdout == "from sh x\n"


@pytest.mark.jax
def test_an_argv_the_program_takes_is_taken(tmp_path):
    args = [f"a{i:06d}" + "x" * 60 for i in range(2200)]  # about 150 kB of arguments
    body = "import sys, jax\njax.numpy.ones(2)\nprint(len(sys.argv) - 1, len(' '.join(sys.argv[1:])))\n"
    out = recorded(tmp_path, tmp_path / "ledger.db", PY, program(tmp_path, body), *args)
    assert (out.returncode, program_stderr(out)) == (0, ""), out.stderr
    assert out.stdout == f"{len(args)} {len(' '.join(args))}\n"
    command = query(tmp_path / "ledger.db", "SELECT command FROM compile_records LIMIT 1")[0][0]
    assert command.endswith(" characters)") and len(command) < 2100  # kept on each row, capped


@pytest.mark.jax
def test_not_one_byte_added_to_a_program_that_logs_at_info(tmp_path):
    body = ("import logging, sys\nlogging.basicConfig(level=logging.INFO, stream=sys.stdout)\n"
            "import jax\njax.jit(lambda v: v - 1)(2.0)\nlogging.info('fit done')\n")
    out = recorded(tmp_path, tmp_path / "new.db", PY, program(tmp_path, body))  # a new ledger: migrated
    assert out.returncode == 0
    assert [ln for ln in out.stdout.splitlines() if "jax" not in ln.lower()] == ["INFO:root:fit done"]
    assert "alembic" not in out.stdout + out.stderr
    assert program_stderr(out) == ""


@pytest.mark.slow
def test_a_password_from_the_environment_is_used_and_never_shown(tmp_path):
    env = {"LEDGER_DB": "postgresql+psycopg://someone:s3cret-pw@127.0.0.1:1/none"}
    out = recorded(tmp_path, None, PY, "-c", "print('ran')", env=env)
    assert out.returncode == 1 and out.stdout == ""
    assert "s3cret-pw" not in out.stderr and "--db carries a password" not in out.stderr
    assert out.stderr.startswith("error: cannot open postgresql+psycopg://someone:***@127.0.0.1:1/none")


def test_a_postgresql_ledger_with_its_password_in_the_environment(pg_db, tmp_path):
    from urllib.parse import urlsplit

    parts = urlsplit(pg_db.url)
    with open(os.environ["PGPASSFILE"]) as f:
        password = next(line.rsplit(":", 1)[1] for line in f.read().splitlines()
                        if line.strip() and not line.startswith("#"))
    with_password = pg_db.url.replace(f"//{parts.username}@", f"//{parts.username}:{password}@", 1)
    # the program has LEDGER_DB as it was given (its own environment); nothing the ledger added holds it
    body = "import os, jax\njax.numpy.ones(2)\nprint(sorted(v for k, v in os.environ.items() if k != 'LEDGER_DB'))\n"
    out = recorded(tmp_path, None, PY, program(tmp_path, body),
                   env={"LEDGER_DB": with_password, "PGPASSFILE": "/nonexistent"})
    assert (out.returncode, program_stderr(out)) == (0, ""), out.stderr
    assert password not in out.stdout + out.stderr  # not in the program's environment, not said
    n = summary(out)[0]
    assert n >= 1 and query(pg_db, "SELECT count(*) FROM compile_records") == [(n,)]


def test_the_plain_command_line_is_read_as_typer_reads_it():
    import typer.main

    from ledger.cli.record import record_cmd
    from ledger.recorder.argv import RECORD_OPTIONS, parse

    app = typer.Typer(add_completion=False)
    app.command()(record_cmd)
    params = typer.main.get_command(app).params
    assert {o: p.name for p in params for o in p.opts if o.startswith("--")} == RECORD_OPTIONS
    assert parse(["--db=x.db", "--tag", "t", "--", "python", "--tag", "y"]) == {
        "db": "x.db", "tag": "t", "dataset_class": None, "model_type": None, "instrument": None,
        "command": ["python", "--tag", "y"]}
    assert parse(["--model-type", "m", "python", "fit.py"])["command"] == ["python", "fit.py"]
    for typers_to_read in (["--help"], ["--tag"], ["--tag", "a\nb", "true"], ["--db", "x"], ["-x", "true"]):
        assert parse(typers_to_read) is None


@pytest.mark.jax
def test_what_typer_reads_it_says_as_for_every_command(tmp_path):
    out = recorded(tmp_path, tmp_path / "ledger.db", record_args=("--tag", "x" * 201))  # no command
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.startswith("error: --tag ") and len(out.stderr.splitlines()) == 1
    out = subprocess.run([str(LEDGER), "record", "--help"], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and "Usage: ledger record [OPTIONS]" in out.stdout


@pytest.mark.jax
def test_a_program_with_its_own_probes_package_is_recorded(tmp_path):
    """The recorder imports the probe's evidence inside the recorded program, whose own
    directory comes first on its path: a project's `probes` package met a top-level one
    of ours there. The program keeps its `probes`, the ledger uses ledger.probes."""
    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / "__init__.py").write_text("MINE = True\n")
    body = "import probes\nassert probes.MINE\n" + ORACLE + "import jax\njax.jit(lambda v: v * 3)(jax.numpy.ones(3))\n"
    out = recorded(tmp_path, tmp_path / "ledger.db", PY, program(tmp_path, body))
    assert (out.returncode, program_stderr(out)) == (0, "")
    n = int(out.stdout.split()[-1])
    assert n >= 2 and query(tmp_path / "ledger.db", "SELECT count(*) FROM compile_records") == [(n,)]
