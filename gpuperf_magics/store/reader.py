"""A store opened for reading: where it is, its transactions, and every read of its runs.

:class:`StoreReader` resolves a path, URL or ``Store`` to one SQLite file or server, runs each
unit of work in one transaction (retried while another writer holds a lock) and reads runs
back (``runs``, ``iterations``, ``get_run``, ``export``, ``token``, ``revision``).
:class:`~gpuperf_magics.store.store.Store` adds the writes; use that class, which documents
the parameters.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from gpuperf_magics.store.arguments import column_list, run_ids
from gpuperf_magics.store.backends import PostgresBackend, SqliteBackend
from gpuperf_magics.store.errors import (
    ANOTHER_STORE,
    CorruptRow,
    RunNotFoundError,
    StoreError,
    StoreNotFoundError,
)
from gpuperf_magics.store.location import Location, parse_location
from gpuperf_magics.store.paths import ENV_VAR, default_store_path

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from gpuperf_magics.run import Run
    from gpuperf_magics.store.queries import StoredRun
    from gpuperf_magics.store.rows import IterationRow

__all__ = ["StoreReader", "StoreToken"]

T = TypeVar("T")


class StoreToken(NamedTuple):
    """What :meth:`Store.token` tells apart: a store made again restarts its revision, but
    not at the time it was first created."""

    created_at: str
    revision: int


#: Masked display -> full URL of the server stores opened in this process, so that a run's
#: ``store_path`` (masked) still finds its store for ``run.save()``; memory only.
_OPENED: dict[str, str] = {}


class StoreReader:
    """A store opened for reading: :class:`~gpuperf_magics.store.store.Store` without the
    writes. Its parameters and attributes are documented there."""

    def __init__(self, path: str | os.PathLike[str] | StoreReader | None = None, *,
                 timeout: float | None = None, must_exist: bool = False):
        if isinstance(path, StoreReader):
            location = path._location
            # Store(store) is how the API takes "a path or a Store": it keeps the timeout the
            # caller chose (it used to fall back to 30 s, so Store(p, timeout=2) waited 30).
            timeout = float(path.timeout) if timeout is None else timeout
        else:
            raw = default_store_path() if path is None else path
            if not isinstance(raw, (str, os.PathLike)):
                raise TypeError(f"Store takes a path or a postgresql:// URL, not "
                                f"{type(raw).__name__}")
            text = os.fspath(raw)
            location = parse_location(_OPENED.get(text, text))
        self._location: Location = location
        self.kind = location.kind
        self.path: Path | str = location.path if location.path is not None else location.display
        if location.kind == "postgresql":
            _OPENED[location.display] = location.url
        self.timeout: float = 30.0 if timeout is None else float(timeout)
        if not self.timeout >= 0:
            raise ValueError(f"timeout must be a number of seconds >= 0, not {timeout!r}")
        self._backend: SqliteBackend | PostgresBackend = (
            SqliteBackend(location.path) if location.path is not None
            else PostgresBackend(location))
        if must_exist and not self._backend.exists():
            raise self._not_found(path)

    def _not_found(self, given: Any) -> StoreNotFoundError:
        """The error for a store file that is not there, naming where its path came from."""
        if given is not None:
            return StoreNotFoundError.for_path(self._shown, "given")
        from_env = bool(os.environ.get(ENV_VAR, "").strip())
        return StoreNotFoundError.for_path(self._shown, "env" if from_env else "default")

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    def __fspath__(self) -> str:
        # A file Store is path-like, so code that takes "a path or a Store" can call Store(x).
        if self._location.path is None:
            raise TypeError(f"the server store {self.path} has no file path")
        return str(self._location.path)

    @property
    def _shown(self) -> str:
        return self._location.display

    # ------------------------------------------------------------------ plumbing
    def _execute(
        self,
        work: Callable[[Any], T],
        *,
        write: bool,
        action: str,
        missing: Callable[[], T] | None = None,
        snapshot: bool = True,
    ) -> T:
        """Run ``work(conn)`` in one transaction, retrying while another writer holds a lock.

        ``missing`` gives the result of a read when the file does not exist yet (nothing is
        created then); ``snapshot`` wraps a read in one transaction (several statements).
        """
        try:
            return self._backend.run(work, write=write, action=action, timeout=self.timeout,
                                     missing=missing, snapshot=snapshot)
        except CorruptRow as exc:
            raise self._corrupt(exc) from None

    def _corrupt(self, exc: Exception) -> StoreError:
        where = self._shown
        return StoreError(
            f"the store {where} is damaged: {exc}. Restore it from a backup or a synced copy, "
            f"or delete that run (Store.delete(run_id)); or {ANOTHER_STORE}.", path=where,
        )

    # ------------------------------------------------------------------ reading
    def token(self) -> StoreToken:
        """``StoreToken(created_at, revision)``: tells a re-created store from the one a cache
        saw.

        :meth:`revision` restarts when a store file is deleted and made again; the time the
        file was created does not.
        """

        def work(conn: Any) -> StoreToken:
            from gpuperf_magics.store.records import SELECT_TOKEN

            rows = dict(conn.execute(SELECT_TOKEN).all())
            return StoreToken(str(rows.get("created_at", "")),
                              self._revision_value(rows.get("revision")))

        return self._execute(work, write=False, action="read the store",
                             missing=lambda: StoreToken("", 0), snapshot=False)

    def _revision_value(self, value: Any) -> int:
        try:
            return int(value)
        except (TypeError, ValueError):
            raise self._corrupt(ValueError(
                f"the revision row of table meta holds {value!r}, not a count")) from None

    def revision(self) -> int:
        """A counter that grows with every write (save, import, delete) by any process.

        One query; 0 for a store that does not exist yet. A cached model fitted at
        revision ``r`` is stale once ``revision() != r``.
        """

        def work(conn: Any) -> int:
            from gpuperf_magics.store.records import SELECT_REVISION

            row = conn.execute(SELECT_REVISION).first()
            return self._revision_value(None if row is None else row[0])

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
        columns: Sequence[str] | None = None,
        **where: Any,
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
        columns : list of str, optional
            Only these columns, in this order (much faster on large stores: the other
            columns are not read).
        **where
            Equality on any other column, e.g. ``batch_size=64`` or ``gpu_name="A100"``; a
            list keeps any of its values, ``None`` keeps empty cells.

        Returns
        -------
        pandas.DataFrame
            Sorted by ``run_id``. Columns: ``run_id, network, batch_size, iterations, time_s,
            status, gpu, gpu_count``; then ``source, created_at, device, it_median_s,
            it_p90_s, it_mean_s, it_std_s, samples_per_s, warmup_iterations,
            recorded_iterations, error, run_uid, recorded_host, recorded_user,
            peak_memory_gb, stopped_by``; then the
            ``gpu_*``, ``cpu_*``, ``sw_*``, ``arch_*``, hyper-parameter and quality columns
            (canonical ones always, extra keys after each group); ``tags`` (a dict per row);
            features last. An empty store gives zero rows with the canonical columns.
            ``time_s`` is the target: ``X, y = df.drop(columns="time_s"), df["time_s"]``.

        Raises
        ------
        ValueError
            A filter or a column names no column of the frame.

        Notes
        -----
        Filters on the runs table's own columns, on ``tags`` and on ``since`` run in SQL; a
        filter on a hardware, architecture, hyper-parameter or feature column is applied to
        the rows those select.
        """
        from gpuperf_magics.store.queries import RunRows, read_runs, runs_frame, runs_query

        columns = column_list(columns)
        query = runs_query(self.kind, network=network, status=status, gpu=gpu, source=source,
                           tags=tags, since=since, columns=columns, where=where)
        got = self._execute(partial(read_runs, query=query), write=False, action="read runs",
                            missing=lambda: RunRows(query.names, []), snapshot=False)
        try:
            return runs_frame(query, got, columns)
        except CorruptRow as exc:
            raise self._corrupt(exc) from None

    def iterations(self, run_id: int | Iterable[int]) -> pd.DataFrame:
        """Every recorded iteration of one run (or of several, in one query), warm-up included.

        Parameters
        ----------
        run_id : int or iterable of int
            One id, or several (the frame then holds them all, ordered by run and index).

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
        from gpuperf_magics.run import PHASES
        from gpuperf_magics.store.frame import iterations_frame

        ids = run_ids(run_id)
        return iterations_frame(self._read_iterations(ids), PHASES)

    def _read_iterations(self, run_ids: list[int]) -> list[IterationRow]:
        def nothing() -> list[IterationRow]:
            raise RunNotFoundError(run_ids[0], self._shown)

        from gpuperf_magics.store.queries import read_iterations

        if not run_ids:
            return []
        return self._execute(partial(read_iterations, run_ids=run_ids, shown=self._shown),
                             write=False, action="read iterations", missing=nothing)

    def get_run(self, run_id: int) -> Run:
        """The stored run as a :class:`~gpuperf_magics.run.Run`, iterations included.

        Imported runs come back without iterations (only their totals were imported), so
        their ``Run.time_s`` is 0; use ``runs()`` for their measured times.

        Raises
        ------
        RunNotFoundError
            (a ``KeyError``) for an unknown id.
        """
        from gpuperf_magics.store.queries import read_run

        (one,) = run_ids(run_id)

        def nothing() -> StoredRun:
            raise RunNotFoundError(one, self._shown)

        stored = self._execute(partial(read_run, run_id=one, shown=self._shown), write=False,
                               action="read a run", missing=nothing)
        try:
            return _as_run(stored, str(self.path))
        except (CorruptRow, TypeError, ValueError) as exc:
            raise self._corrupt(exc) from None

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
            :meth:`import_table` reads back. Iterations are not exported (one row per
            run; :meth:`iterations` gives them): a re-imported run is learnt from its
            ``time_s``, every steady iteration with any stall in it, where the original is
            learnt from the trimmed mean of its iterations (the median on a busy machine),
            so predictions from a round trip can differ (2.2× for one 0.5 s stall among
            twenty 20 ms iterations). To move runs whole, copy the file or use
            :meth:`sync_to` (``gpuperf sync``). In CSV/TSV, text cells a spreadsheet
            would run as a formula (starting with ``=``, ``+``, ``-``, ``@``) are written
            with a leading ``'``, which :meth:`import_table` removes.
        """
        from gpuperf_magics.store.files import file_format, write_table

        target = Path(os.path.expanduser(os.fspath(path)))
        file_format(target)  # reject an unknown suffix before reading the store
        return write_table(self.runs(**filters), target)


def _as_run(stored: StoredRun, store_path: str) -> Run:
    """The :class:`~gpuperf_magics.run.Run` a stored run was, iterations included.

    Raises
    ------
    CorruptRow, TypeError, ValueError
        A value the run cannot hold (a tampered store).
    """
    from gpuperf_magics.run import IterationRecord, Run
    from gpuperf_magics.store.queries import phases

    record = stored.record
    return Run(
        network=record["network"],
        status=record["status"],
        iterations=[
            IterationRecord(
                index=it.idx,
                duration_s=float(it.duration_s),
                samples=it.samples,
                warmup=bool(it.warmup),
                phases=phases(it.run_id, it.phases),
                skipped_step=bool(it.skipped_step),
                micro_batches=it.micro_batches,
            )
            for it in stored.iterations
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
        peak_memory_gb=record["peak_memory_gb"],
        stopped_by=record.get("stopped_by"),
        created_at=record["created_at"],
        source=record["source"],
        run_id=record["run_id"],
        store_path=store_path,
    )
