"""SQL on a store's database behind its API, and the check that a store error is one clear
line: the store tests' own look under the hood."""

from __future__ import annotations

from pathlib import Path


def raw_sql(store, query: str, *args) -> list[tuple]:
    """Run SQL on a store's database directly (the tests' own look behind the API); a change
    is committed, on a server as on a file."""
    if store.kind == "sqlite":
        return sql(store.path, query, *args)
    import psycopg

    with psycopg.connect(store._location.url, autocommit=True) as conn:
        cursor = conn.execute(query.replace("?", "%s"), args or None)
        return [tuple(r) for r in cursor.fetchall()] if cursor.description else []


def sql(path: Path, query: str, *args: object) -> list[tuple]:
    """Run SQL on a store file directly; a change is committed."""
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(query, args).fetchall()
        conn.commit()
        return rows
    finally:
        conn.close()


def assert_clear(err: Exception, path: Path) -> None:
    """``err`` is one clear line: it names the store and how to use another, and chains no
    sqlite3 traceback."""
    text = str(err)
    assert str(path) in text
    assert "GPUPERF_STORE" in text  # says how to use another store
    # No sqlite3 traceback chained under the message.
    assert err.__cause__ is None
    assert err.__context__ is None or err.__suppress_context__
