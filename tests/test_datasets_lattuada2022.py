"""Parsing of lattuada2022 (the aMLLibrary GPU measurements), read from the shared data."""

from __future__ import annotations

import pandas as pd
import pytest
from shared_data import NO_DATA, SHARED_DATA, csv_rows

from gpuperf_magics import datasets
from gpuperf_magics.hardware import catalog

# The shared data folder as the data home, and an empty table cache (conftest).
pytestmark = [
    pytest.mark.skipif(
        not SHARED_DATA.is_dir(), reason=NO_DATA
    ),
    pytest.mark.usefixtures("fresh_datasets_cache"),
]


# ---------------------------------------------------------------- lattuada2022
def test_lattuada2022_has_one_row_per_csv_row() -> None:
    table = datasets.fetch_lattuada2022()
    files = sorted((SHARED_DATA / "lattuada2022").glob("*.csv"))
    assert len(files) == 17
    counts = table.groupby("file").size()
    for path in files:
        assert counts[path.stem] == csv_rows(path), path.name
    assert len(table) == sum(csv_rows(p) for p in files)


def test_lattuada2022_columns_and_types() -> None:
    table = datasets.fetch_lattuada2022()
    for column in ("batch_size", "iterations", "gpu_count"):
        assert table[column].dtype == "int64", column
    for column in ("time_s", "gpu_fp32_tflops", "disk_speed", "dataloader_workers", "depth"):
        assert table[column].dtype == "float64", column
    assert set(table["network"]) == {"alexnet", "vgg19", "resnet50", "deepspeech", "resnet_cifar"}
    assert set(table["framework"].dropna()) == {"pt", "tf"}
    assert (table["time_s"] > 0).all() and (table["batch_size"] > 0).all()
    assert set(table["status"]) == {"ok"} and set(table["source"]) == {"lattuada2022"}


def test_lattuada2022_gpus_come_from_the_gflops_column() -> None:
    table = datasets.fetch_lattuada2022()
    raw = pd.read_csv(SHARED_DATA / "lattuada2022" / "alexnet_pt.csv")
    rows = table[table["file"] == "alexnet_pt"].reset_index(drop=True)
    assert (rows["gpu_fp32_tflops"] == raw["GFlops(7)"] / 1000).all()
    assert (rows["gpu_count"] == raw["GPU number(9)"]).all()
    assert (rows["dataloader_workers"] == raw["CPU threads(19)"]).all()
    assert (rows["time_s"] == raw["overall execution time(31)"]).all()
    expected = {
        "Tesla K80": 5.591,
        "Tesla M60": 7.365,
        "Quadro P600": 1.195,
        "NVIDIA GeForce GTX 1080 Ti": 11.339,
    }
    named = table.dropna(subset=["gpu"])
    assert named.groupby("gpu")["gpu_fp32_tflops"].unique().map(list).to_dict() == {
        gpu: [tflops] for gpu, tflops in expected.items()
    }
    for gpu in named["gpu"].unique():
        assert catalog.match(gpu) == gpu


def test_lattuada2022_depth_files() -> None:
    table = datasets.fetch_lattuada2022()
    depth = table[table["network"] == "resnet_cifar"]
    assert set(depth["file"]) == {f"extrapolation_N_resnet_{g}" for g in (1, 2, 4)}
    assert depth["gpu"].isna().all() and depth["framework"].isna().all()
    assert depth["gpu_fp32_tflops"].isna().all()
    for stem, group in depth.groupby("file"):
        assert set(group["gpu_count"]) == {int(stem.rsplit("_", 1)[1])}
    assert sorted(depth["depth"].unique()) == list(range(1, 11))
    assert table.loc[table["network"] != "resnet_cifar", "depth"].isna().all()
    # extrapolation_P files without the CPU threads column: NaN, not a made-up value
    no_threads = table[table["file"] == "extrapolation_P_alexnet_pt"]
    assert no_threads["dataloader_workers"].isna().all()
