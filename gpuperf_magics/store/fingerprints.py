"""Which file an import came from: the fingerprint every row of an imported file carries.

:meth:`Store.import_table` tags each row of a file with a SHA-256 of the file's bytes and of
the options that change the stored rows (the mapping, the default network and GPU), under the
tag :data:`IMPORT_TAG`. Two files of one name are different imports; one file under two names,
or copied to another folder, is the same one. ``skip_duplicates=True`` (``gpuperf import``
without ``--again``) finds a file already imported by that tag; :meth:`Store.imported_file`
says what the store holds of a file before importing it. The definition is the one ``gpuperf
import`` wrote since version 0.1.0, so the rows it tagged are recognised.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

#: Tag of imported rows: SHA-256 of the file's bytes and of the options that change the rows.
IMPORT_TAG = "import_sha256"


class ImportedFile(NamedTuple):
    """What a store holds of one file: :meth:`Store.imported_file`'s answer.

    Attributes
    ----------
    fingerprint : str
        The file's fingerprint (the value of the ``import_sha256`` tag of its rows).
    run_ids : list of int
        The runs carrying that fingerprint (empty: the file was never imported with these
        options).
    sources : list of str
        Their ``source`` values (``import:<file name>`` unless one was given), sorted.
    unmarked_ids : list of int
        Runs imported from a file of the same name by a version that did not fingerprint
        imports (``source`` ``import:<name>``, no tag): they may be these rows again.
    """

    fingerprint: str
    run_ids: list[int]
    sources: list[str]
    unmarked_ids: list[int]

    def __bool__(self) -> bool:
        return bool(self.run_ids)


def file_fingerprint(path: Path, mapping: Mapping[str, str | None] | None,
                     network: str | None, gpu: str | None) -> str:
    """SHA-256 of a file's bytes and of the import options that change the stored rows."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    options = {"map": sorted((mapping or {}).items()), "network": network, "gpu": gpu}
    digest.update(b"\0" + json.dumps(options, sort_keys=True).encode())
    return digest.hexdigest()


def find(conn: Any, fingerprint: str, name: str) -> ImportedFile:
    """The runs of the store on ``conn`` imported from the file ``name`` of ``fingerprint``
    (a unit of work, read in the caller's transaction)."""
    import sqlalchemy as sa

    from gpuperf_magics.store.records import tag_value
    from gpuperf_magics.store.tables import runs

    tag = tag_value(conn.dialect.name, IMPORT_TAG)
    marked = conn.execute(sa.select(runs.c.id, runs.c.source).where(tag == fingerprint)
                          .order_by(runs.c.id)).all()
    unmarked = conn.execute(sa.select(runs.c.id).where(
        runs.c.source == f"import:{name}", tag.is_(None)).order_by(runs.c.id)).scalars()
    return ImportedFile(fingerprint, [int(i) for i, _ in marked],
                        sorted({str(s) for _, s in marked if s is not None}),
                        [int(i) for i in unmarked])
