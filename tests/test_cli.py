"""The installed `ledger` entry point: exit codes, one-line errors, no jax at start."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.cli import commands
from ledger.storage.revisions import HEAD

from .conftest import (
    CORPUS,
    CORPUS_COMPILE,
    CORPUS_FILES,
    CORPUS_RECORDS,
    CORPUS_STATES,
    db_at,
    run_cli,
)
from .ledgers import add, rec

LEDGER = Path(sys.executable).with_name("ledger")


def _run(*args, env=None, cwd=None):
    return subprocess.run([LEDGER, *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd, check=False)


# What a command that needs none of it must not import (bench/bench_cli_startup.py's list),
# and pydantic, which typer 0.29 imports to build a TypeAdapter for every parameter a
# command parses (65 ms of each command's start-up): pyproject.toml keeps typer below it.
HEAVY = ("jax", "jaxlib", "sqlalchemy", "alembic", "matplotlib", "pydantic", "pydantic_core")


def _heavy_imported_by(args: list[str], last_line: str | None = None) -> str:
    """The heavy modules (HEAVY, and ledger.probes) a fresh interpreter holds after the
    CLI ran `args` in it."""
    check = "" if last_line is None else f" and r.output.splitlines()[-1].strip() == {last_line!r}"
    code = (
        "import sys\n"
        "from ledger.cli import app\n"
        "from typer.testing import CliRunner\n"
        f"r = CliRunner().invoke(app, {args!r})\n"
        f"assert r.exit_code == 0{check}, r.output\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} or m.startswith('ledger.probes')))\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.slow
def test_help_does_not_import_jax_or_sqlalchemy():
    assert _heavy_imported_by(["--help"]) == "[]"


@pytest.mark.slow  # a fresh interpreter: 0.15 s of CPU or more, over half the fast budget
def test_a_query_imports_neither_pydantic_nor_jax_nor_sqlalchemy(tmp_path):
    """`ledger sql` answers from the standard library's sqlite3."""
    db = tmp_path / "x.db"
    add(db, tmp_path, rec())
    assert _heavy_imported_by(["sql", "SELECT count(*) AS n FROM compile_records", "--db", str(db)], "1") == "[]"


def test_the_command_a_run_names_is_found_past_the_root_options():
    assert [commands.named_in(argv) for argv in (["check", "--db", "x"], ["--traceback", "cache", "prune"],
                                                  ["--help"], ["chek"], [], ["--traceback"])] == \
        ["check", "cache", None, None, None, None]


def test_one_command_app_holds_that_command_alone_and_the_whole_app_every_one_in_order():
    one, group = commands.ledger_app("check"), commands.ledger_app("cache")
    assert [c.name for c in one.registered_commands] == ["check"] and one.registered_groups == []
    assert group.registered_commands == [] and [g.name for g in group.registered_groups] == ["cache"]
    whole = commands.ledger_app()
    assert [c.name for c in whole.registered_commands] == [n for n, _, f in commands.ENTRIES if f]
    assert [g.name for g in whole.registered_groups] == [n for n, _, f in commands.ENTRIES if not f]


@pytest.mark.slow  # a fresh interpreter
def test_a_run_of_one_command_imports_no_other_commands_module(tmp_path):
    """The entry point builds just the command it runs (Typer reads every command's
    signature at start: 40 ms for all of them)."""
    db = tmp_path / "x.db"
    add(db, tmp_path, rec())
    code = ("import sys\nfrom ledger.cli import main\n"
            f"sys.argv = ['ledger', '--traceback', 'sql', 'SELECT count(*) AS n FROM compile_records', '--db', {str(db)!r}]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
            "print(sorted(m for m in sys.modules if m.startswith('ledger.cli.')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[-2].strip() == "1"
    modules = {m.removeprefix("ledger.cli.") for m in ast.literal_eval(out[-1])}
    assert modules & {module for _, module, _ in commands.ENTRIES} == {"sql"}, modules


@pytest.mark.slow
def test_entry_point_round_trip(tmp_path):
    env = {**os.environ, "LEDGER_DB": str(tmp_path / "env.db")}
    imp = _run("import", CORPUS, env=env)
    assert imp.returncode == 0, imp.stderr
    assert imp.stdout.startswith(f"{CORPUS_RECORDS} records in {CORPUS_FILES} files: {CORPUS_COMPILE} compile rows added")
    assert imp.stderr == ""  # no progress bar when stderr is not a terminal
    q = _run("sql", "SELECT count(*) AS n FROM compile_records WHERE cache_state = 'warm'", env=env)
    assert (q.returncode, q.stdout.splitlines()[-1].strip()) == (0, str(CORPUS_STATES["warm"]))


@pytest.mark.slow
def test_user_error_is_one_line_and_exit_1(tmp_path):
    r = _run("sql", "DELETE FROM compile_records", "--db", tmp_path / "none.db")
    assert (r.returncode, r.stdout, r.stderr) == (1, "", f"error: no ledger database at {tmp_path / 'none.db'}\n")


@pytest.mark.slow
def test_traceback_flag_shows_the_traceback(tmp_path):
    r = _run("--traceback", "sql", "SELECT 1", "--db", tmp_path / "none.db")
    assert r.returncode == 1 and "Traceback (most recent call last)" in r.stderr and "LedgerError" in r.stderr


def test_password_on_the_command_line_is_refused():
    result = run_cli("sql", "SELECT 1", "--db", "postgresql://me:s3cret@localhost/ledger")
    assert result.exit_code == 1
    assert result.output == "error: --db carries a password: put the URL in the LEDGER_DB environment variable instead\n"
    assert "s3cret" not in result.output


def test_password_from_environment_is_never_printed(monkeypatch):
    monkeypatch.setenv("LEDGER_DB", "postgresql+psycopg2://me:s3cret@127.0.0.1:1/ledger")
    result = run_cli("sql", "SELECT 1")
    assert result.exit_code == 1
    assert "s3cret" not in result.output and result.output.startswith("error: ")
    assert len(result.output.strip().splitlines()) == 1


def test_usage_errors_exit_2(db):
    assert run_cli("import", "--db", db).exit_code == 2
    assert run_cli("frobnicate").exit_code == 2


@pytest.mark.slow
def test_db_commands(db):
    assert run_cli("db", "upgrade", "0002", "--db", db).output == "at revision 0002\n"
    assert run_cli("db", "current", "--db", db).output == f"0002 (head is {HEAD}: run `ledger db upgrade`)\n"
    # reading an older database is fine; it is not changed
    assert run_cli("sql", "SELECT count(*) FROM compile_records", "--db", db).exit_code == 0
    bad = run_cli("db", "upgrade", "0042", "--db", db)
    assert bad.exit_code == 1 and bad.output.startswith("error: migration error: ") and len(bad.output.splitlines()) == 1
    assert run_cli("db", "upgrade", "--db", db).output == f"at revision {HEAD}\n"
    assert run_cli("db", "downgrade", "base", "--db", db).output == "at revision base (empty)\n"


def test_plain_path_and_url_mean_the_same_file(db):
    db_at(db, "head")
    assert run_cli("import", CORPUS, "--db", f"sqlite:///{db}").exit_code == 0
    assert run_cli("sql", "SELECT count(*) FROM compile_records", "--db", db).output.endswith(f"{CORPUS_COMPILE}\n")


def test_passwords_are_redacted_however_they_are_spelled(monkeypatch):
    from ledger.storage.url import has_password, redact

    for url, secret in (("pg://u:se/cret@h/db", "se/cret"), ("pg://u:p@ss@h/db", "p@ss"),
                        ("pg://h/db?password=s3cret&x=1", "s3cret")):
        assert has_password(url) and secret not in redact(url)
        result = run_cli("sql", "SELECT 1", "--db", url)
        assert result.output.startswith("error: --db carries a password")
        monkeypatch.setenv("LEDGER_DB", url)
        result = run_cli("export")
        assert result.exit_code == 1 and secret not in result.output
    assert not has_password("postgresql://u@h:5432/db")


def test_export_write_errors_are_one_line(tmp_path, db):
    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    result = run_cli("export", "-o", tmp_path / "missing" / "x.json", "--db", db)
    assert result.exit_code == 1 and result.output.startswith(f"error: cannot write {tmp_path / 'missing' / 'x.json'}: ")
    assert run_cli("export", "-o", tmp_path, "--db", db).exit_code == 1


def test_export_of_an_older_database_says_upgrade(db):
    db_at(db, "0003")
    result = run_cli("export", "--db", db)
    assert result.exit_code == 1 and f"this ledger needs {HEAD}: run `ledger db upgrade`" in result.output


def test_db_commands_refuse_newer_and_foreign_databases(tmp_path, db):
    import sqlite3

    db_at(db, "head")
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE alembic_version SET version_num = '0099'")
    con.close()
    for args in (["db", "upgrade"], ["db", "downgrade", "0001"], ["db", "current"]):
        result = run_cli(*args, "--db", db)
        assert result.exit_code == 1 and "revision 0099, which this ledger does not know" in result.output
    foreign = tmp_path / "foreign.db"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE compile_records (x)")
    con.close()
    for args in (["db", "upgrade"], ["db", "current"], ["import", CORPUS]):
        result = run_cli(*args, "--db", foreign)
        assert result.exit_code == 1 and "not a ledger database" in result.output and "alembic stamp 0001" in result.output


def test_in_memory_and_unopenable_databases(tmp_path):
    result = run_cli("import", CORPUS, "--db", "sqlite://")
    assert result.output == "error: an in-memory SQLite database vanishes with the command: give a file path\n"
    (tmp_path / "notes.db").write_text("hello, not sqlite")
    result = run_cli("import", CORPUS, "--db", tmp_path / "notes.db")
    assert result.exit_code == 1 and result.output.startswith(f"error: cannot open {tmp_path / 'notes.db'}: ")
    result = run_cli("import", CORPUS, "--db", tmp_path / "no" / "such" / "dir.db")
    assert result.exit_code == 1 and result.output.startswith(f"error: cannot open {tmp_path / 'no' / 'such' / 'dir.db'}: ")


@pytest.mark.slow
def test_option_help_keeps_its_bracketed_text():
    """rich reads "[...]" in help as markup and drops it: the --db help once lost where
    the database comes from when --db is not given."""
    out = " ".join(_run("check", "--help").stdout.replace("│", " ").split())
    assert "SQLAlchemy URL (else $LEDGER_DB, else ./ledger.db)." in out


@pytest.mark.parametrize("args", [("runs", "--limit", "9" * 20), ("sql", "SELECT 1", "--limit", "9" * 20),
                                  ("sql", "SELECT 1", "--csv", "--limit", "1" + "0" * 400),
                                  ("runs", "--limit", "-1")])
def test_a_number_too_large_for_its_option_is_one_line_exit_2(db, args):
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    result = run_cli(*args, "--db", db)
    assert result.exit_code == 2 and len(result.output.splitlines()) == 1, result.output
    assert result.output.startswith("error: --limit must be a whole number from 0 to 9223372036854775807, not ")
