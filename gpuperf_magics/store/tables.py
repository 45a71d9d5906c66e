"""The store's tables as SQLAlchemy Core objects: what every statement of the store is built on.

This is the schema of the latest version (:data:`~gpuperf_magics.store.schema.LATEST_VERSION`);
the migrations under ``migrations/versions`` build it step by step, and a test checks that a
store made by them holds exactly these columns. Imported only once a store is opened, so that
``import gpuperf_magics`` does not pay for SQLAlchemy.

The two dialects differ where the old hand-written DDL had them differ: integers are BIGINT on
PostgreSQL (INTEGER on SQLite, whose ``INTEGER PRIMARY KEY`` is the rowid), ids are identities
there and AUTOINCREMENT rowids here (ids of deleted runs are never reused), ``meta.value`` is
untyped in SQLite (the revision stays an INTEGER) and TEXT on PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles

#: An integer column: BIGINT on PostgreSQL, INTEGER (the rowid's type) on SQLite.
INT = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


class MetaValue(sa.types.UserDefinedType[Any]):
    """``meta.value``: TEXT on PostgreSQL, no declared type on SQLite (any value kept as is)."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "TEXT"


@compiles(MetaValue, "sqlite")
def _untyped(element: Any, compiler: Any, **kw: Any) -> str:
    return ""


metadata = sa.MetaData()

meta = sa.Table(
    "meta", metadata,
    sa.Column("key", sa.Text, primary_key=True, nullable=False),
    sa.Column("value", MetaValue()),
)
hardware = sa.Table(
    "hardware", metadata,
    sa.Column("id", INT, sa.Identity(), primary_key=True),
    sa.Column("fingerprint", sa.Text, nullable=False, unique=True),
    sa.Column("gpu_name", sa.Text),
    sa.Column("cpu_model", sa.Text),
    sa.Column("info", sa.Text, nullable=False),
)
runs = sa.Table(
    "runs", metadata,
    sa.Column("id", INT, sa.Identity(), primary_key=True),
    sa.Column("created_at", sa.Text, nullable=False),
    sa.Column("network", sa.Text, nullable=False),
    sa.Column("batch_size", INT),
    sa.Column("iterations", INT, nullable=False),
    sa.Column("time_s", sa.Float, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("source", sa.Text, nullable=False),
    sa.Column("gpu", sa.Text),
    sa.Column("gpu_count", INT, nullable=False, server_default=sa.text("0")),
    sa.Column("device", sa.Text),
    sa.Column("hardware_id", INT, sa.ForeignKey("hardware.id")),
    *(sa.Column(name, sa.Float) for name in (
        "it_median_s", "it_p90_s", "it_mean_s", "it_std_s", "samples_per_s")),
    sa.Column("warmup_iterations", INT),
    sa.Column("recorded_iterations", INT),
    sa.Column("error", sa.Text),
    *(sa.Column(name, sa.Text, nullable=False, server_default=sa.text("'{}'")) for name in (
        "arch", "hyper", "quality", "tags", "features")),
    sa.Column("notes", sa.Text, nullable=False, server_default=sa.text("'[]'")),
    # Version 2.
    sa.Column("run_uid", sa.Text),
    sa.Column("recorded_host", sa.Text),
    sa.Column("recorded_user", sa.Text),
    # Version 3.
    sa.Column("peak_memory_gb", sa.Float),
    # Version 4.
    sa.Column("stopped_by", sa.Text),
    sa.Index("runs_network", "network"),
    sa.Index("runs_created_at", "created_at"),
    sa.Index("runs_hardware_id", "hardware_id"),
    sa.Index("runs_run_uid", "run_uid", unique=True),
    sqlite_autoincrement=True,
)
iterations = sa.Table(
    "iterations", metadata,
    sa.Column("run_id", INT, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True,
              nullable=False),
    sa.Column("idx", INT, primary_key=True, nullable=False),
    sa.Column("duration_s", sa.Float, nullable=False),
    sa.Column("samples", INT),
    sa.Column("warmup", INT, nullable=False, server_default=sa.text("0")),
    sa.Column("skipped_step", INT, nullable=False, server_default=sa.text("0")),
    sa.Column("micro_batches", INT),
    sa.Column("phases", sa.Text),
    sa.Index("iterations_run_id", "run_id"),
    sqlite_with_rowid=False,
)
