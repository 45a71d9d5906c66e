"""Tests of gpuperf_magics.store.fingerprints: a file imported once is recognised by its
content (``Store.import_table(skip_duplicates=True)``, ``Store.imported_file``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gpuperf_magics.store import ImportedFile, Store
from gpuperf_magics.store.fingerprints import IMPORT_TAG, file_fingerprint


def _traces(path: Path, times: tuple[float, ...] = (0.5, 0.75)) -> Path:
    pd.DataFrame({"step_time": list(times), "bsz": [16, 32]}).to_csv(path, index=False)
    return path


MAPPING = {"step_time": "time_s", "bsz": "batch_size"}


def test_a_file_imported_once_is_skipped_the_second_time(tmp_path: Path) -> None:
    store = Store(tmp_path / "runs.sqlite")
    path = _traces(tmp_path / "traces.csv")
    assert not store.imported_file(path, MAPPING, network="bert")  # an empty store
    ids = store.import_table(path, MAPPING, network="bert", skip_duplicates=True)
    assert ids == [1, 2]
    tags = store.runs()["tags"].tolist()
    assert [t[IMPORT_TAG] for t in tags] == [file_fingerprint(path, MAPPING, "bert", None)] * 2
    revision = store.revision()
    # The same bytes under another name and folder: the same file, nothing written.
    copy = tmp_path / "elsewhere"
    copy.mkdir()
    renamed = copy / "renamed.csv"
    renamed.write_bytes(path.read_bytes())
    assert store.import_table(renamed, MAPPING, network="bert", skip_duplicates=True) == ids
    assert store.revision() == revision and len(store.runs()) == 2
    prior = store.imported_file(renamed, MAPPING, network="bert")
    assert prior and prior.run_ids == ids and prior.sources == ["import:traces.csv"]
    # Without skip_duplicates a file is imported as it is, again.
    assert store.import_table(path, MAPPING, network="bert") == [3, 4]
    assert IMPORT_TAG not in store.runs()["tags"][2]


def test_other_options_or_other_bytes_are_another_import(tmp_path: Path) -> None:
    store = Store(tmp_path / "runs.sqlite")
    path = _traces(tmp_path / "traces.csv")
    store.import_table(path, MAPPING, network="bert", skip_duplicates=True)
    assert store.import_table(path, MAPPING, network="gpt2", skip_duplicates=True) == [3, 4]
    assert not store.imported_file(path, MAPPING, network="bert", gpu="Tesla T4")
    _traces(path, (0.5, 0.8))  # the file changed
    assert not store.imported_file(path, MAPPING, network="bert")
    assert store.import_table(path, MAPPING, network="bert", skip_duplicates=True) == [5, 6]


def test_rows_of_an_older_unfingerprinted_import_are_named(tmp_path: Path) -> None:
    store = Store(tmp_path / "runs.sqlite")
    path = _traces(tmp_path / "traces.csv")
    store.import_table(path, MAPPING, network="bert")  # as before fingerprints: no tag
    found = store.imported_file(path, MAPPING, network="bert")
    assert found == ImportedFile(found.fingerprint, [], [], [1, 2]) and not found


def test_a_missing_file_or_store(tmp_path: Path) -> None:
    store = Store(tmp_path / "none.sqlite")
    with pytest.raises(FileNotFoundError, match="check the path"):
        store.imported_file(tmp_path / "nope.csv")
    path = _traces(tmp_path / "traces.csv")
    assert store.imported_file(path, MAPPING).run_ids == []
    assert not (tmp_path / "none.sqlite").exists()  # looking created nothing
    # A DataFrame has no file to fingerprint: skip_duplicates does not apply to it.
    frame = pd.read_csv(path).rename(columns=MAPPING)
    assert store.import_table(frame, network="bert", skip_duplicates=True) == [1, 2]
    assert store.runs()["tags"].tolist() == [{}, {}]


def test_the_fingerprint_is_the_one_gpuperf_import_wrote(tmp_path: Path) -> None:
    """Rows tagged by ``gpuperf import`` of version 0.1.0 (which computed the fingerprint in
    the CLI) are recognised: the values below are what it computed for this file."""
    path = tmp_path / "t.csv"
    path.write_bytes(b"step_time,bsz\n0.5,16\n0.75,32\n")
    assert file_fingerprint(path, MAPPING, "bert", None) == (
        "89edf03be67dbe423e5b64b7e73008c48c134fb1c23d736545e3b161b97f92b5")
    # No mapping is the empty mapping the command line passed.
    assert file_fingerprint(path, None, None, "T4") == file_fingerprint(path, {}, None, "T4") \
        == "07cd2b336cbf13111b6f8b77996ccdc3f8bbc0ea8649450250876bb41e25ac94"
