"""The store's schema versions: where a store keeps its version, and what this release writes.

The tables are :mod:`gpuperf_magics.store.tables` (SQLAlchemy Core); each change of them is one
Alembic step under ``gpuperf_magics/store/migrations/versions`` whose revision is the schema
version it brings a store to (``"1"``, ``"2"``, ``"3"``, ``"4"``). Never edit a step that has been
released: stores in the wild have already run it.

Where the version lives: an SQLite file keeps it in ``PRAGMA user_version`` (with ``PRAGMA
application_id`` marking the file as ours); a PostgreSQL database keeps it in the ``meta`` table
(keys ``schema_version`` and ``application``). Alembic's own ``alembic_version`` table follows
it (it is stamped from it before every upgrade), so that opening a store reads one pragma or one
table and imports neither Alembic nor its scripts unless the store is behind. SQLite files
migrate themselves on open; a server store only through ``gpuperf migrate URL``
(:func:`gpuperf_magics.store.postgres.migrate`), so that teammates on an older package are told
to upgrade instead of being locked out silently.

Adding a column
---------------
A new key of a run (``world_size``, ``global_batch_size`` ...) needs no migration: the nested
groups (hardware, arch, hyper, quality) are JSON, so one line in
:mod:`gpuperf_magics.columns` (e.g. ``world_size:int`` in the ``quality`` rows) makes it a
canonical, typed column of every frame, export and import. A new flat SQL column of ``runs``
takes one step (a copy of the last file under ``migrations/versions`` with
``op.add_column(...)``, its revision the next version), the column in ``tables.runs``, its name
in ``rows.RUN_COLUMNS`` (and ``rows.LATER_COLUMNS``), and :data:`LATEST_VERSION` + 1.
"""

from __future__ import annotations

from typing import NamedTuple

#: ``PRAGMA application_id`` of store files: the bytes "gpmg".
APPLICATION_ID = int.from_bytes(b"gpmg", "big")
#: ``meta`` value of key ``application`` in a server store.
APPLICATION = "gpuperf_magics"
#: Tables every store of version >= 1 has.
REQUIRED_TABLES = ("meta", "hardware", "runs", "iterations")
#: The schema version this release writes: the revision of the last migration (a test checks
#: that they agree, so that opening a current store needs no look at the migration scripts).
LATEST_VERSION = 4


class Migrated(NamedTuple):
    """Schema versions of a store before and after :meth:`Store.migrate`."""

    before: int
    after: int


def latest_version() -> int:
    """The schema version this release writes (the last migration's)."""
    return LATEST_VERSION
