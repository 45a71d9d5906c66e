"""Public datasets: local copies, checksummed downloads (through a fake network), parsing."""

from __future__ import annotations

import csv
import re
import urllib.error
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest

from gpuperf_magics import datasets
from gpuperf_magics.datasets import ChecksumError, DatasetNotFoundError
from gpuperf_magics.hardware import catalog

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

pytestmark = pytest.mark.skipif(
    not SHARED_DATA.is_dir(), reason=f"the shared data folder {SHARED_DATA} is not here"
)

# Where the READMEs of the data say the files come from.
SOURCES = {
    "lattuada2022": "https://raw.githubusercontent.com/aMLLibrary/aMLLibrary/"
    "34f4d19c4297335bca339f3fe43331a14fd3565b/inputs/gpudata/",
    "sia2023": "https://raw.githubusercontent.com/siasosp23/artifacts/"
    "aaf7a0de7b6cb5eab06ea020467ede5d2fd18e70/sia-simulator/traces/",
}
FETCH = {"lattuada2022": datasets.fetch_lattuada2022, "sia2023": datasets.fetch_sia2023}


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(datasets.DATA_HOME_ENV, str(SHARED_DATA))
    datasets._load.cache_clear()
    yield
    datasets._load.cache_clear()


def _csv_rows(path: Path) -> int:
    with path.open(newline="") as file:
        return sum(1 for _ in csv.reader(file)) - 1


def _no_network(url: str) -> bytes:
    raise AssertionError(f"unexpected download of {url}")


class FakeGitHub:
    """Serves the shared files at their raw.githubusercontent.com URLs and counts requests."""

    def __init__(self, corrupt: str | None = None) -> None:
        self.requests: list[str] = []
        self.corrupt = corrupt

    def __call__(self, url: str) -> bytes:
        self.requests.append(url)
        for name, prefix in SOURCES.items():
            if url.startswith(prefix):
                rel = url[len(prefix) :]
                content = (SHARED_DATA / name / rel).read_bytes()
                if rel == self.corrupt:
                    content = content.replace(b"1", b"2", 1)
                return content
        raise urllib.error.URLError(f"404 for {url}")


# ---------------------------------------------------------------- lattuada2022
def test_lattuada2022_has_one_row_per_csv_row() -> None:
    table = datasets.fetch_lattuada2022()
    files = sorted((SHARED_DATA / "lattuada2022").glob("*.csv"))
    assert len(files) == 17
    counts = table.groupby("file").size()
    for path in files:
        assert counts[path.stem] == _csv_rows(path), path.name
    assert len(table) == sum(_csv_rows(p) for p in files)


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


# ---------------------------------------------------------------- sia2023
def test_sia2023_has_one_row_per_csv_row() -> None:
    table = datasets.fetch_sia2023()
    files = sorted((SHARED_DATA / "sia2023").glob("*/placements-*.csv"))
    assert len(files) == 30
    counts = table.groupby(["network", "cluster"]).size()
    for path in files:
        cluster = path.stem.removeprefix("placements-")
        assert counts[(path.parent.name, cluster)] == _csv_rows(path), path
    assert len(table) == sum(_csv_rows(p) for p in files)


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


# ---------------------------------------------------------------- caching, download, errors
@pytest.mark.parametrize("name", sorted(FETCH))
def test_tables_are_cached_per_process_and_returned_as_copies(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(datasets, "_download", _no_network)
    first = FETCH[name]()
    first.loc[0, "time_s"] = -1.0
    second = FETCH[name]()
    assert second.loc[0, "time_s"] > 0
    assert datasets._load.cache_info().hits == 1


@pytest.mark.parametrize("name", sorted(FETCH))
def test_download_verifies_and_caches_files(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = FETCH[name]()
    github = FakeGitHub()
    monkeypatch.setattr(datasets, "_download", github)
    table = FETCH[name](data_home=tmp_path)
    pd.testing.assert_frame_equal(table, expected)
    shared = sorted(p.relative_to(SHARED_DATA) for p in (SHARED_DATA / name).rglob("*.csv"))
    assert sorted(github.requests) == sorted(
        SOURCES[name] + str(p.relative_to(name)) for p in shared
    )
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()) == shared
    # Another process (an empty in-memory cache) reads the files on disk: no download.
    datasets._load.cache_clear()
    monkeypatch.setattr(datasets, "_download", _no_network)
    pd.testing.assert_frame_equal(FETCH[name](data_home=tmp_path), expected)


def test_a_corrupted_download_is_an_error_and_is_not_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(datasets, "_download", FakeGitHub(corrupt="vgg19_pt.csv"))
    with pytest.raises(ChecksumError) as info:
        datasets.fetch_lattuada2022(data_home=tmp_path)
    message = str(info.value)
    assert SOURCES["lattuada2022"] + "vgg19_pt.csv" in message
    assert datasets._LATTUADA2022.files["vgg19_pt.csv"] in message  # the expected hash
    assert re.search(r"SHA-256 [0-9a-f]{64}", message)  # and the actual one
    assert "nothing was saved" in message
    folder = tmp_path / "lattuada2022"
    assert not (folder / "vgg19_pt.csv").exists()
    assert not list(folder.glob(".*"))  # no partial files left behind
    # the next call keeps the good files already on disk and fetches only the others
    missing = [f for f in datasets._LATTUADA2022.files if not (folder / f).exists()]
    assert "vgg19_pt.csv" in missing and len(missing) < 17
    github = FakeGitHub()
    monkeypatch.setattr(datasets, "_download", github)
    datasets.fetch_lattuada2022(data_home=tmp_path)
    assert sorted(github.requests) == sorted(SOURCES["lattuada2022"] + f for f in missing)


def test_a_modified_local_file_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datasets, "_download", FakeGitHub())
    datasets.fetch_sia2023(data_home=tmp_path)
    path = tmp_path / "sia2023" / "ncf" / "placements-rtx.csv"
    path.write_text(path.read_text() + "1,32,0.1,0.001\n")
    datasets._load.cache_clear()
    with pytest.raises(ChecksumError, match=r"placements-rtx\.csv is not the published file"):
        datasets.fetch_sia2023(data_home=tmp_path)


def test_no_local_copy_and_no_network_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def offline(url: str) -> bytes:
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(datasets, "_download", offline)
    with pytest.raises(DatasetNotFoundError) as info:
        datasets.fetch_sia2023(data_home=tmp_path)
    message = str(info.value)
    assert "GPUPERF_DATA_HOME" in message and "connect to the internet" in message
    assert "name resolution" in message
    assert isinstance(info.value, FileNotFoundError)


def test_download_if_missing_false_never_downloads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(datasets, "_download", _no_network)
    with pytest.raises(DatasetNotFoundError, match="download_if_missing=False"):
        datasets.fetch_lattuada2022(data_home=tmp_path, download_if_missing=False)
    # a complete local copy needs no network either way
    table = datasets.fetch_lattuada2022(data_home=SHARED_DATA, download_if_missing=False)
    assert len(table) > 0


def test_data_home_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert datasets.get_data_home(tmp_path) == tmp_path
    assert datasets.get_data_home() == SHARED_DATA  # the fixture sets GPUPERF_DATA_HOME
    monkeypatch.delenv(datasets.DATA_HOME_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert datasets.get_data_home() == tmp_path / "cache" / "gpuperf_magics" / "datasets"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    expected = tmp_path / "home" / ".cache" / "gpuperf_magics" / "datasets"
    assert datasets.get_data_home() == expected


def test_default_home_downloads_into_the_user_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(datasets.DATA_HOME_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(datasets, "_download", FakeGitHub())
    datasets.fetch_lattuada2022()
    assert (tmp_path / "gpuperf_magics" / "datasets" / "lattuada2022" / "vgg19_tf.csv").is_file()


def test_fetchers_take_keyword_arguments_only() -> None:
    fetch: Callable[..., pd.DataFrame]
    for fetch in FETCH.values():
        with pytest.raises(TypeError):
            fetch(str(SHARED_DATA))


def test_an_unwritable_data_home_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    not_a_folder = tmp_path / "data_home"
    not_a_folder.write_text("a file, not a folder")
    monkeypatch.setattr(datasets, "_download", FakeGitHub())
    with pytest.raises(OSError, match=r"cannot save it to .*a folder you can write to"):
        datasets.fetch_lattuada2022(data_home=not_a_folder)
