"""The Alembic environment and revisions. In a checkout this is the top-level
migrations/ that alembic.ini names; in the wheel it is installed as the package
`ledger.migrations` (pyproject.toml maps the directory), so a node that installs the
ledger with pip can create and upgrade ledgers. Nothing imports this package: alembic
loads env.py and versions/*.py by path."""
