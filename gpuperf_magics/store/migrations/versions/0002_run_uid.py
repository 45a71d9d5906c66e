"""Version 2: a content-derived run_uid (unique), recorded_host and recorded_user per run.

Revision ID: 2
Revises: 1
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from gpuperf_magics.store.rows import ITERATION_FIELDS, UID_COLUMNS, UidCounter

revision = "2"
down_revision = "1"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for name in ("run_uid", "recorded_host", "recorded_user"):
        op.add_column("runs", sa.Column(name, sa.Text))
    _backfill_uids(op.get_bind())
    # Unique: two machines syncing the same run into one store cannot both insert it.
    op.create_index("runs_run_uid", "runs", ["run_uid"], unique=True)
    op.create_index("iterations_run_id", "iterations", ["run_id"])


def _backfill_uids(conn: Any) -> None:
    """Give every run of a version 1 store its content uid (the uid the insert of that run
    computes today: the columns of later steps do not exist yet, and are unset in such runs)."""
    runs = sa.table("runs", sa.column("id"), sa.column("hardware_id"), sa.column("run_uid"),
                    *(sa.column(n) for n in UID_COLUMNS))
    hardware = sa.table("hardware", sa.column("id"), sa.column("info"))
    iterations = sa.table("iterations", sa.column("run_id"),
                          *(sa.column(n) for n in ITERATION_FIELDS))
    rows = conn.execute(
        sa.select(runs.c.id, *(runs.c[n] for n in UID_COLUMNS), hardware.c.info)
        .select_from(runs.outerjoin(hardware, hardware.c.id == runs.c.hardware_id))
        .order_by(runs.c.id)).all()
    its: dict[int, list[tuple[Any, ...]]] = {}
    for run_id, *values in conn.execute(
            sa.select(iterations.c.run_id, *(iterations.c[n] for n in ITERATION_FIELDS))
            .order_by(iterations.c.run_id, iterations.c.idx)).all():
        its.setdefault(int(run_id), []).append(tuple(values))
    counter = UidCounter()
    updates = [{"uid": counter.uid(values[:-1], values[-1], its.get(int(run_id), [])),
                "rid": run_id} for run_id, *values in rows]
    if updates:
        conn.execute(sa.update(runs).where(runs.c.id == sa.bindparam("rid"))
                     .values(run_uid=sa.bindparam("uid")), updates)


def downgrade() -> None:
    raise NotImplementedError("a store is never downgraded: keep a backup instead")
