"""Parsing of sia2023 (the Sia simulator's placement traces), read from the shared data."""

from __future__ import annotations

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


# ---------------------------------------------------------------- sia2023
def test_sia2023_has_one_row_per_csv_row() -> None:
    table = datasets.fetch_sia2023()
    files = sorted((SHARED_DATA / "sia2023").glob("*/placements-*.csv"))
    assert len(files) == 30
    counts = table.groupby(["network", "cluster"]).size()
    for path in files:
        cluster = path.stem.removeprefix("placements-")
        assert counts[(path.parent.name, cluster)] == csv_rows(path), path
    assert len(table) == sum(csv_rows(p) for p in files)


def test_sia2023_placements_give_gpus_nodes_and_global_batch() -> None:
    table = datasets.fetch_sia2023()
    assert table["placement"].dtype == "str"
    assert table["placement"].str.fullmatch(r"[1-9]+").all()
    assert {"11", "1112", "88"} <= set(table["placement"])  # digits per node stay text
    digits = table["placement"].map(lambda p: [int(d) for d in p])
    assert (table["gpu_count"] == digits.map(sum)).all()
    assert (table["nodes"] == digits.map(len)).all()
    assert (table["batch_size"] == table["local_batch_size"] * table["gpu_count"]).all()
    assert (table["iterations"] == 1).all()
    one = table[(table["network"] == "bert") & (table["cluster"] == "aws")].iloc[0]
    assert (one["placement"], one["local_batch_size"]) == ("1", 4)
    assert one["time_s"] == pytest.approx(0.45532354712486267)
    assert one["sync_time_s"] == pytest.approx(0.013738612174987792)


def test_sia2023_columns_types_and_gpus() -> None:
    table = datasets.fetch_sia2023()
    for column in ("nodes", "gpu_count", "local_batch_size", "batch_size", "iterations"):
        assert table[column].dtype == "int64", column
    for column in ("time_s", "sync_time_s"):
        assert table[column].dtype == "float64", column
    gpus = table.groupby("cluster")["gpu"].unique().map(list).to_dict()
    assert gpus == {
        "aws": ["Tesla T4"],
        "azure": ["Tesla V100-SXM2-32GB"],
        "dgx-ext": ["NVIDIA A100-SXM4-40GB"],
        "quad": ["Quadro RTX 6000"],
        "rtx": ["NVIDIA GeForce RTX 2080 Ti"],
    }
    for gpu in table["gpu"].unique():
        assert catalog.match(gpu) == gpu
    assert set(table["network"]) == {"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"}
