"""The run store: profiled and imported training runs in an SQLite file or on PostgreSQL.

:class:`Store` saves :class:`~gpuperf_magics.run.Run` objects (hardware, run, iterations),
imports tables measured elsewhere, and returns the canonical table (one row per measured
configuration) that :class:`~gpuperf_magics.TrainingTimeModel` fits::

    store = Store()                      # $GPUPERF_STORE or the per-user data folder
    team = Store("postgresql://ann@db.lab:5432/gpuperf?sslmode=require")
    store.save_run(run)
    store.import_table("traces.csv", {"step_time": "time_s", "bsz": "batch_size"},
                       network="bert", gpu="A100")
    df = store.runs(status="ok")
    X, y = df.drop(columns="time_s"), df["time_s"]
    store.sync_to(team)                  # copies the runs the team store lacks

pandas is imported only by the methods that return or read tables, SQLAlchemy by the first
operation on a store, Alembic only when a store's schema must be created or upgraded.
"""

from __future__ import annotations

from gpuperf_magics.columns import CANONICAL_COLUMNS, FIRST_COLUMNS
from gpuperf_magics.store.errors import (
    ImportValidationError,
    RunNotFoundError,
    StoreError,
    StoreNotFoundError,
    StoreVersionError,
)
from gpuperf_magics.store.fingerprints import ImportedFile
from gpuperf_magics.store.paths import default_store_path, fallback_store_path, user_data_dir
from gpuperf_magics.store.schema import latest_version
from gpuperf_magics.store.store import Store
from gpuperf_magics.store.sync import SyncResult

__all__ = [
    "CANONICAL_COLUMNS",
    "FIRST_COLUMNS",
    "ImportValidationError",
    "ImportedFile",
    "RunNotFoundError",
    "Store",
    "StoreError",
    "StoreNotFoundError",
    "StoreVersionError",
    "SyncResult",
    "default_store_path",
    "fallback_store_path",
    "latest_version",
    "user_data_dir",
]
