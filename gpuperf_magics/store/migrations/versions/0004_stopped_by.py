"""Version 4: stopped_by per run, why a profiled loop was ended early (``--stop-after``).

A nullable text column: ``"count"``, ``"precision"`` or ``"ceiling"`` for a run that
``--stop-after N`` or ``--stop-after auto`` stopped, empty for a loop that ended by itself.
Every existing run keeps its values and reads back as not stopped early (none could be).

Revision ID: 4
Revises: 3
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "4"
down_revision = "3"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("stopped_by", sa.Text))


def downgrade() -> None:
    raise NotImplementedError("a store is never downgraded: keep a backup instead")
