"""Alembic migrations of the store, run programmatically (users need no ``alembic.ini``).

Imported only when a store's schema is behind (a new store, or one of an older release), so
that opening a current store never imports Alembic. Each step's revision is the schema version
it brings a store to; ``env.py`` writes that version where the store keeps it (``PRAGMA
user_version`` or the ``meta`` table) after each step, in the caller's transaction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _config(conn: Any) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(HERE))
    config.attributes["connection"] = conn
    return config


def upgrade(conn: Any, current: int) -> int:
    """Bring the store on ``conn`` from schema version ``current`` to the latest.

    Parameters
    ----------
    conn : sqlalchemy.engine.Connection
        Holding the caller's write transaction (``BEGIN IMMEDIATE`` on SQLite, the advisory
        lock on PostgreSQL); nothing here commits.
    current : int
        The version the store says it has. Alembic's version table is stamped with it first,
        so a store of a release before Alembic (no such table) upgrades in place, and the
        version the store keeps stays the one that counts.

    Returns
    -------
    int
        The version the store has once the caller commits.
    """
    from alembic import command

    from gpuperf_magics.store.schema import LATEST_VERSION

    config = _config(conn)
    if current:
        command.stamp(config, str(current), purge=True)
    command.upgrade(config, str(LATEST_VERSION))
    return LATEST_VERSION


def head() -> int:
    """The revision of the last step, as a schema version (for the test that it is the
    latest version)."""
    from alembic.script import ScriptDirectory

    heads = ScriptDirectory(str(HERE)).get_heads()
    assert len(heads) == 1, heads
    return int(heads[0])
