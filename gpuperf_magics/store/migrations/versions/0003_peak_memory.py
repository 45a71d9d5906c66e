"""Version 3: peak_memory_gb per run, the peak GPU memory of its tensors (GiB).

A nullable column: every existing run keeps its values and reads back with the peak unknown.

Revision ID: 3
Revises: 2
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "3"
down_revision = "2"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("peak_memory_gb", sa.Float))


def downgrade() -> None:
    raise NotImplementedError("a store is never downgraded: keep a backup instead")
