"""The :class:`Store`: profiled and imported runs in an SQLite file or on a PostgreSQL server."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from gpuperf_magics.store.backends import PostgresBackend, SqliteBackend
from gpuperf_magics.store.connection import chunked, translate
from gpuperf_magics.store.encoding import (
    format_timestamp,
    from_json,
    now_utc,
    parse_timestamp,
    sql_value,
    to_json,
)
from gpuperf_magics.store.errors import (
    ANOTHER_STORE,
    RunNotFoundError,
    StoreError,
    StoreNotFoundError,
)
from gpuperf_magics.store.location import Location, parse_location
from gpuperf_magics.store.paths import (
    ENV_VAR,
    default_store_path,
    fallback_store_path,
)
from gpuperf_magics.store.queries import (
    column_list,
    filter_frame,
    run_ids,
    runs_query,
    select_columns,
)
from gpuperf_magics.store.records import (
    ITERATION_FIELDS,
    RUN_SELECT,
    SELECT_ITERATIONS,
    IterationRow,
    bump_revision,
    insert_runs,
    parse_run,
    select_runs,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from gpuperf_magics.run import Run
    from gpuperf_magics.store.schema import Migrated
    from gpuperf_magics.store.sync import SyncResult

__all__ = ["Store", "StoreToken"]

T = TypeVar("T")


class StoreToken(NamedTuple):
    """What :meth:`Store.token` tells apart: a store made again restarts its revision, but
    not at the time it was first created."""

    created_at: str
    revision: int


#: Masked display -> full URL of the server stores opened in this process, so that a run's
#: ``store_path`` (masked) still finds its store for ``run.save()``; memory only.
_OPENED: dict[str, str] = {}


class Store:
    """Profiled and imported training runs, in an SQLite file or on a PostgreSQL server.

    Parameters
    ----------
    path : str, os.PathLike or Store, optional
        The store file, ``sqlite:///path``, or a server URL
        ``postgresql://user@host:5432/dbname?sslmode=require`` (needs
        ``pip install 'gpuperf-magics[postgres]'``; the password from ``~/.pgpass``,
        ``PGPASSWORD`` or ``PGSERVICE`` rather than the URL). Another ``Store`` works too.
        Default: :func:`~gpuperf_magics.store.default_store_path` (``$GPUPERF_STORE``, else
        ``runs.sqlite`` in the per-user data folder). A file and its folder are created on
        the first write (readable by their owner only); reading a file that does not exist
        yet gives empty results and creates nothing.
    timeout : float, default 30
        Seconds to wait for another writer's lock (and at most for a server to answer)
        before :class:`StoreError`. ``Store(other_store)`` keeps ``other_store``'s timeout.
    must_exist : bool, default False
        Raise :class:`StoreNotFoundError` now if the SQLite file does not exist, instead of
        reading it as an empty store: for code that only reads (``gpuperf runs``,
        ``%predict_time``), where a mistyped path would otherwise look like a store without
        runs. A server store is checked by its first read, as always.

    Attributes
    ----------
    path : Path or str
        Absolute path of the file; for a server store, its URL with the password masked.
    kind : str
        ``"sqlite"`` or ``"postgresql"``.

    Notes
    -----
    Every method opens its own connection and closes it, so one ``Store`` can be shared by
    threads and survives ``fork``; several notebooks, scripts and machines may write one store
    at once (SQLite: WAL journal, ``BEGIN IMMEDIATE`` transactions, retries while the file is
    locked; PostgreSQL: transactions, retried on conflicts). Any failure of the store itself
    raises :class:`StoreError` with the store and what to do, passwords masked.

    Examples
    --------
    >>> store = Store(tmp_path / "runs.sqlite")          # doctest: +SKIP
    >>> run_id = store.save_run(run)                     # doctest: +SKIP
    >>> df = store.runs(network="resnet18", status="ok")  # doctest: +SKIP
    >>> X, y = df.drop(columns="time_s"), df["time_s"]   # doctest: +SKIP
    """

    def __init__(self, path: str | os.PathLike[str] | Store | None = None, *,
                 timeout: float | None = None, must_exist: bool = False):
        if isinstance(path, Store):
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
        where = self._shown
        origin, hint = "", "check the path (a store is created by the first run saved to it), or "
        if given is None and os.environ.get(ENV_VAR, "").strip():
            origin = f" (from ${ENV_VAR})"
        elif given is None:
            origin = " (the default store)"
            hint = ("nothing has been profiled or imported into it yet: profile a cell with "
                    "%%profile_training or import a table with gpuperf import; or ")
        return StoreNotFoundError(
            f"no store at {where}{origin}: the file does not exist; {hint}{ANOTHER_STORE}.",
            path=where,
        )

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
        from gpuperf_magics.store.frame import CorruptRow

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
            The run id in this store, also set as ``run.run_id`` (and ``run.store_path``).
            A run already in this store (same content, hence same ``run_uid``) is not saved
            twice: its id is returned.

        Raises
        ------
        StoreError
            The store could not be written; ``err.run`` is ``run`` and ``run.run_id`` stays
            unset, so the caller can keep the run in memory and save it later. When a server
            could not be reached, the run is also kept in a local fallback file
            (``err.fallback``; ``$GPUPERF_FALLBACK_STORE`` or ``unsynced.sqlite`` in the
            per-user folder), and the message says how to push it later.
        ValueError
            The run has no network name or an unreadable ``created_at``.
        """
        from gpuperf_magics.run import Run

        if not isinstance(run, Run):
            raise TypeError(f"save_run takes a gpuperf_magics.Run, not {type(run).__name__}")
        if not isinstance(run.network, str) or not run.network.strip():
            raise ValueError("the run has no network name: set run.network before saving")
        created = run.created_at
        try:
            # Fixed before the first attempt, so that a retry or a copy has the same uid.
            stamp = format_timestamp(parse_timestamp(created)) if created else now_utc()
        except ValueError:
            raise ValueError(f"run.created_at {created!r} is not an ISO-8601 time") from None
        run.created_at = stamp
        record = run.to_record()
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

        def work(conn: Any) -> int:
            if previous is not None and conn.execute(
                "SELECT 1 FROM runs WHERE id = ?", (previous,)
            ).fetchone():
                return previous
            (inserted,) = insert_runs(conn, [record], [iterations])
            if inserted.new:
                bump_revision(conn)
            return inserted.run_id

        try:
            run_id = self._execute(work, write=True, action="save the run")
        except StoreError as err:
            err.run = run
            if self.kind == "postgresql" and err.kind == "unreachable":
                self._keep_locally(run, err)
            raise
        run.run_id = run_id
        run.store_path = str(self.path)
        return run_id

    def _keep_locally(self, run: Run, err: StoreError) -> None:
        """Copy a run the server could not take into the local fallback store."""
        fallback = Store(fallback_store_path())
        copy = dataclasses.replace(run, notes=list(run.notes), run_id=None, store_path=None)
        try:
            fallback_id = fallback.save_run(copy)
        except StoreError:
            return
        err.fallback = str(fallback.path)
        err.args = (
            f"{err.args[0]} The run is kept in memory and in the local store {fallback.path} "
            f"(run {fallback_id}); once the server is back, push it with: gpuperf sync "
            f"'{fallback.path}' '{self._shown}'"
            + (" (put your password where *** stands, or better keep it in ~/.pgpass or "
               "PGPASSWORD and leave it out of the URL)" if "***" in self._shown else ""),
        )

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
        ids = run_ids(run_id)

        def work(conn: Any) -> None:
            for one in ids:
                if not conn.execute("SELECT 1 FROM runs WHERE id = ?", (one,)).fetchone():
                    raise RunNotFoundError(one, self._shown)
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
        if not self._backend.exists():
            raise RunNotFoundError(ids[0], self._shown)
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
            The run ids of the rows, in table order. A row whose ``run_uid`` (an export's
            column) is already in the store is not imported twice: its existing id is given.

        Raises
        ------
        ImportValidationError
            (a ``ValueError``) listing every invalid cell by column and line/row; nothing is
            written then.

        Notes
        -----
        Required after the mapping: ``time_s`` (seconds, > 0 for ``ok`` rows; empty cells are
        errors; a Timedelta column is read as seconds), ``batch_size`` (a column of positive
        whole numbers; empty cells are stored as unknown) and a network (column or
        argument). ``iterations`` is how many iterations ``time_s`` covers; without that
        column every row counts 1, i.e. ``time_s`` is the time of one iteration (per-step
        traces). ``status`` defaults to ``ok``, ``gpu_count`` to 1 with a GPU and 0 without.
        A ``gpu`` name the hardware catalog cannot resolve is an error (with its close
        matches) unless the row gives ``gpu_fp32_tflops`` and ``gpu_bandwidth_gbs`` itself.
        Importing one table twice is not refused here (the ``gpuperf import`` command
        recognises a file by its content).

        Other columns: canonical ones (``gpu_*``, ``cpu_*``, ``sw_*``, ``arch_*``, hyper
        and quality names, ``tags`` as JSON) go where ``runs()`` shows them; any further
        numeric column becomes a feature, any further text column a tag. ``run_id`` and
        ``hardware_id`` of an export are ignored (ids are assigned anew). Text cells of a
        CSV export that were escaped against spreadsheet formulas (``'=...``) are read back
        as written.
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
        uids = [record.pop("run_uid", None) for record in records]
        who = [(record.pop("recorded_host", None), record.pop("recorded_user", None))
               for record in records]
        if all(host is None and user is None for host, user in who):
            who_arg = None
        else:
            from gpuperf_magics.store.records import recorder

            mine = recorder()
            who_arg = [(h or mine.host, u or mine.user) if (h or u) else mine for h, u in who]

        def work(conn: Any) -> list[int]:
            out = insert_runs(conn, records, uids=uids, who=who_arg)
            if any(inserted.new for inserted in out):
                bump_revision(conn)
            return [run_id for run_id, _ in out]

        return self._execute(work, write=True, action=f"import {name}")

    # ------------------------------------------------------------------ server
    def migrate(self) -> Migrated:
        """Create or upgrade the store's schema; ``Migrated(before, after)``: the versions.

        A server store is only ever upgraded by this call (``gpuperf migrate URL``), run by
        a role that may create and alter tables. An SQLite file upgrades itself when opened,
        so this just opens it.
        """
        from gpuperf_magics.store import schema

        if self.kind == "postgresql":
            from gpuperf_magics.store import postgres as pg

            result = pg.migrate(self._location, self.timeout)
            self._backend.ready = False
            return result
        path = self._location.path
        assert path is not None

        def version(conn: Any) -> int:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])

        before = 0
        if path.exists():
            conn = sqlite3.connect(path)
            try:
                before = version(conn)
            except sqlite3.Error as exc:
                raise translate(exc, path, "read the schema version", self.timeout) from None
            finally:
                conn.close()
        self._execute(lambda conn: None, write=True, action="migrate the store")
        return schema.Migrated(before, schema.latest_version())

    # ------------------------------------------------------------------ reading
    def token(self) -> StoreToken:
        """``StoreToken(created_at, revision)``: tells a re-created store from the one a cache
        saw.

        :meth:`revision` restarts when a store file is deleted and made again; the time the
        file was created does not.
        """

        def work(conn: Any) -> StoreToken:
            rows = dict(conn.execute(
                "SELECT key, value FROM meta WHERE key IN ('created_at', 'revision')"
            ).fetchall())
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
            row = conn.execute("SELECT value FROM meta WHERE key = 'revision'").fetchone()
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
            peak_memory_gb``; then the
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
        from gpuperf_magics.store.frame import CorruptRow, build_runs_frame

        columns = column_list(columns)
        query = runs_query(self.kind, network=network, status=status, gpu=gpu, source=source,
                           tags=tags, since=since, columns=columns, where=where)

        def work(conn: Any) -> tuple[list[str], list[tuple[Any, ...]]]:
            cursor = conn.execute(query.sql, query.params)
            return [d[0] for d in cursor.description], cursor.fetchall()

        got, rows = self._execute(work, write=False, action="read runs",
                                  missing=lambda: (query.names, []), snapshot=False)
        data = list(zip(*rows, strict=True)) if rows else [()] * len(got)
        by_name = {name: list(values) for name, values in zip(got, data, strict=True)}
        nested = {g: by_name.pop(g) for g in (*query.groups, "hardware") if g in by_name}
        try:
            frame = build_runs_frame(by_name, nested)
        except CorruptRow as exc:
            raise self._corrupt(exc) from None
        frame = filter_frame(frame, query.later)
        return frame if columns is None else select_columns(frame, columns)

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
        from gpuperf_magics.store.frame import iterations_frame

        ids = run_ids(run_id)
        return iterations_frame(self._read_iterations(ids))

    def _read_iterations(self, run_ids: list[int]) -> list[IterationRow]:
        wanted = sorted(set(run_ids))

        def work(conn: Any) -> list[IterationRow]:
            found: set[int] = set()
            rows: list[tuple[Any, ...]] = []
            for chunk in chunked(wanted):
                marks = ", ".join("?" * len(chunk))
                found.update(int(i) for (i,) in conn.execute(
                    f"SELECT id FROM runs WHERE id IN ({marks})", chunk))
                rows.extend(conn.execute(
                    f"SELECT run_id, {', '.join(ITERATION_FIELDS)} FROM iterations "
                    f"WHERE run_id IN ({marks}) ORDER BY run_id, idx", chunk))
            absent = [i for i in run_ids if i not in found]
            if absent:
                raise RunNotFoundError(absent[0], self._shown)
            return [row._replace(phases=self._phases(row.run_id, row.phases))
                    for row in map(IterationRow._make, rows)]

        def nothing() -> list[IterationRow]:
            raise RunNotFoundError(run_ids[0], self._shown)

        if not run_ids:
            return []
        return self._execute(work, write=False, action="read iterations", missing=nothing)

    def _phases(self, run_id: Any, text: Any) -> Any:
        from gpuperf_magics.store.frame import CorruptRow

        try:
            value = from_json(text, None)
        except ValueError:
            value = ""
        if value is not None and not isinstance(value, dict):
            raise CorruptRow(f"run {run_id}: an iteration's phases hold {str(text)[:60]!r}, "
                             "not a JSON object")
        return value

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
        from gpuperf_magics.store.frame import CorruptRow

        (one,) = run_ids(run_id)

        def work(conn: Any) -> tuple[dict[str, Any], list[IterationRow]]:
            cursor = conn.execute(select_runs([*RUN_SELECT, "hardware"]) + " WHERE r.id = ?",
                                  (one,))
            row = cursor.fetchone()
            if row is None:
                raise RunNotFoundError(one, self._shown)
            try:
                record = parse_run([d[0] for d in cursor.description], row)
            except ValueError as exc:
                raise CorruptRow(str(exc)) from None
            its = [IterationRow(one, *row) for row in conn.execute(SELECT_ITERATIONS, (one,))]
            return record, its

        def nothing() -> tuple[dict[str, Any], list[IterationRow]]:
            raise RunNotFoundError(one, self._shown)

        record, rows = self._execute(work, write=False, action="read a run", missing=nothing)
        try:
            return Run(
                network=record["network"],
                status=record["status"],
                iterations=[
                    IterationRecord(
                        index=it.idx,
                        duration_s=float(it.duration_s),
                        samples=it.samples,
                        warmup=bool(it.warmup),
                        phases=self._phases(one, it.phases),
                        skipped_step=bool(it.skipped_step),
                        micro_batches=it.micro_batches,
                    )
                    for it in rows
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
                created_at=record["created_at"],
                source=record["source"],
                run_id=record["run_id"],
                store_path=str(self.path),
            )
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
            :meth:`import_table` reads back; iterations are not exported
            (:meth:`iterations` gives them per run). In CSV/TSV, text cells a spreadsheet
            would run as a formula (starting with ``=``, ``+``, ``-``, ``@``) are written
            with a leading ``'``, which :meth:`import_table` removes.
        """
        from gpuperf_magics.store.files import file_format, write_table

        target = Path(os.path.expanduser(os.fspath(path)))
        file_format(target)  # reject an unknown suffix before reading the store
        return write_table(self.runs(**filters), target)

    # ------------------------------------------------------------------ sync
    def sync_to(
        self,
        other: str | os.PathLike[str] | Store,
        *,
        progress: Callable[[int, int], None] | None = None,
        batch: int = 2000,
    ) -> SyncResult:
        """Copy the runs ``other`` lacks into it (SQLite or PostgreSQL, either way).

        Runs are recognised by their ``run_uid`` (a hash of their content), so a second sync
        copies nothing and two machines syncing one run into one store do not duplicate it.
        Sync adds runs; it never deletes or overwrites runs of either store. Copied runs get
        new ids in ``other`` (ids are per store) and keep their uid, time, source, and who
        recorded them.

        Parameters
        ----------
        other : path, URL or Store
            The destination.
        progress : callable, optional
            ``progress(done, total)`` after each batch (the CLI draws a bar with it).
        batch : int
            Runs per write transaction.

        Returns
        -------
        SyncResult
        """
        from gpuperf_magics.store.sync import sync

        return sync(self, other if isinstance(other, Store) else Store(other),
                    progress=progress, batch=batch)
