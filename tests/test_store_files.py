"""Tests of gpuperf_magics.store.files: exports to CSV and Parquet, and reading them back."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest
from made_runs import make_gpu_run as make_run

from gpuperf_magics.run import Run
from gpuperf_magics.store import ImportValidationError, Store


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "runs.sqlite")


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".csv.gz"])
def test_export_and_reimport(store: Store, tmp_path: Path, suffix: str) -> None:
    store.save_run(make_run(batch=32))
    store.save_run(make_run(batch=64, tags={}, features={"image_size": 128.0, "depth": 50.0}))
    store.save_run(Run(network="mlp", status="failed", error="OOM, retry with a smaller batch"))
    store.import_table(pd.DataFrame({"time_s": [2.0], "batch_size": [16], "cluster": ["aws"]}),
                       network="bert", gpu="Tesla T4")
    path = store.export(tmp_path / f"runs{suffix}")
    assert path.is_file()
    again = Store(tmp_path / "again.sqlite")
    ids = again.import_table(path)
    assert ids == [1, 2, 3, 4]
    before, after = store.runs(), again.runs()
    assert list(after.columns) == list(before.columns)
    pd.testing.assert_frame_equal(after, before, check_dtype=False)
    # Text that looks like a number (driver, CUDA version) stays text.
    assert after.loc[0, "gpu_driver"] == "535.10" and after.loc[0, "sw_cuda"] == "12.1"
    assert after["tags"].tolist() == [{"owner": "ann"}, {}, {}, {"cluster": "aws"}]


def test_export_applies_filters(store: Store, tmp_path: Path) -> None:
    store.save_run(make_run("a"))
    store.save_run(make_run("b"))
    path = store.export(tmp_path / "only_b.csv", network="b")
    assert pd.read_csv(path)["network"].tolist() == ["b"]


def test_export_of_empty_store_has_the_canonical_header(store: Store, tmp_path: Path) -> None:
    path = store.export(tmp_path / "empty.csv")
    assert list(pd.read_csv(path).columns) == list(store.runs().columns)


def test_the_test_extra_carries_pyarrow_for_the_parquet_tests() -> None:
    """``pip install ".[test]"`` is enough to run the suite: the Parquet round trips above
    need pyarrow, which users get from the ``parquet`` extra."""
    tomllib = pytest.importorskip("tomllib")
    from packaging.requirements import Requirement

    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    test = {Requirement(r).name: Requirement(r).specifier for r in extras["test"]}
    parquet = {Requirement(r).name: Requirement(r).specifier for r in extras["parquet"]}
    assert test["pyarrow"] == parquet["pyarrow"]


def test_parquet_without_pyarrow(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.save_run(make_run())
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now fails
    with pytest.raises(ImportError, match=r"pip install 'gpuperf-magics\[parquet\]'"):
        store.export(tmp_path / "runs.parquet")
    assert not (tmp_path / "runs.parquet").exists()
    (tmp_path / "in.parquet").write_bytes(b"PAR1")
    with pytest.raises(ImportError, match="pyarrow"):
        store.import_table(tmp_path / "in.parquet")


def test_unknown_suffix(store: Store, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\*\.csv"):
        store.export(tmp_path / "runs.xlsx")
    with pytest.raises(ValueError, match=r"\*\.parquet"):
        store.import_table(tmp_path / "runs.json")
    with pytest.raises(TypeError, match="DataFrame or a file path"):
        store.import_table([{"time_s": 1.0}])  # type: ignore[arg-type]


def test_csv_export_cannot_run_as_a_spreadsheet_formula(store: Store, tmp_path: Path) -> None:
    texts = ["=HYPERLINK(\"http://x\")", "+1+2", "-cmd", "@SUM(A1)", "'=already", "plain",
             "'quoted"]
    frame = pd.DataFrame({"time_s": [1.0] * len(texts), "batch_size": [4] * len(texts),
                          "optimizer": texts, "offset": [-1.5] * len(texts)})
    store.import_table(frame, network="=evil()")
    path = store.export(tmp_path / "runs.csv")
    raw = pd.read_csv(path, dtype=str)
    assert raw["network"].iloc[0] == "'=evil()"
    assert raw["optimizer"].tolist() == ["'=HYPERLINK(\"http://x\")", "'+1+2", "'-cmd", "'@SUM(A1)",
                                    "''=already", "plain", "'quoted"]
    assert raw["offset"].iloc[0] == "-1.5"  # numbers are left as numbers
    again = Store(tmp_path / "again.sqlite")
    again.import_table(path)
    back = again.runs()
    assert back["network"].iloc[0] == "=evil()"
    assert back["optimizer"].tolist() == texts
    assert back["offset"].tolist() == [-1.5] * len(texts)


def test_export_then_import_keeps_the_run_uid(store: Store, tmp_path: Path) -> None:
    store.save_run(make_run())
    path = store.export(tmp_path / "runs.csv")
    uid = store.runs()["run_uid"].iloc[0]
    again = Store(tmp_path / "again.sqlite")
    assert again.import_table(path) == [1]
    assert again.runs()["run_uid"].tolist() == [uid]
    assert again.import_table(path) == [1]  # the same run, recognised: not imported twice
    assert len(again.runs()) == 1
    bad = pd.read_csv(path).assign(run_uid="not-a-uid")
    with pytest.raises(ImportValidationError, match="not a run uid"):
        again.import_table(bad)
