"""The migrations make the same schema on SQLite and on PostgreSQL: a migration that diverges on one fails here."""

import pytest
from sqlalchemy import inspect

from workspace.db import Database


def schema(url: str) -> dict:
    """Every table's columns (name, generic type, nullable), primary key, unique constraints, indexes and
    foreign keys, as plain values that compare across the two databases."""
    db = Database(url)
    try:
        insp = inspect(db.engine)
        tables = {}
        for table in insp.get_table_names():
            tables[table] = {
                **{f"column {c['name']}": (_generic(c["type"]), c["nullable"]) for c in insp.get_columns(table)},
                "primary key": tuple(insp.get_pk_constraint(table)["constrained_columns"]),
                "unique": sorted(tuple(u["column_names"]) for u in insp.get_unique_constraints(table)),
                "indexes": sorted(
                    (i["name"], tuple(i["column_names"]), bool(i["unique"]))
                    for i in insp.get_indexes(table)
                    if "duplicates_constraint" not in i  # PostgreSQL's index behind a unique constraint
                ),
                "foreign keys": sorted(
                    (tuple(f["constrained_columns"]), f["referred_table"], tuple(f["referred_columns"]))
                    for f in insp.get_foreign_keys(table)
                ),
            }
        return tables
    finally:
        db.engine.dispose()


def _generic(type_) -> str:
    generic = type_.as_generic()
    # FLOAT is double precision on PostgreSQL, reflected as DOUBLE PRECISION; SQLite's REAL is 8 bytes too
    name = "Float" if type(generic).__name__ == "Double" else type(generic).__name__
    length = getattr(generic, "length", None)
    return f"{name}({length})" if length else name


@pytest.mark.postgres
def test_all_migrations_make_the_same_schema_on_sqlite_and_postgresql(tmp_path, postgres_url):
    on_sqlite = schema(f"sqlite:///{tmp_path / 'w.sqlite'}")
    on_postgres = schema(postgres_url)
    assert "executions" in on_sqlite and "alembic_version" in on_sqlite
    assert sorted(on_postgres) == sorted(on_sqlite)
    differences = [
        f"{table} {what}: SQLite {on_sqlite[table].get(what)!r}, PostgreSQL {on_postgres[table].get(what)!r}"
        for table in on_sqlite
        for what in sorted(set(on_sqlite[table]) | set(on_postgres[table]))
        if on_sqlite[table].get(what) != on_postgres[table].get(what)
    ]
    assert differences == [], "a migration makes another schema on one of the databases"


@pytest.mark.postgres
def test_jupyterhub_keeps_its_own_database_on_postgresql_with_the_same_driver(postgres_url):
    # WORKSPACE_HUB_DB_URL: the hub creates its tables on a postgresql+psycopg URL and keeps a user
    from jupyterhub import orm

    session = orm.new_session_factory(postgres_url)()
    try:
        session.add(orm.User(name="ada"))
        session.commit()
        assert [u.name for u in session.query(orm.User)] == ["ada"]
    finally:
        session.close()
        session.get_bind().dispose()
