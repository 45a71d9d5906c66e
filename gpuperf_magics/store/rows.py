"""A run as the rows a store holds, and its content-derived uid: plain values, no SQL.

What :mod:`~gpuperf_magics.store.records` writes and reads, what a sync copies and what schema
step 2 backfilled: kept apart from the statements so that the migrations, the reads and the
writes all compute a run's uid from one definition (a run has the same uid in every store).
"""

from __future__ import annotations

import getpass
import hashlib
import logging
import os
import socket
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any, NamedTuple, TypeVar

from gpuperf_magics.store.encoding import from_json, sql_value, to_json

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Values bound in one ``IN (...)`` list: SQLite before 3.32 refuses more than 999 parameters.
MAX_BOUND = 900

#: Columns of the runs table written from a record, in INSERT order (``run_uid``,
#: ``recorded_host`` and ``recorded_user`` follow them).
RUN_COLUMNS = (
    "created_at", "network", "batch_size", "iterations", "time_s", "status", "source", "gpu",
    "gpu_count", "device", "hardware_id", "it_median_s", "it_p90_s", "it_mean_s", "it_std_s",
    "samples_per_s", "warmup_iterations", "recorded_iterations", "error", "arch", "hyper",
    "quality", "tags", "features", "notes", "peak_memory_gb", "stopped_by",
)
#: Columns added after schema version 2. They enter a run's uid only when set, so that a run
#: without them (every run recorded before) keeps the uid it had: a table imported again, or a
#: run synced from a store of the older schema, is still recognised.
LATER_COLUMNS = ("peak_memory_gb", "stopped_by")
WRITTEN_COLUMNS = (*RUN_COLUMNS, "run_uid", "recorded_host", "recorded_user")
#: JSON columns of the runs table and the value an empty one stands for.
JSON_COLUMNS: dict[str, Any] = {
    "arch": {}, "hyper": {}, "quality": {}, "tags": {}, "features": {}, "notes": [],
}
ITERATION_FIELDS = ("idx", "duration_s", "samples", "warmup", "skipped_step", "micro_batches",
                    "phases")
#: The columns a run's uid is computed from (``hardware_id`` is local to a store).
UID_COLUMNS = tuple(n for n in RUN_COLUMNS if n != "hardware_id" and n not in LATER_COLUMNS)
_HW = RUN_COLUMNS.index("hardware_id")


class IterationRow(NamedTuple):
    """One row of the ``iterations`` table: ``run_id`` then :data:`ITERATION_FIELDS`.

    ``phases`` is the stored JSON text as read, or the dict it holds (None when the iteration
    was not split into phases) once parsed.
    """

    run_id: int
    idx: int
    duration_s: float
    samples: int | None
    warmup: bool
    skipped_step: bool
    micro_batches: int | None
    phases: Any


class Recorder(NamedTuple):
    """Who records runs in this process: the machine, and the login name on it."""

    host: str
    user: str


def chunked(values: Sequence[T], size: int = MAX_BOUND) -> Iterator[list[T]]:
    """``values`` in consecutive lists of at most ``size``, to bind one ``IN (...)`` each."""
    for start in range(0, len(values), size):
        yield list(values[start:start + size])


@lru_cache(maxsize=1)
def recorder() -> Recorder:
    """Host and user that record runs in this process: who to ask about a run later."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError, ImportError) as exc:  # no login name (no passwd entry)
        log.debug("no login name (%s): runs are recorded by the user id", exc)
        user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    return Recorder(socket.gethostname(), user)


def content_uid(row: Sequence[Any], hardware_info: str | None,
                iterations: Sequence[Sequence[Any]], occurrence: int = 0) -> str:
    """The stable id of a run: a hash of what is stored about it, the same in every store.

    Parameters
    ----------
    row : sequence
        What :func:`uid_content` makes of a run's stored values.
    hardware_info : str or None
        The hardware JSON.
    iterations : sequence of sequences
        ``ITERATION_FIELDS`` values as stored.
    occurrence : int
        0 for the first run of this content; k for its k-th identical repeat in one import
        (repeats of one configuration in a table are separate measurements).
    """
    payload: list[Any] = [list(row), hardware_info, [list(it) for it in iterations]]
    if occurrence:
        payload.append(occurrence)
    return hashlib.sha256(to_json(payload).encode()).hexdigest()[:32]


def json_text(value: Any, empty: Any, memo: dict[Any, str]) -> str:
    """The JSON text a JSON column stores for ``value`` (``empty`` stands for nothing)."""
    if isinstance(value, str):
        # JSON already (a row copied from another store): kept byte for byte, so that its
        # uid stays the same.
        return value
    if not value:
        return "[]" if isinstance(empty, list) else "{}"
    try:
        # Rows of one import or sync share most of their dicts: encode each once.
        key = (type(value), tuple(value.items()) if isinstance(value, dict) else tuple(value))
        hash(key)
    except TypeError:
        return to_json(value)
    text = memo.get(key)
    if text is None:
        text = memo[key] = to_json(value)
    return text


def run_row(record: dict[str, Any], memo: dict[Any, str] | None = None) -> list[Any]:
    """The stored values of a record (``Run.to_record()`` shape plus ``notes``), hardware_id
    left as None for the caller to fill."""
    memo = {} if memo is None else memo
    row: list[Any] = []
    for name in RUN_COLUMNS:
        value = record.get(name)
        if name in JSON_COLUMNS:
            row.append(json_text(value, JSON_COLUMNS[name], memo))
        else:
            row.append(None if name == "hardware_id" else sql_value(value))
    return row


def uid_content(values: dict[str, Any]) -> list[Any]:
    """What a run's uid hashes: the :data:`UID_COLUMNS` values, then ``[name, value]`` of each
    of :data:`LATER_COLUMNS` that is set."""
    content = [values[n] for n in UID_COLUMNS]
    content += [[n, values[n]] for n in LATER_COLUMNS if values.get(n) is not None]
    return content


class UidCounter:
    """Uids of the runs of one batch: the k-th repeat of one content gets its own uid."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def uid(self, content: Sequence[Any], hardware: str | None,
            iterations: Sequence[Sequence[Any]]) -> str:
        base = content_uid(content, hardware, iterations)
        count = self.seen.get(base, 0)
        self.seen[base] = count + 1
        return base if not count else content_uid(content, hardware, iterations, count)

    def of_row(self, row: list[Any], hardware: str | None,
               iterations: Sequence[Sequence[Any]]) -> str:
        """The uid of a :func:`run_row`."""
        return self.uid(uid_content(dict(zip(RUN_COLUMNS, row, strict=True))), hardware,
                        iterations)


def parse_run(names: list[str], row: Sequence[Any]) -> dict[str, Any]:
    """A row of the runs query as a run record with parsed JSON.

    Raises
    ------
    ValueError
        A JSON cell that does not parse (a tampered store), naming the run and the column.
    """
    record = dict(zip(names, row, strict=True))
    for name, empty in (*JSON_COLUMNS.items(), ("hardware", {})):
        if name not in record:
            continue
        try:
            value = from_json(record[name], empty)
        except ValueError:
            value = None
        if not isinstance(value, type(empty)):
            raise ValueError(
                f"run {record.get('run_id')}: column {name} holds {str(record[name])[:60]!r}, "
                f"not a JSON {type(empty).__name__}"
            )
        record[name] = value
    return record
