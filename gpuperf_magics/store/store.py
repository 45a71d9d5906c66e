"""The :class:`Store`: profiled and imported runs in an SQLite file or on a PostgreSQL server.

What a store reads comes from :class:`~gpuperf_magics.store.reader.StoreReader`; this module
adds what changes it: saving a run, importing a table, deleting runs, migrating the schema,
syncing into another store.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING

from gpuperf_magics.store import writes
from gpuperf_magics.store.arguments import run_ids
from gpuperf_magics.store.backends import SqliteBackend
from gpuperf_magics.store.errors import RunNotFoundError, StoreError
from gpuperf_magics.store.fingerprints import ImportedFile
from gpuperf_magics.store.location import shell_quote
from gpuperf_magics.store.paths import fallback_store_path
from gpuperf_magics.store.reader import StoreReader, StoreToken
from gpuperf_magics.store.schema import Migrated, latest_version
from gpuperf_magics.store.sync import SyncResult

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from gpuperf_magics.run import Run

__all__ = ["Store", "StoreToken"]


class Store(StoreReader):
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
        TypeError
            ``run`` is not a :class:`~gpuperf_magics.run.Run`.
        ValueError
            The run has no network name or an unreadable ``created_at``.
        """
        from gpuperf_magics.run import Run

        if not isinstance(run, Run):
            raise TypeError(f"save_run takes a gpuperf_magics.Run, not {type(run).__name__}")
        rows = writes.run_to_save(run)
        previous = run.run_id if run.store_path == str(self.path) else None
        try:
            run_id = self._execute(partial(writes.save, run=rows, previous=previous),
                                   write=True, action="save the run")
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
            f"{shell_quote(str(fallback.path))} {shell_quote(self._shown)}"
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
        if not ids:
            return
        if not self._backend.exists():
            raise RunNotFoundError(ids[0], self._shown)
        self._execute(partial(writes.delete, ids=ids, shown=self._shown), write=True,
                      action="delete runs")

    def import_table(
        self,
        table: pd.DataFrame | str | os.PathLike[str],
        mapping: Mapping[str, str | None] | None = None,
        *,
        network: str | None = None,
        gpu: str | None = None,
        source: str | None = None,
        tags: Mapping[str, str] | None = None,
        skip_duplicates: bool = False,
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
        skip_duplicates : bool, default False
            For a file: recognise it by its fingerprint (a SHA-256 of its bytes and of
            ``mapping``, ``network`` and ``gpu``, whatever its name or folder). Its rows carry
            the fingerprint as the tag ``import_sha256``; when the store holds rows of that
            fingerprint already, nothing is imported and their ids are returned
            (:meth:`imported_file` tells beforehand). Without it a file is imported as it is,
            every time, and its rows carry no extra tag (an export imported again is the
            same store). Ignored for a DataFrame.

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
        ``gpuperf import`` passes ``skip_duplicates=True`` unless ``--again`` is given.

        Other columns: canonical ones (``gpu_*``, ``cpu_*``, ``sw_*``, ``arch_*``, hyper
        and quality names, ``tags`` as JSON) go where ``runs()`` shows them; any further
        numeric column becomes a feature, any further text column a tag. ``run_id`` and
        ``hardware_id`` of an export are ignored (ids are assigned anew). Text cells of a
        CSV export that were escaped against spreadsheet formulas (``'=...``) are read back
        as written.
        """
        rows = writes.table_to_import(table, mapping, network=network, gpu=gpu, source=source,
                                      tags=tags, fingerprint=skip_duplicates)
        if not rows.records:
            return []
        return self._execute(partial(writes.import_rows, table=rows,
                                     skip_duplicates=skip_duplicates),
                             write=True, action=f"import {rows.name}")

    def imported_file(
        self,
        path: str | os.PathLike[str],
        mapping: Mapping[str, str | None] | None = None,
        *,
        network: str | None = None,
        gpu: str | None = None,
    ) -> ImportedFile:
        """What this store holds of a file :meth:`import_table` would import.

        Parameters
        ----------
        path : str or os.PathLike
            The file.
        mapping, network, gpu
            As for :meth:`import_table`: they are part of the fingerprint (the same file
            imported with another mapping gives other rows).

        Returns
        -------
        ImportedFile
            ``(fingerprint, run_ids, sources, unmarked_ids)``; true when ``run_ids`` is not
            empty, i.e. the file was imported already. ``unmarked_ids`` are runs imported
            from a file of the same name before imports were fingerprinted.

        Raises
        ------
        FileNotFoundError
            ``path`` is not a file.
        """
        from gpuperf_magics.store.fingerprints import find

        stamp, name = writes.imported_file(path, mapping, network, gpu)
        return self._execute(lambda conn: find(conn, stamp, name), write=False,
                             action="look for an earlier import",
                             missing=lambda: ImportedFile(stamp, [], [], []))

    # ------------------------------------------------------------------ server
    def migrate(self) -> Migrated:
        """Create or upgrade the store's schema; ``Migrated(before, after)``: the versions.

        A server store is only ever upgraded by this call (``gpuperf migrate URL``), run by
        a role that may create and alter tables. An SQLite file upgrades itself when opened,
        so this just opens it.
        """
        if self.kind == "postgresql":
            from gpuperf_magics.store import postgres as pg

            result = pg.migrate(self._location, self.timeout)
            self._backend.ready = False
            return result
        backend = self._backend
        assert isinstance(backend, SqliteBackend)
        backend.ready = False  # check the file again, whatever this Store saw before
        self._execute(lambda conn: None, write=True, action="migrate the store")
        return Migrated(backend.found_version, latest_version())

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
