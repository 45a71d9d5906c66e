"""Writing runs: what :meth:`Store.save_run`, :meth:`Store.import_table` and
:meth:`Store.delete` change, each as one unit of work for one transaction.

The :class:`~gpuperf_magics.store.store.Store` opens the transaction (and retries it while
another writer holds a lock); the functions here prepare what is written before that, so a
retry writes exactly the same rows, and do the writing inside it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from gpuperf_magics.store.encoding import (
    format_timestamp,
    now_utc,
    parse_timestamp,
    sql_value,
    to_json,
)
from gpuperf_magics.store.errors import RunNotFoundError
from gpuperf_magics.store.fingerprints import IMPORT_TAG, ImportedFile, file_fingerprint, find
from gpuperf_magics.store.rows import Recorder, recorder

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

log = logging.getLogger(__name__)


class RunToSave(NamedTuple):
    """A run as the rows :func:`save` writes: its record and its iteration rows."""

    record: dict[str, Any]
    iterations: list[tuple[Any, ...]]


class TableToImport(NamedTuple):
    """A checked table as the rows :func:`import_rows` writes.

    Attributes
    ----------
    name : str
        The file name (``"the DataFrame"`` for a frame), for messages.
    records : list of dict
        One run record per row.
    uids : list
        The ``run_uid`` each row carries (an export's), None where it has none.
    who : list of Recorder or None
        Who recorded each row (an export's ``recorded_host``/``recorded_user``, this process
        where a row has neither); None when no row names anyone.
    fingerprint : str or None
        The file's :func:`~gpuperf_magics.store.fingerprints.file_fingerprint` (every row
        carries it as the ``import_sha256`` tag); None for a DataFrame, or when the import
        does not look for duplicates.
    """

    name: str
    records: list[dict[str, Any]]
    uids: list[str | None]
    who: list[Recorder] | None
    fingerprint: str | None = None


def run_to_save(run: Any) -> RunToSave:
    """Check ``run`` (a :class:`~gpuperf_magics.run.Run`, which the caller checked) and fix
    what it will be saved as; sets ``run.created_at`` (now, UTC, when missing) before the first
    attempt, so that a retry or a copy has the same uid.

    Raises
    ------
    ValueError
        The run has no network name or an unreadable ``created_at``.
    """
    if not isinstance(run.network, str) or not run.network.strip():
        raise ValueError("the run has no network name: set run.network before saving")
    created = run.created_at
    try:
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
    return RunToSave(record, iterations)


def _has_run(conn: Any, run_id: int) -> bool:
    import sqlalchemy as sa

    from gpuperf_magics.store.tables import runs

    return conn.execute(sa.select(runs.c.id).where(runs.c.id == run_id)).first() is not None


def save(conn: Any, run: RunToSave, previous: int | None) -> int:
    """Insert ``run``; its id. ``previous``, the id the run had in this store, is kept when
    that run is still there (saving a run twice saves it once)."""
    from gpuperf_magics.store.records import bump_revision, insert_runs

    if previous is not None and _has_run(conn, previous):
        return previous
    (inserted,) = insert_runs(conn, [run.record], [run.iterations])
    if inserted.new:
        bump_revision(conn)
    return inserted.run_id


def delete(conn: Any, ids: Sequence[int], shown: str) -> None:
    """Delete the runs ``ids`` of the store ``shown``, all or none, and hardware rows no run
    uses any more.

    Raises
    ------
    RunNotFoundError
        An id is not in the store; nothing is deleted then.
    """
    import sqlalchemy as sa

    from gpuperf_magics.store.records import bump_revision
    from gpuperf_magics.store.tables import hardware, iterations, runs

    for one in ids:
        if not _has_run(conn, one):
            raise RunNotFoundError(one, shown)
    for one in ids:
        # Explicit, though the foreign key cascades: a file opened elsewhere
        # without PRAGMA foreign_keys must not keep orphans.
        conn.execute(sa.delete(iterations).where(iterations.c.run_id == one))
        conn.execute(sa.delete(runs).where(runs.c.id == one))
    used = sa.select(runs.c.hardware_id).where(runs.c.hardware_id.is_not(None))
    conn.execute(sa.delete(hardware).where(hardware.c.id.not_in(used)))
    bump_revision(conn)


def table_to_import(
    table: pd.DataFrame | str | os.PathLike[str],
    mapping: Mapping[str, str | None] | None,
    *,
    network: str | None,
    gpu: str | None,
    source: str | None,
    tags: Mapping[str, str] | None,
    fingerprint: bool = False,
) -> TableToImport:
    """Read and check ``table`` as :meth:`Store.import_table` describes, before the store is
    opened. With ``fingerprint``, the rows of a file carry its fingerprint as the
    ``import_sha256`` tag.

    Raises
    ------
    TypeError
        ``table`` is neither a DataFrame nor a path.
    ImportValidationError
        Listing every invalid cell.
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
    stamp = None
    if path is None:
        assert isinstance(table, pd.DataFrame)
        frame, fmt = table, None
    else:
        fmt = file_format(path)
        frame = read_table(path, text_columns(read_header(path), mapping))
        if fingerprint:
            # After the table: a path that is not a readable file has been refused by now.
            stamp = file_fingerprint(path, mapping, network, gpu)
    records = prepare_records(
        frame,
        mapping,
        network=network,
        gpu=gpu,
        source=source or (f"import:{name}" if path is not None else "import"),
        tags={**(tags or {}), IMPORT_TAG: stamp} if stamp else tags,
        locator=RowLocator.for_source(table, frame, fmt),
        what=name,
    )
    uids = [record.pop("run_uid", None) for record in records]
    who = [(record.pop("recorded_host", None), record.pop("recorded_user", None))
           for record in records]
    return TableToImport(name, records, uids, _recorders(who), stamp)


def _recorders(who: list[tuple[str | None, str | None]]) -> list[Recorder] | None:
    """Who recorded each imported row: as the table says, this process where it says
    nothing; None when no row names anyone (the insert then names this process itself)."""
    if all(host is None and user is None for host, user in who):
        return None
    mine = recorder()
    return [Recorder(h or mine.host, u or mine.user) if (h or u) else mine for h, u in who]


def imported_file(path: str | os.PathLike[str], mapping: Mapping[str, str | None] | None,
                  network: str | None, gpu: str | None) -> tuple[str, str]:
    """(fingerprint, file name) of a file to import, for :func:`find` in the store.

    Raises
    ------
    FileNotFoundError
        ``path`` is not a file.
    """
    file = Path(path).expanduser()
    if not file.is_file():
        raise FileNotFoundError(f"no file {file} to import: check the path")
    return file_fingerprint(file, mapping, network, gpu), file.name


def import_rows(conn: Any, table: TableToImport, skip_duplicates: bool = False) -> list[int]:
    """Insert the rows of ``table``; their run ids, in table order (an existing id for a row
    whose uid is already in the store). With ``skip_duplicates``, a file whose fingerprint the
    store holds already is not imported again: the ids of its rows come back."""
    from gpuperf_magics.store.records import bump_revision, insert_runs

    if skip_duplicates and table.fingerprint:
        prior: ImportedFile = find(conn, table.fingerprint, table.name)
        if prior:
            log.info("%s was imported already (runs %s-%s): not imported again", table.name,
                     prior.run_ids[0], prior.run_ids[-1])
            return prior.run_ids
    out = insert_runs(conn, table.records, uids=table.uids, who=table.who)
    if any(inserted.new for inserted in out):
        bump_revision(conn)
    return [run_id for run_id, _ in out]
