"""The :class:`Store`: profiled and imported runs in one SQLite file."""

from __future__ import annotations

import contextlib
import operator
import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from gpuperf_magics.store.connection import (
    ensure_schema,
    is_busy,
    is_read_only,
    open_connection,
    translate,
)
from gpuperf_magics.store.encoding import (
    format_timestamp,
    from_json,
    now_utc,
    parse_timestamp,
    sql_value,
    to_json,
)
from gpuperf_magics.store.errors import ANOTHER_STORE, RunNotFoundError, StoreError
from gpuperf_magics.store.paths import STORE_FILENAME, default_store_path
from gpuperf_magics.store.records import (
    INSERT_ITERATION,
    SELECT_ITERATIONS,
    SELECT_RUNS,
    bump_revision,
    insert_run,
    parse_run,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from gpuperf_magics.run import Run

__all__ = ["Store"]

T = TypeVar("T")

def _as_list(name: str, value: Any) -> list[Any]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        return [value]
    values = list(value)
    if any(isinstance(v, (list, tuple, set, dict)) for v in values):
        raise TypeError(f"{name}= takes a value or a list of values, not {value!r}")
    return values


def _since(value: Any) -> str:
    """Lower bound for ``created_at`` from a datetime, date, ISO string or timedelta."""
    if isinstance(value, timedelta):
        return format_timestamp(datetime.now(timezone.utc) - value)
    if not isinstance(value, (datetime, date, str)) and not hasattr(value, "to_pydatetime"):
        raise TypeError(f"since= takes a datetime, date, ISO-8601 string or timedelta, not "
                        f"{type(value).__name__}")
    try:
        return format_timestamp(parse_timestamp(value, naive="local"))
    except ValueError:
        raise ValueError(f"since={value!r} is not an ISO-8601 date or time, e.g. "
                         "'2024-05-01' or '2024-05-01T14:30'") from None


def _run_ids(run_id: Any) -> list[int]:
    values = run_id if isinstance(run_id, Iterable) and not isinstance(run_id, str) else [run_id]
    try:
        return [operator.index(v) for v in values]
    except TypeError:
        raise TypeError(f"run ids are integers (column run_id of Store.runs()), not "
                        f"{run_id!r}") from None


class Store:
    """Profiled and imported training runs in one SQLite file.

    Parameters
    ----------
    path : str or os.PathLike, optional
        The store file (another ``Store`` works too: it is path-like). Default:
        :func:`~gpuperf_magics.store.default_store_path` (``$GPUPERF_STORE``, else
        ``runs.sqlite`` in the per-user data folder). The file and
        its folder are created on the first write; reading a store that does not exist yet
        gives empty results and creates nothing.
    timeout : float, default 30
        Seconds to wait for another process's write lock before :class:`StoreError`.

    Attributes
    ----------
    path : Path
        Absolute path of the file.

    Notes
    -----
    Every method opens its own connection and closes it, so one ``Store`` can be shared by
    threads and survives ``fork``; several notebooks and scripts may write one file at once
    (WAL journal, ``BEGIN IMMEDIATE`` transactions, retries while the file is locked). Any
    failure of the file itself raises :class:`StoreError` with the path and what to do.

    Examples
    --------
    >>> store = Store(tmp_path / "runs.sqlite")          # doctest: +SKIP
    >>> run_id = store.save_run(run)                     # doctest: +SKIP
    >>> df = store.runs(network="resnet18", status="ok")  # doctest: +SKIP
    >>> X, y = df.drop(columns="time_s"), df["time_s"]   # doctest: +SKIP
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = 30.0):
        raw = default_store_path() if path is None else path
        text = os.fspath(raw)
        if text in ("", ":memory:") or text.startswith("file:"):
            raise ValueError(
                f"Store needs a file path, not {text!r}: the store is shared between "
                "processes, so it cannot live in memory; use e.g. tmp_path / 'runs.sqlite'"
            )
        # Absolute now, so that a notebook's %cd does not move the store.
        self.path = Path(os.path.abspath(os.path.expanduser(text)))
        self.timeout = float(timeout)
        self._ready = False

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    def __fspath__(self) -> str:
        # A Store is path-like, so code that takes "a path or a Store" can call Store(x).
        return str(self.path)

    # ------------------------------------------------------------------ plumbing
    def _execute(
        self,
        work: Callable[[sqlite3.Connection], T],
        *,
        write: bool,
        action: str,
        missing: Callable[[], T] | None = None,
        snapshot: bool = True,
    ) -> T:
        """Run ``work(conn)`` in one transaction, retrying while another process holds a lock.

        ``missing`` gives the result of a read when the file does not exist yet (nothing is
        created then); ``snapshot`` wraps a read in BEGIN/COMMIT (several statements).
        """
        if self.path.is_dir():
            raise StoreError(
                f"could not {action}: {self.path} is a folder, not a store file. Give a file "
                f"path such as {self.path / STORE_FILENAME}, or {ANOTHER_STORE}.",
                path=str(self.path),
            )
        if not write and missing is not None and not self.path.exists():
            return missing()
        deadline = time.monotonic() + self.timeout
        delay = 0.005
        schema_retry = True
        immutable = False
        while True:
            try:
                return self._attempt(
                    work, write=write, snapshot=snapshot, deadline=deadline, immutable=immutable
                )
            except sqlite3.OperationalError as exc:
                if not write and not immutable and is_read_only(exc):
                    # A store on a read-only share or folder: read it as an immutable file.
                    immutable = True
                    continue
                if is_busy(exc) and time.monotonic() < deadline:
                    # Jitter, so that processes that collided do not collide again.
                    pause = min(delay, max(deadline - time.monotonic(), 0.0))
                    time.sleep(pause * random.uniform(0.5, 1.5))
                    delay = min(delay * 2, 0.25)
                    continue
                if "no such table" in str(exc) and schema_retry:
                    # The file was replaced since this Store checked it: check again.
                    schema_retry = False
                    self._ready = False
                    continue
                raise translate(exc, self.path, action, self.timeout) from None
            except (sqlite3.Error, OSError) as exc:
                raise translate(exc, self.path, action, self.timeout) from None

    def _attempt(
        self,
        work: Callable[[sqlite3.Connection], T],
        *,
        write: bool,
        snapshot: bool,
        deadline: float,
        immutable: bool = False,
    ) -> T:
        if write:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = open_connection(
            self.path, max(deadline - time.monotonic(), 0.05), immutable=immutable
        )
        try:
            if immutable:
                ensure_schema(conn, self.path, read_only=True)
            elif not self._ready:
                ensure_schema(conn, self.path)
                self._ready = True
            if write or snapshot:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                result = work(conn)
                if conn.in_transaction:
                    conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    # The original error says more than a failed rollback would.
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise
            return result
        finally:
            conn.close()

    # ------------------------------------------------------------------ writing
    def save_run(self, run: Run) -> int:
        """Save a run with its hardware and every iteration, in one transaction.

        Parameters
        ----------
        run : Run
            A profiled run. Its ``created_at`` is set to now (UTC) when missing.

        Returns
        -------
        int
            The new run id, also set as ``run.run_id`` (and ``run.store_path``). A run that
            is already in this store (same ``store_path``, id still present) is not saved
            twice: its id is returned.

        Raises
        ------
        StoreError
            The file could not be written; ``err.run`` is ``run`` and ``run.run_id`` stays
            unset, so the caller can keep the run in memory and save it later.
        ValueError
            The run has no network name or an unreadable ``created_at``.
        """
        from gpuperf_magics.run import Run

        if not isinstance(run, Run):
            raise TypeError(f"save_run takes a gpuperf_magics.Run, not {type(run).__name__}")
        if not isinstance(run.network, str) or not run.network.strip():
            raise ValueError("the run has no network name: set run.network before saving")
        record = run.to_record()
        try:
            created = record["created_at"]
            record["created_at"] = (
                format_timestamp(parse_timestamp(created)) if created else now_utc()
            )
        except ValueError:
            raise ValueError(f"run.created_at {created!r} is not an ISO-8601 time") from None
        record["notes"] = [str(note) for note in run.notes]
        iterations = [
            (
                index,
                float(it.duration_s),
                sql_value(it.samples),
                int(bool(it.warmup)),
                int(bool(it.skipped_step)),
                sql_value(it.micro_batches),
                to_json(it.phases) if it.phases else None,
            )
            for index, it in enumerate(run.iterations)
        ]
        previous = run.run_id if run.store_path == str(self.path) else None

        def work(conn: sqlite3.Connection) -> int:
            if previous is not None and conn.execute(
                "SELECT 1 FROM runs WHERE id = ?", (previous,)
            ).fetchone():
                return previous
            run_id = insert_run(conn, record)
            conn.executemany(INSERT_ITERATION, [(run_id, *row) for row in iterations])
            bump_revision(conn)
            return run_id

        try:
            run_id = self._execute(work, write=True, action="save the run")
        except StoreError as err:
            err.run = run
            raise
        run.run_id = run_id
        run.store_path = str(self.path)
        run.created_at = record["created_at"]
        return run_id

    def delete(self, run_id: int | Iterable[int]) -> None:
        """Delete runs and their iterations.

        Parameters
        ----------
        run_id : int or iterable of int
            One id or several; all or nothing.

        Raises
        ------
        RunNotFoundError
            (a ``KeyError``) when an id is not in the store; nothing is deleted then.
        """
        ids = _run_ids(run_id)

        def work(conn: sqlite3.Connection) -> None:
            for one in ids:
                if not conn.execute("SELECT 1 FROM runs WHERE id = ?", (one,)).fetchone():
                    raise RunNotFoundError(one, str(self.path))
            for one in ids:
                # Explicit, though the foreign key cascades: a file opened elsewhere
                # without PRAGMA foreign_keys must not keep orphans.
                conn.execute("DELETE FROM iterations WHERE run_id = ?", (one,))
                conn.execute("DELETE FROM runs WHERE id = ?", (one,))
            conn.execute(
                "DELETE FROM hardware WHERE id NOT IN "
                "(SELECT hardware_id FROM runs WHERE hardware_id IS NOT NULL)"
            )
            bump_revision(conn)

        if not ids:
            return

        def nothing() -> None:
            raise RunNotFoundError(ids[0], str(self.path))

        if not self.path.exists():
            nothing()
        self._execute(work, write=True, action="delete runs")

    def import_table(
        self,
        table: pd.DataFrame | str | os.PathLike[str],
        mapping: Mapping[str, str | None] | None = None,
        *,
        network: str | None = None,
        gpu: str | None = None,
        source: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> list[int]:
        """Import measurements made elsewhere: one run per row, all rows or none.

        Parameters
        ----------
        table : DataFrame or path
            A DataFrame, or a ``.csv``/``.tsv``/``.parquet`` file (e.g. one written by
            :meth:`export`).
        mapping : dict, optional
            Table column → canonical column, e.g. ``{"step_time": "time_s",
            "local_bsz": "batch_size"}``; ``None`` as a value drops a column.
        network : str, optional
            Network of rows without a ``network`` column or value.
        gpu : str, optional
            GPU name of rows without a ``gpu`` column or value (None: CPU/unknown).
        source : str, optional
            ``source`` of rows without one; default ``"import:<file name>"`` (``"import"``
            for a DataFrame).
        tags : dict, optional
            Tags added to every imported row.

        Returns
        -------
        list of int
            The new run ids, in table order.

        Raises
        ------
        ImportValidationError
            (a ``ValueError``) listing every invalid cell by column and line/row; nothing is
            written then.

        Notes
        -----
        Required after the mapping: ``time_s`` (seconds, > 0 for ``ok`` rows; empty cells are
        errors), ``batch_size`` (a column of positive whole numbers; empty cells are stored
        as unknown) and a network (column or argument). ``iterations`` is how many
        iterations ``time_s`` covers; without that column every row counts 1, i.e.
        ``time_s`` is the time of one iteration (per-step traces). ``status`` defaults to
        ``ok``, ``gpu_count`` to 1 with a GPU and 0 without. A ``gpu`` name the hardware
        catalog cannot resolve is an error (with its close matches) unless the row gives
        ``gpu_fp32_tflops`` and ``gpu_bandwidth_gbs`` itself. Importing one table twice is
        not refused here (the ``gpuperf import`` command recognises a file by its content).

        Other columns: canonical ones (``gpu_*``, ``cpu_*``, ``sw_*``, ``arch_*``, hyper
        and quality names, ``tags`` as JSON) go where ``runs()`` shows them; any further
        numeric column becomes a feature, any further text column a tag. ``run_id`` and
        ``hardware_id`` of an export are ignored (ids are assigned anew).
        """
        import pandas as pd

        from gpuperf_magics.store.files import file_format, read_header, read_table
        from gpuperf_magics.store.importer import (
            RowLocator,
            prepare_records,
            source_name,
            text_columns,
        )

        if not isinstance(table, (pd.DataFrame, str, os.PathLike)):
            raise TypeError(
                f"import_table takes a DataFrame or a file path, not {type(table).__name__}"
            )
        path, name = source_name(table)
        if path is None:
            assert isinstance(table, pd.DataFrame)
            frame, fmt = table, None
        else:
            fmt = file_format(path)
            frame = read_table(path, text_columns(read_header(path), mapping))
        records = prepare_records(
            frame,
            mapping,
            network=network,
            gpu=gpu,
            source=source or (f"import:{name}" if path is not None else "import"),
            tags=tags,
            locator=RowLocator.for_source(table, frame, fmt),
            what=name,
        )
        if not records:
            return []

        def work(conn: sqlite3.Connection) -> list[int]:
            ids = [insert_run(conn, record) for record in records]
            bump_revision(conn)
            return ids

        return self._execute(work, write=True, action=f"import {name}")

    # ------------------------------------------------------------------ reading
    def token(self) -> tuple[str, int]:
        """``(created_at, revision)``: tells a re-created file from the one a cache saw.

        :meth:`revision` restarts when a store file is deleted and made again; the time the
        file was created does not.
        """

        def work(conn: sqlite3.Connection) -> tuple[str, int]:
            rows = dict(conn.execute(
                "SELECT key, value FROM meta WHERE key IN ('created_at', 'revision')"
            ).fetchall())
            return str(rows.get("created_at", "")), int(rows.get("revision", 0))

        return self._execute(
            work, write=False, action="read the store", missing=lambda: ("", 0), snapshot=False
        )

    def revision(self) -> int:
        """A counter that grows with every write (save, import, delete) by any process.

        One query; 0 for a store that does not exist yet. A cached model fitted at
        revision ``r`` is stale once ``revision() != r``.
        """

        def work(conn: sqlite3.Connection) -> int:
            row = conn.execute("SELECT value FROM meta WHERE key = 'revision'").fetchone()
            return int(row[0])

        return self._execute(
            work, write=False, action="read the store", missing=lambda: 0, snapshot=False
        )

    def runs(
        self,
        *,
        network: str | Iterable[str] | None = None,
        status: str | Iterable[str] | None = None,
        gpu: str | Iterable[str] | None = None,
        source: str | Iterable[str] | None = None,
        tags: Mapping[str, str] | None = None,
        since: datetime | date | str | timedelta | None = None,
        **columns: Any,
    ) -> pd.DataFrame:
        """One row per run, in the canonical columns (input of ``TrainingTimeModel.fit``).

        Parameters
        ----------
        network, status, gpu, source : str or list of str, optional
            Keep runs whose value is (one of) these. **All statuses are returned by
            default**; pass ``status="ok"`` for complete runs only (failed and interrupted
            runs may have partial times).
        tags : dict, optional
            Keep runs that carry all these ``key: value`` tags.
        since : datetime, date, str or timedelta, optional
            Keep runs created at or after this time (naive values are local time); a
            timedelta counts back from now.
        **columns
            Equality on any other column, e.g. ``batch_size=64`` or ``gpu_name="A100"``; a
            list keeps any of its values, ``None`` keeps empty cells.

        Returns
        -------
        pandas.DataFrame
            Sorted by ``run_id``. Columns: ``run_id, network, batch_size, iterations, time_s,
            status, gpu, gpu_count``; then ``source, created_at, device, it_median_s,
            it_p90_s, it_mean_s, it_std_s, samples_per_s, warmup_iterations,
            recorded_iterations, error``; then the ``gpu_*``, ``cpu_*``, ``sw_*``, ``arch_*``,
            hyper-parameter and quality columns (canonical ones always, extra keys after
            each group); ``tags`` (a dict per row); features last. An empty store gives
            zero rows with the canonical columns. ``time_s`` is the target:
            ``X, y = df.drop(columns="time_s"), df["time_s"]``.

        Raises
        ------
        ValueError
            A filter names no column of the frame.
        """
        import pandas as pd

        from gpuperf_magics.store.frame import runs_frame

        where: list[str] = []
        params: list[Any] = []
        for name, value in (("network", network), ("status", status), ("gpu", gpu),
                            ("source", source)):
            if value is None:
                continue
            values = _as_list(name, value)
            where.append(f"r.{name} IN ({', '.join('?' * len(values))})" if values else "0")
            params.extend(values)
        if since is not None:
            where.append("r.created_at >= ?")
            params.append(_since(since))
        sql = SELECT_RUNS + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY r.id"

        def work(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            cursor = conn.execute(sql, params)
            names = [d[0] for d in cursor.description]
            return [parse_run(names, row) for row in cursor]

        frame = runs_frame(
            self._execute(work, write=False, action="read runs", missing=list, snapshot=False)
        )
        keep = pd.Series(True, index=frame.index)
        if tags:
            wanted = {str(k): str(v) for k, v in tags.items()}
            keep &= frame["tags"].map(
                lambda t: all(t.get(k) == v for k, v in wanted.items())
            ).astype(bool)
        for name, value in columns.items():
            if name not in frame.columns:
                raise ValueError(
                    f"runs() cannot filter on {name!r}: no such column. Columns: "
                    f"{', '.join(frame.columns)}"
                )
            column = frame[name]
            if value is None:
                match = column.isna()
            elif isinstance(value, (list, tuple, set, frozenset)):
                match = column.isin(list(value))
            else:
                match = column == value
            keep &= match.fillna(False).astype(bool)
        return frame[keep.to_numpy()].reset_index(drop=True)

    def iterations(self, run_id: int) -> pd.DataFrame:
        """Every recorded iteration of one run, warm-up included.

        Returns
        -------
        pandas.DataFrame
            ``run_id, index, duration_s, samples, warmup, skipped_step, micro_batches`` and a
            ``phase_<name>`` column (seconds) per phase recorded with ``--phases``. Imported
            runs have no iterations (zero rows).

        Raises
        ------
        RunNotFoundError
            (a ``KeyError``) for an unknown id.
        """
        from gpuperf_magics.store.frame import iterations_frame

        (one,) = _run_ids(run_id)
        rows = self._read_iterations(one)
        return iterations_frame(one, rows)

    def _read_iterations(self, run_id: int) -> list[tuple[Any, ...]]:
        def work(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            if not conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone():
                raise RunNotFoundError(run_id, str(self.path))
            return [
                (*row[:6], from_json(row[6], None))
                for row in conn.execute(SELECT_ITERATIONS, (run_id,))
            ]

        def nothing() -> list[tuple[Any, ...]]:
            raise RunNotFoundError(run_id, str(self.path))

        return self._execute(work, write=False, action="read iterations", missing=nothing)

    def get_run(self, run_id: int) -> Run:
        """The stored run as a :class:`~gpuperf_magics.run.Run`, iterations included.

        Imported runs come back without iterations (only their totals were imported), so
        their ``Run.time_s`` is 0; use ``runs()`` for their measured times.

        Raises
        ------
        RunNotFoundError
            (a ``KeyError``) for an unknown id.
        """
        from gpuperf_magics.run import IterationRecord, Run

        (one,) = _run_ids(run_id)

        def work(conn: sqlite3.Connection) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
            cursor = conn.execute(SELECT_RUNS + " WHERE r.id = ?", (one,))
            row = cursor.fetchone()
            if row is None:
                raise RunNotFoundError(one, str(self.path))
            record = parse_run([d[0] for d in cursor.description], row)
            return record, conn.execute(SELECT_ITERATIONS, (one,)).fetchall()

        def nothing() -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
            raise RunNotFoundError(one, str(self.path))

        record, rows = self._execute(work, write=False, action="read a run", missing=nothing)
        return Run(
            network=record["network"],
            status=record["status"],
            iterations=[
                IterationRecord(
                    index=idx,
                    duration_s=duration,
                    samples=samples,
                    warmup=bool(warmup),
                    phases=from_json(phases, None),
                    skipped_step=bool(skipped),
                    micro_batches=micro,
                )
                for idx, duration, samples, warmup, skipped, micro, phases in rows
            ],
            batch_size=record["batch_size"],
            device=record["device"] or ("cuda" if record["gpu"] else "cpu"),
            gpu=record["gpu"],
            gpu_count=record["gpu_count"],
            hardware=record["hardware"],
            architecture=record["arch"],
            hyper=record["hyper"],
            quality=record["quality"],
            tags=record["tags"],
            features=record["features"],
            notes=record["notes"],
            error=record["error"],
            created_at=record["created_at"],
            source=record["source"],
            run_id=record["run_id"],
            store_path=str(self.path),
        )

    def export(self, path: str | os.PathLike[str], **filters: Any) -> Path:
        """Write ``runs(**filters)`` to a CSV or Parquet file, chosen by the suffix.

        Parameters
        ----------
        path : str or os.PathLike
            ``*.csv`` (also ``.csv.gz`` ...), ``*.tsv`` or ``*.parquet`` (needs pyarrow).
        **filters
            As for :meth:`runs`.

        Returns
        -------
        Path
            The file written. ``tags`` (and any other dict/list cell) is JSON text, which
            :meth:`import_table` reads back; iterations are not exported
            (:meth:`iterations` gives them per run).
        """
        from gpuperf_magics.store.files import file_format, write_table

        target = Path(os.path.expanduser(os.fspath(path)))
        file_format(target)  # reject an unknown suffix before reading the store
        return write_table(self.runs(**filters), target)
