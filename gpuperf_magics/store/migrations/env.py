"""Alembic's environment for the store: the caller's connection, the version kept by the store.

Run by :func:`gpuperf_magics.store.migrations.upgrade` only (never from a command line): the
connection, in its open transaction, comes in ``config.attributes["connection"]``.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import context

from gpuperf_magics.store.schema import APPLICATION, APPLICATION_ID


def set_version(conn: Any, version: int) -> None:
    """Write ``version`` where the store keeps it: the pragmas of a file, ``meta`` on a server."""
    if conn.dialect.name == "sqlite":
        # PRAGMA takes no parameters; the values are ints of our own.
        conn.exec_driver_sql(f"PRAGMA user_version = {int(version)}")
        conn.exec_driver_sql(f"PRAGMA application_id = {int(APPLICATION_ID)}")
        return
    from sqlalchemy.dialects.postgresql import insert

    meta = sa.table("meta", sa.column("key"), sa.column("value"))
    for key, value in (("schema_version", str(int(version))), ("application", APPLICATION)):
        statement = insert(meta).values(key=key, value=value)
        conn.execute(statement.on_conflict_do_update(
            index_elements=["key"], set_={"value": statement.excluded.value}))


def _record(ctx: Any, step: Any, heads: Any, run_args: Any) -> None:
    if step.is_upgrade:
        set_version(ctx.connection, int(step.up_revision_id))


def run() -> None:
    connection = context.config.attributes["connection"]
    context.configure(connection=connection, target_metadata=None, on_version_apply=_record)
    with context.begin_transaction():  # the caller's transaction: nothing is committed here
        context.run_migrations()


run()
