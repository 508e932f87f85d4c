"""Storage: resolving, opening and gating the database; the tables; writing rows."""
