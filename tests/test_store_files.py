"""Tests of gpuperf_magics.store.files: exports to CSV and Parquet, and reading them back."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from made_runs import make_gpu_run as make_run

import gpuperf_magics as gm
from gpuperf_magics.run import Run
from gpuperf_magics.store import ImportValidationError, Store
from gpuperf_magics.store.files import PYARROW_FLOOR, pyarrow_problem


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


#: Files that are no table, and what the error must say about each.
UNREADABLE = {
    "empty.csv": (b"", "the file is empty"),
    "image.csv": (bytes(range(256)) * 8, "binary file"),
    "latin1.csv": ("network,time_s,batch_size\nréseau,0.1,8\n".encode("latin-1"),
                   "not UTF-8 text"),
    "ragged.csv": (b"network,time_s,batch_size\nm,0.1,8\nm,0.1,8,9\n", "not a well-formed CSV"),
    "shifted.csv": (b"network,time_s,batch_size\nm,0.1,8,9,9\n", "more cells than the header"),
    "quote.csv": (b'network,"time_s\nm,0.1\n', "not a well-formed CSV"),
    "noise.csv.gz": (b"not gzip at all", "cannot be read as a CSV table"),
    "noise.parquet": (b"PAR1 nothing more", "not a readable Parquet file"),
    "empty.parquet": (b"", "not a readable Parquet file"),
}


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_a_file_that_is_no_table_is_named_with_what_to_do(store: Store, tmp_path: Path,
                                                          name: str) -> None:
    content, said = UNREADABLE[name]
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ImportValidationError, match=said) as info:
        store.import_table(path, network="m")
    message = str(info.value)
    assert str(path) in message and "Nothing was written" in message
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert not store.path.exists()  # nothing was written, not even an empty store


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".parquet"])
def test_a_header_naming_a_column_twice_is_refused(store: Store, tmp_path: Path,
                                                   suffix: str) -> None:
    path = tmp_path / f"twice{suffix}"
    if suffix == ".parquet":
        pq.write_table(pa.table([[0.1], [0.2], [8]], names=["time_s", "time_s", "batch_size"]),
                       path)
    else:
        sep = "\t" if suffix == ".tsv" else ","
        path.write_text(sep.join(["network", "time_s", "time_s", "batch_size"]) + "\n"
                        + sep.join(["m", "0.1", "0.2", "8"]) + "\n")
    with pytest.raises(ImportValidationError, match="names 'time_s' more than once") as info:
        store.import_table(path)
    assert "time_s.1" not in str(info.value) and str(path) in str(info.value)


def test_pyarrow_before_its_parquet_fix_is_refused(tmp_path: Path) -> None:
    tomllib = pytest.importorskip("tomllib")
    # The floor is the one the parquet extra asks for.
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    floor = ".".join(map(str, PYARROW_FLOOR))
    assert f"pyarrow>={floor}" in pyproject["project"]["optional-dependencies"]["parquet"]
    for old in ("14.0.0", "13.0.0", "8.0.1.dev12"):
        problem = pyarrow_problem(old)
        assert problem is not None and f"pyarrow {old}" in problem
        assert "CVE-2023-47248" in problem and f"pip install -U 'pyarrow>={floor}'" in problem
    for fixed in (floor, "14.0.2", "15.0.0", "26.0.1"):
        assert pyarrow_problem(fixed) is None
    assert pyarrow_problem(pa.__version__) is None  # the installed one reads
    # Wired into every Parquet read: an older pyarrow is told before it opens the file.
    path = tmp_path / "runs.parquet"
    pd.DataFrame({"network": ["m"], "time_s": [0.1], "batch_size": [8]}).to_parquet(path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pa, "__version__", "14.0.0")
        with pytest.raises(ImportError, match=r"refusing to read Parquet: pyarrow 14\.0\.0"):
            Store(tmp_path / "s.sqlite").import_table(path)


def test_an_export_leaves_the_iterations_out_and_predictions_may_move(tmp_path: Path) -> None:
    """What the export's docs say: the re-imported runs are learnt from their time_s (every
    steady iteration, a stall included), not from the trimmed mean of their iterations;
    a sync keeps the iterations and the prediction."""
    from made_runs import make_run as make_cpu_run

    from gpuperf_magics.run import IterationRecord

    original = Store(tmp_path / "original.sqlite")
    for batch in (8, 16, 32):
        run = make_cpu_run(batch=batch)
        # 20 steady iterations of 10 ms per 8 samples, one of them a 0.5 s stall.
        run.iterations = [IterationRecord(i, 0.5 if i == 10 else 0.01 * batch / 8, batch,
                                          warmup=i == 0) for i in range(21)]
        original.save_run(run)
    imported = Store(tmp_path / "imported.sqlite")
    imported.import_table(original.export(tmp_path / "runs.csv"))
    synced = Store(tmp_path / "synced.sqlite")
    original.sync_to(synced)
    assert imported.iterations(1).empty and len(synced.iterations(1)) == 21

    def per_iteration(store: Store) -> float:
        frame = gm.predict_time(store, batch_sizes=[16], iterations=100).frame
        return float(frame["per_iteration_s"].iloc[0])

    assert per_iteration(original) == pytest.approx(0.02)  # the stall trimmed away
    assert per_iteration(synced) == pytest.approx(0.02)
    assert per_iteration(imported) == pytest.approx((19 * 0.02 + 0.5) / 20)  # 2.2× here
