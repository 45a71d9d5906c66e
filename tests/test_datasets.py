"""Public datasets (the package's fetchers): local copies, checksummed downloads (through a
fake network), caching, errors."""

from __future__ import annotations

import re
import urllib.error
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from shared_data import NO_DATA, SHARED_DATA

from gpuperf_magics import datasets
from gpuperf_magics.datasets import ChecksumError, DatasetNotFoundError, lattuada2022

# The shared data folder as the data home, and an empty table cache (conftest).
pytestmark = [
    pytest.mark.skipif(
        not SHARED_DATA.is_dir(), reason=NO_DATA
    ),
    pytest.mark.usefixtures("fresh_datasets_cache"),
]


# Where the READMEs of the data say the files come from.
SOURCES = {
    "lattuada2022": "https://raw.githubusercontent.com/aMLLibrary/aMLLibrary/"
    "34f4d19c4297335bca339f3fe43331a14fd3565b/inputs/gpudata/",
    "sia2023": "https://raw.githubusercontent.com/siasosp23/artifacts/"
    "aaf7a0de7b6cb5eab06ea020467ede5d2fd18e70/sia-simulator/traces/",
}


FETCH = {"lattuada2022": datasets.fetch_lattuada2022, "sia2023": datasets.fetch_sia2023}


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
    assert lattuada2022.DATASET.files["vgg19_pt.csv"] in message  # the expected hash
    assert re.search(r"SHA-256 [0-9a-f]{64}", message)  # and the actual one
    assert "nothing was saved" in message
    folder = tmp_path / "lattuada2022"
    assert not (folder / "vgg19_pt.csv").exists()
    assert not list(folder.glob(".*"))  # no partial files left behind
    # the next call keeps the good files already on disk and fetches only the others
    missing = [f for f in lattuada2022.DATASET.files if not (folder / f).exists()]
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
    monkeypatch.delenv(datasets.DATA_HOME_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert datasets.get_data_home() == tmp_path / "cache" / "gpuperf_magics" / "datasets"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    expected = tmp_path / "home" / ".cache" / "gpuperf_magics" / "datasets"
    assert datasets.get_data_home() == expected


def test_data_home_default_is_platformdirs_user_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default follows platformdirs' rule for the platform, as the store's folder does."""
    import platformdirs

    monkeypatch.delenv(datasets.DATA_HOME_ENV, raising=False)
    cache = Path(platformdirs.user_cache_dir("gpuperf_magics", appauthor=False))
    assert datasets.get_data_home() == cache / "datasets"


def test_default_home_downloads_into_the_user_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(datasets.DATA_HOME_ENV, raising=False)
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
