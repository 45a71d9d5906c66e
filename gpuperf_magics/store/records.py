"""SQL for run records: the statements, inserting a record, parsing a selected row."""

from __future__ import annotations

import sqlite3
from typing import Any

from gpuperf_magics.store.encoding import fingerprint, from_json, sql_value, to_json

__all__ = [
    "INSERT_ITERATION",
    "JSON_COLUMNS",
    "RUN_COLUMNS",
    "SELECT_ITERATIONS",
    "SELECT_RUNS",
    "bump_revision",
    "hardware_id",
    "insert_run",
    "parse_run",
]

#: Columns of the runs table written from a record, in INSERT order.
RUN_COLUMNS = (
    "created_at", "network", "batch_size", "iterations", "time_s", "status", "source", "gpu",
    "gpu_count", "device", "hardware_id", "it_median_s", "it_p90_s", "it_mean_s", "it_std_s",
    "samples_per_s", "warmup_iterations", "recorded_iterations", "error", "arch", "hyper",
    "quality", "tags", "features", "notes",
)
#: JSON columns of the runs table and the value an empty one stands for.
JSON_COLUMNS: dict[str, Any] = {
    "arch": {}, "hyper": {}, "quality": {}, "tags": {}, "features": {}, "notes": [],
}
INSERT_RUN = (
    f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(RUN_COLUMNS))})"
)
INSERT_ITERATION = (
    "INSERT INTO iterations (run_id, idx, duration_s, samples, warmup, skipped_step, "
    "micro_batches, phases) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
SELECT_RUNS = """
    SELECT r.id AS run_id, r.network, r.batch_size, r.iterations, r.time_s, r.status, r.gpu,
           r.gpu_count, r.source, r.created_at, r.device, r.it_median_s, r.it_p90_s,
           r.it_mean_s, r.it_std_s, r.samples_per_s, r.warmup_iterations,
           r.recorded_iterations, r.error, r.arch, r.hyper, r.quality, r.tags, r.features,
           r.notes, h.info AS hardware
    FROM runs AS r LEFT JOIN hardware AS h ON h.id = r.hardware_id
"""
SELECT_ITERATIONS = (
    "SELECT idx, duration_s, samples, warmup, skipped_step, micro_batches, phases "
    "FROM iterations WHERE run_id = ? ORDER BY idx"
)


def bump_revision(conn: sqlite3.Connection) -> None:
    conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'revision'")


def hardware_id(conn: sqlite3.Connection, hardware: dict[str, Any]) -> int | None:
    """Id of the hardware row equal to ``hardware``, inserted when new (None when empty)."""
    if not hardware:
        return None
    key = fingerprint(hardware)
    conn.execute(
        "INSERT OR IGNORE INTO hardware (fingerprint, gpu_name, cpu_model, info) "
        "VALUES (?, ?, ?, ?)",
        (key, sql_value(hardware.get("gpu_name")), sql_value(hardware.get("cpu_model")),
         to_json(hardware)),
    )
    return int(conn.execute("SELECT id FROM hardware WHERE fingerprint = ?", (key,)).fetchone()[0])


def insert_run(conn: sqlite3.Connection, record: dict[str, Any]) -> int:
    """Insert one run record (``Run.to_record()`` shape plus ``notes``); returns its id."""
    values = dict(record, hardware_id=hardware_id(conn, record.get("hardware") or {}))
    row = [
        to_json(values.get(name) or JSON_COLUMNS[name]) if name in JSON_COLUMNS
        else sql_value(values.get(name))
        for name in RUN_COLUMNS
    ]
    cursor = conn.execute(INSERT_RUN, row)
    assert cursor.lastrowid is not None
    return int(cursor.lastrowid)


def parse_run(names: list[str], row: tuple[Any, ...]) -> dict[str, Any]:
    """A row of ``SELECT_RUNS`` as a run record with parsed JSON."""
    record = dict(zip(names, row, strict=True))
    for name, empty in JSON_COLUMNS.items():
        record[name] = from_json(record[name], empty)
    record["hardware"] = from_json(record["hardware"], {})
    return record
