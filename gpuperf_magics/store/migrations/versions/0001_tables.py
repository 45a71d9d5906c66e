"""Version 1: the meta, hardware, runs and iterations tables.

Revision ID: 1
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa
from alembic import op

from gpuperf_magics._version import __version__
from gpuperf_magics.store.tables import INT, MetaValue

revision = "1"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "meta",
        sa.Column("key", sa.Text, primary_key=True, nullable=False),
        sa.Column("value", MetaValue()),
    )
    op.create_table(
        "hardware",
        sa.Column("id", INT, sa.Identity(), primary_key=True),
        sa.Column("fingerprint", sa.Text, nullable=False, unique=True),
        sa.Column("gpu_name", sa.Text),
        sa.Column("cpu_model", sa.Text),
        sa.Column("info", sa.Text, nullable=False),
    )
    op.create_table(
        "runs",
        # AUTOINCREMENT on SQLite, an identity on PostgreSQL: ids of deleted runs are never
        # handed out again.
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
        *(sa.Column(name, sa.Text, nullable=False, server_default=sa.text("'{}'"))
          for name in ("arch", "hyper", "quality", "tags", "features")),
        sa.Column("notes", sa.Text, nullable=False, server_default=sa.text("'[]'")),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "iterations",
        sa.Column("run_id", INT, sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  primary_key=True, nullable=False),
        sa.Column("idx", INT, primary_key=True, nullable=False),
        sa.Column("duration_s", sa.Float, nullable=False),
        sa.Column("samples", INT),
        sa.Column("warmup", INT, nullable=False, server_default=sa.text("0")),
        sa.Column("skipped_step", INT, nullable=False, server_default=sa.text("0")),
        sa.Column("micro_batches", INT),
        sa.Column("phases", sa.Text),
        sqlite_with_rowid=False,
    )
    op.create_index("runs_network", "runs", ["network"])
    op.create_index("runs_created_at", "runs", ["created_at"])
    op.create_index("runs_hardware_id", "runs", ["hardware_id"])
    sqlite = op.get_bind().dialect.name == "sqlite"
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    revision_value: Any = 0 if sqlite else "0"  # untyped on SQLite: an INTEGER there
    meta = sa.table("meta", sa.column("key"), sa.column("value"))
    op.bulk_insert(meta, [
        {"key": "revision", "value": revision_value},
        {"key": "created_at", "value": now},
        {"key": "created_by", "value": f"gpuperf-magics {__version__}"},
    ])


def downgrade() -> None:
    raise NotImplementedError("a store is never downgraded: keep a backup instead")
