"""The GPU spec catalog: real device names, tolerant matching, user GPUs, sane figures."""

from __future__ import annotations

import csv
import math
import pickle
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from gpuperf_magics.hardware import catalog
from gpuperf_magics.hardware.catalog import UnknownGPUError
from gpuperf_magics.hardware.gpu import architecture_name, cuda_cores_per_sm


@pytest.fixture(autouse=True)
def _no_user_gpus() -> Iterator[None]:
    catalog.clear_user_gpus()
    yield
    catalog.clear_user_gpus()


# Device names as NVML / torch.cuda.get_device_name() report them -> the catalog row.
REAL_NAMES = {
    "Tesla V100-SXM2-16GB": "Tesla V100-SXM2-16GB",
    "Tesla V100-PCIE-32GB": "Tesla V100-PCIE-32GB",
    "NVIDIA A100-SXM4-40GB": "NVIDIA A100-SXM4-40GB",
    "NVIDIA A100 80GB PCIe": "NVIDIA A100 80GB PCIe",
    "NVIDIA A100-SXM4-80GB": "NVIDIA A100-SXM4-80GB",
    "NVIDIA A100-PCIE-40GB": "NVIDIA A100-PCIE-40GB",
    "A100-SXM4-40GB": "NVIDIA A100-SXM4-40GB",  # drivers before R470 had no "NVIDIA "
    "NVIDIA H100 80GB HBM3": "NVIDIA H100 80GB HBM3",
    "NVIDIA H100 PCIe": "NVIDIA H100 PCIe",
    "NVIDIA H100 NVL": "NVIDIA H100 NVL",
    "NVIDIA H200": "NVIDIA H200",
    "NVIDIA L4": "NVIDIA L4",
    "NVIDIA L40": "NVIDIA L40",
    "NVIDIA L40S": "NVIDIA L40S",
    "NVIDIA A10G": "NVIDIA A10G",
    "NVIDIA A10": "NVIDIA A10",
    "NVIDIA A2": "NVIDIA A2",
    "NVIDIA A30": "NVIDIA A30",
    "NVIDIA A40": "NVIDIA A40",
    "Tesla T4": "Tesla T4",
    "Tesla K80": "Tesla K80",
    "Tesla M60": "Tesla M60",
    "Tesla P100-PCIE-16GB": "Tesla P100-PCIE-16GB",
    "Tesla P100-SXM2-16GB": "Tesla P100-SXM2-16GB",
    "Tesla P4": "Tesla P4",
    "NVIDIA GeForce RTX 3090": "NVIDIA GeForce RTX 3090",
    "NVIDIA GeForce RTX 4090": "NVIDIA GeForce RTX 4090",
    "GeForce GTX 1080 Ti": "NVIDIA GeForce GTX 1080 Ti",
    "NVIDIA GeForce GTX 1080 Ti": "NVIDIA GeForce GTX 1080 Ti",
    "NVIDIA GeForce RTX 2080 Ti": "NVIDIA GeForce RTX 2080 Ti",
    "GeForce RTX 2080 Ti": "NVIDIA GeForce RTX 2080 Ti",
    "Quadro RTX 6000": "Quadro RTX 6000",
    "NVIDIA RTX A6000": "NVIDIA RTX A6000",
    "NVIDIA RTX 6000 Ada Generation": "NVIDIA RTX 6000 Ada Generation",
    "NVIDIA B200": "NVIDIA B200",
    "Quadro P600": "Quadro P600",
    "GeForce GT 750M": "NVIDIA GeForce GT 750M",
    "NVIDIA TITAN RTX": "NVIDIA TITAN RTX",
    "Tesla K40m": "Tesla K40c",
    "Quadro M6000 24GB": "Quadro M6000 24GB",
    "Quadro RTX 8000": "Quadro RTX 8000",
    "NVIDIA GeForce GTX 1060 3GB": "NVIDIA GeForce GTX 1060 3GB",
    "GeForce GTX TITAN X": "NVIDIA GeForce GTX TITAN X",
    "TITAN X (Pascal)": "NVIDIA TITAN X (Pascal)",
    "NVIDIA TITAN Xp": "NVIDIA TITAN Xp",
    "NVIDIA GeForce RTX 2080 SUPER": "NVIDIA GeForce RTX 2080 SUPER",
    "NVIDIA GeForce RTX 3090 Ti": "NVIDIA GeForce RTX 3090 Ti",
    "NVIDIA GeForce RTX 4070 Ti SUPER": "NVIDIA GeForce RTX 4070 Ti SUPER",
    "NVIDIA GeForce RTX 5090": "NVIDIA GeForce RTX 5090",
    "NVIDIA GeForce RTX 4090 Laptop GPU": "NVIDIA GeForce RTX 4090 Laptop GPU",
    "NVIDIA GeForce RTX 2080 with Max-Q Design": "NVIDIA GeForce RTX 2080 with Max-Q Design",
    "NVIDIA RTX A2000 12GB": "NVIDIA RTX A2000 12GB",
    "NVIDIA RTX 4000 SFF Ada Generation": "NVIDIA RTX 4000 SFF Ada Generation",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition":
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
    "NVIDIA A800-SXM4-80GB": "NVIDIA A800-SXM4-80GB",
    "NVIDIA H800 PCIe": "NVIDIA H800 PCIe",
    "NVIDIA H20": "NVIDIA H20",
    "NVIDIA L20": "NVIDIA L20",
    "NVIDIA GH200 480GB": "NVIDIA GH200 480GB",
    "NVIDIA GH200 144G HBM3e": "NVIDIA GH200 144G HBM3e",
    "NVIDIA GB200": "NVIDIA GB200",
}


@pytest.mark.parametrize(("name", "expected"), REAL_NAMES.items())
def test_real_device_names_resolve_to_their_row(name: str, expected: str) -> None:
    assert catalog.match(name) == expected
    specs = catalog.lookup(name)
    assert specs["gpu_name"] == expected
    assert specs["gpu_fp32_tflops"] > 0


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("V100", "Tesla V100-SXM2-16GB"),
        ("Tesla V100", "Tesla V100-SXM2-16GB"),
        ("V100 32GB", "Tesla V100-SXM2-32GB"),
        ("v100 pcie", "Tesla V100-PCIE-16GB"),
        ("V100-PCIE 32 GB", "Tesla V100-PCIE-32GB"),
        ("A100", "NVIDIA A100-SXM4-40GB"),
        ("a100 80gb", "NVIDIA A100-SXM4-80GB"),
        ("A100 80 GB", "NVIDIA A100-SXM4-80GB"),
        ("A100 40g", "NVIDIA A100-SXM4-40GB"),
        ("A100 PCIe", "NVIDIA A100-PCIE-40GB"),
        ("NVIDIA A100-SXM-80GB", "NVIDIA A100-SXM4-80GB"),
        ("H100", "NVIDIA H100 80GB HBM3"),
        ("H100 SXM", "NVIDIA H100 80GB HBM3"),
        ("h100 sxm5", "NVIDIA H100 80GB HBM3"),
        ("H100 94GB", "NVIDIA H100 NVL"),
        ("H200", "NVIDIA H200"),
        ("H200 NVL", "NVIDIA H200 NVL"),
        ("P100", "Tesla P100-PCIE-16GB"),
        ("P100 SXM2", "Tesla P100-SXM2-16GB"),
        ("P100 12GB", "Tesla P100-PCIE-12GB"),
        ("A800", "NVIDIA A800-SXM4-80GB"),
        ("A800 PCIe", "NVIDIA A800 80GB PCIe"),
        ("H800", "NVIDIA H800"),
        ("H800 80GB", "NVIDIA H800"),
        ("H800 PCIe", "NVIDIA H800 PCIe"),
        ("GH200", "NVIDIA GH200 480GB"),
        ("GH200 144GB", "NVIDIA GH200 144G HBM3e"),
        ("GTX 1060", "NVIDIA GeForce GTX 1060 6GB"),
        ("GTX 1060 3GB", "NVIDIA GeForce GTX 1060 3GB"),
        ("Tesla M40", "Tesla M40"),
        ("M40 24GB", "Tesla M40 24GB"),
        ("Quadro M6000", "Quadro M6000"),
        ("RTX A2000", "NVIDIA RTX A2000"),
    ],
)
def test_ambiguous_names_take_the_documented_variant(name: str, expected: str) -> None:
    assert catalog.match(name) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("rtx4090", "NVIDIA GeForce RTX 4090"),
        ("RTX_4090", "NVIDIA GeForce RTX 4090"),
        ("geforce-rtx-4090", "NVIDIA GeForce RTX 4090"),
        ("4090", "NVIDIA GeForce RTX 4090"),
        ("RTX 4090 24GB", "NVIDIA GeForce RTX 4090"),
        ("A6000", "NVIDIA RTX A6000"),
        ("Quadro RTX 6000", "Quadro RTX 6000"),
        ("quadro-rtx-6000", "Quadro RTX 6000"),
        ("RTX 8000", "Quadro RTX 8000"),
        ("RTX 6000 Ada", "NVIDIA RTX 6000 Ada Generation"),
        ("6000ada", "NVIDIA RTX 6000 Ada Generation"),
        ("gtx 1080ti", "NVIDIA GeForce GTX 1080 Ti"),
        ("GT 750M", "NVIDIA GeForce GT 750M"),
        ("a10g", "NVIDIA A10G"),
        ("A10", "NVIDIA A10"),
        ("L4", "NVIDIA L4"),
        ("l40s", "NVIDIA L40S"),
        ("T4", "Tesla T4"),
        ("V100S", "Tesla V100S-PCIE-32GB"),
        ("pci-e v100 16gb", "Tesla V100-PCIE-16GB"),
        ("NVIDIA A100-SXM4-40GB MIG 1g.5gb", "NVIDIA A100-SXM4-40GB"),
        ("NVIDIA H100 80GB HBM3 MIG 3g.40gb", "NVIDIA H100 80GB HBM3"),
        ("  tesla   t4  ", "Tesla T4"),
        ("4090 laptop", "NVIDIA GeForce RTX 4090 Laptop GPU"),
        ("RTX 4090 Mobile", "NVIDIA GeForce RTX 4090 Laptop GPU"),
        ("RTX 2080 Max-Q", "NVIDIA GeForce RTX 2080 with Max-Q Design"),
        ("rtx 2080 super max-q", "NVIDIA GeForce RTX 2080 Super with Max-Q Design"),
        ("3080 laptop", "NVIDIA GeForce RTX 3080 Laptop GPU"),
        ("GTX TITAN X", "NVIDIA GeForce GTX TITAN X"),
        ("Titan Xp", "NVIDIA TITAN Xp"),
        ("K40", "Tesla K40c"),
        ("P6000", "Quadro P6000"),
        ("RTX 4000 Ada", "NVIDIA RTX 4000 Ada Generation"),
        ("RTX PRO 6000 Blackwell", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"),
        ("4070 ti super", "NVIDIA GeForce RTX 4070 Ti SUPER"),
    ],
)
def test_spellings_are_tolerated(name: str, expected: str) -> None:
    assert catalog.match(name) == expected


@pytest.mark.parametrize(
    ("name", "close"),
    [
        ("NVIDIA GeForce RTX 3090 SUPER", "NVIDIA GeForce RTX 3090"),
        ("NVIDIA H900", "NVIDIA H800"),
        ("Tesla V100-SXM3-32GB", "Tesla V100-SXM2-32GB"),
        ("A100 48GB", "NVIDIA A100-SXM4-40GB"),
        ("H10O", "NVIDIA H100 80GB HBM3"),  # a typo in the model number
        ("4090 ultra", "NVIDIA GeForce RTX 4090"),  # the model number, another product
        ("tesla v10", "Tesla V100-SXM2-16GB"),
    ],
)
def test_unknown_names_raise_with_close_matches(name: str, close: str) -> None:
    with pytest.raises(UnknownGPUError) as info:
        catalog.lookup(name)
    error = info.value
    assert isinstance(error, ValueError)
    assert close in error.candidates
    assert close in str(error)
    assert "add_gpus" in str(error)
    assert catalog.match(name) is None


@pytest.mark.parametrize(
    ("name", "misspelt"),
    [
        ("V1OO", "Tesla V100-SXM2-16GB"),  # letters O for zeros
        ("A1OO", "NVIDIA A100-SXM4-40GB"),
        ("H10O", "NVIDIA H100 80GB HBM3"),
        ("RTX 3O90", "NVIDIA GeForce RTX 3090"),
        ("A100 80BG", "NVIDIA A100-SXM4-80GB"),  # a garbled memory unit
        ("NVIDIA GeForce RTX 3090 SUPER", "NVIDIA GeForce RTX 3090"),  # same model number
        ("4090 ultra", "NVIDIA GeForce RTX 4090"),  # the desktop card before the laptop one
        ("Telsa T4", "Tesla T4"),
    ],
)
def test_misspelt_names_suggest_the_intended_gpu_first(name: str, misspelt: str) -> None:
    with pytest.raises(UnknownGPUError) as info:
        catalog.lookup(name)
    assert info.value.candidates[0] == misspelt
    assert f"Close matches: {misspelt}" in str(info.value)


@pytest.mark.parametrize(
    ("name", "both"),
    [
        ("2080", ("NVIDIA GeForce RTX 2080", "NVIDIA GeForce RTX 2080 Ti")),
        ("1080", ("NVIDIA GeForce GTX 1080", "NVIDIA GeForce GTX 1080 Ti")),
        ("Titan", ("NVIDIA TITAN V", "NVIDIA TITAN RTX")),
        # Different GPUs that share a short name: the Turing Quadro and the Ada card.
        ("RTX 6000", ("Quadro RTX 6000", "NVIDIA RTX 6000 Ada Generation")),
        ("NVIDIA RTX 6000", ("Quadro RTX 6000", "NVIDIA RTX 6000 Ada Generation")),
        ("RTX 5000", ("Quadro RTX 5000", "NVIDIA RTX 5000 Ada Generation")),
        ("RTX 4000", ("Quadro RTX 4000", "NVIDIA RTX 4000 Ada Generation")),
        ("TITAN X", ("NVIDIA GeForce GTX TITAN X", "NVIDIA TITAN X (Pascal)")),
        ("3090", ("NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 3090 Ti")),
    ],
)
def test_names_that_fit_several_gpus_are_ambiguous(name: str, both: tuple[str, str]) -> None:
    with pytest.raises(UnknownGPUError, match="ambiguous") as info:
        catalog.lookup(name)
    assert set(both) <= set(info.value.candidates)
    assert catalog.match(name) is None


def test_an_ambiguous_name_lists_the_choices_with_what_tells_them_apart() -> None:
    with pytest.raises(UnknownGPUError) as info:
        catalog.lookup("RTX 6000")
    message = str(info.value)
    assert "Quadro RTX 6000 (Turing, 16.3 TFLOPS FP32)" in message
    assert "NVIDIA RTX 6000 Ada Generation (Ada Lovelace, 91.1 TFLOPS FP32)" in message
    assert "give the full name" in message


def test_a_name_without_laptop_means_the_desktop_card() -> None:
    assert catalog.match("4090") == "NVIDIA GeForce RTX 4090"
    assert catalog.match("RTX 3080") == "NVIDIA GeForce RTX 3080"
    assert catalog.match("2070 max-q") == "NVIDIA GeForce RTX 2070 with Max-Q Design"
    # Only a notebook GPU carries the number: it is the one meant.
    assert catalog.match("750M") == "NVIDIA GeForce GT 750M"


@pytest.mark.parametrize("name", ["", "   ", "NVIDIA", "gpu 16GB", "foo"])
def test_names_without_a_model_are_unknown(name: str) -> None:
    with pytest.raises(UnknownGPUError):
        catalog.lookup(name)


def test_unknown_gpu_error_survives_pickling() -> None:
    with pytest.raises(UnknownGPUError) as info:
        catalog.lookup("RTX 3090 SUPER")
    copy = pickle.loads(pickle.dumps(info.value))
    assert str(copy) == str(info.value)
    assert copy.candidates == info.value.candidates


def test_lookup_returns_plain_features_in_a_fresh_dict() -> None:
    specs = catalog.lookup("NVIDIA A10G")
    assert set(specs) == {"gpu_name"} | {c for c in catalog.COLUMNS if c.startswith("gpu_")}
    assert specs["gpu_tf32_tflops"] is None  # not published for the A10G
    assert type(specs["gpu_sm_count"]) is int
    assert type(specs["gpu_fp32_tflops"]) is float
    specs["gpu_fp32_tflops"] = -1.0
    assert catalog.lookup("NVIDIA A10G")["gpu_fp32_tflops"] > 0


def test_lookups_are_cached() -> None:
    catalog.lookup("Tesla T4")
    before = catalog._resolve.cache_info().hits
    for _ in range(100):
        catalog.lookup("Tesla T4")
    assert catalog._resolve.cache_info().hits == before + 100


def test_gpus_is_the_table_and_a_copy() -> None:
    table = catalog.gpus()
    assert list(table.columns) == list(catalog.COLUMNS)
    assert table["name"].is_unique
    assert str(table["gpu_sm_count"].dtype) == "Int64"
    assert table["gpu_fp32_tflops"].dtype == "float64"
    table.loc[0, "gpu_fp32_tflops"] = -1.0
    assert (catalog.gpus()["gpu_fp32_tflops"] > 0).all()


def test_the_package_exposes_gpus() -> None:
    import gpuperf_magics

    assert gpuperf_magics.gpus()["name"].tolist() == catalog.gpus()["name"].tolist()


# ---------------------------------------------------------------- the figures themselves
def _rows() -> list[dict]:
    return catalog.gpus().to_dict("records")


def _given(value: object) -> bool:
    return value is not None and value is not pd.NA and not pd.isna(value)


def test_every_row_resolves_to_itself_by_name_and_alias() -> None:
    for row in _rows():
        assert catalog.match(row["name"]) == row["name"]
        for alias in filter(None, (a.strip() for a in row["aliases"].split(";"))):
            assert catalog.match(alias) == row["name"], alias


def test_every_family_with_variants_has_a_default() -> None:
    families: dict[str, list[str]] = {}
    for row in _rows():
        families.setdefault(catalog._split(row["name"]).family, []).append(row["name"])
    for family, names in families.items():
        if len(names) > 1:
            assert catalog.match(family) in names, family


def test_the_catalog_covers_at_least_120_gpus_each_with_a_source() -> None:
    rows = _rows()
    assert len(rows) >= 120
    assert all(row["source"].strip() for row in rows)
    kinds = {row["form_factor"] for row in rows}
    assert {"PCIe", "SXM2", "SXM4", "SXM5", "laptop"} <= kinds
    names = {row["name"] for row in rows}
    for name in ("Tesla K40c", "Tesla P40", "NVIDIA A800-SXM4-80GB", "NVIDIA H800", "NVIDIA H20",
                 "NVIDIA L20", "NVIDIA GH200 480GB", "NVIDIA B200", "NVIDIA GB200",
                 "Quadro M6000", "Quadro P6000", "Quadro RTX 8000", "NVIDIA RTX A5000",
                 "NVIDIA RTX 2000 Ada Generation",
                 "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
                 "NVIDIA GeForce GTX 980 Ti", "NVIDIA GeForce GTX 1050 Ti",
                 "NVIDIA GeForce GTX 1660 SUPER", "NVIDIA GeForce RTX 2060 SUPER",
                 "NVIDIA GeForce RTX 3080 Ti", "NVIDIA GeForce RTX 4080 SUPER",
                 "NVIDIA GeForce RTX 5090", "NVIDIA GeForce GTX TITAN X",
                 "NVIDIA TITAN X (Pascal)", "NVIDIA TITAN Xp", "NVIDIA TITAN V",
                 "NVIDIA TITAN RTX", "NVIDIA GeForce RTX 4090 Laptop GPU"):
        assert name in names, name


def test_every_row_has_the_required_figures_and_a_source() -> None:
    for row in _rows():
        for column in catalog.REQUIRED:
            assert _given(row[column]) and row[column] != "", (row["name"], column)
        assert row["source"], row["name"]
        assert row["gpu_bandwidth_gbs"] > 0 and row["gpu_memory_gb"] > 0
        assert 2010 <= row["gpu_release_year"] <= 2030


def test_fp32_peak_is_cores_times_two_times_boost_clock() -> None:
    without_clock = set()
    for row in _rows():
        if not _given(row["gpu_clock_mhz"]):
            # Boost clocks NVIDIA does not publish are left empty, deliberately, and said so.
            assert "clock" in row["notes"] and "left empty" in row["notes"], row["name"]
            without_clock.add(row["name"])
            continue
        computed = row["gpu_cuda_cores"] * 2 * row["gpu_clock_mhz"] / 1e6
        assert row["gpu_fp32_tflops"] == pytest.approx(computed, rel=0.03), row["name"]
    assert {"NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA B200"} <= without_clock


def test_cores_and_architecture_agree_with_the_compute_capability() -> None:
    # The same tables gpuperf_magics.hardware.gpu uses for devices it detects.
    for row in _rows():
        major, minor = divmod(round(row["gpu_compute_capability"] * 10), 10)
        assert row["gpu_architecture"] == architecture_name(major, minor), row["name"]
        if not _given(row["gpu_sm_count"]):
            assert not _given(row["gpu_cuda_cores"]), row["name"]
            assert "SM count" in row["notes"] and "left empty" in row["notes"], row["name"]
            continue
        per_sm = cuda_cores_per_sm(major, minor)
        assert row["gpu_cuda_cores"] == row["gpu_sm_count"] * per_sm, row["name"]


def test_tensor_peaks_fit_the_architecture() -> None:
    for row in _rows():
        capability = row["gpu_compute_capability"]
        if _given(row["gpu_tf32_tflops"]):
            assert capability >= 8.0, row["name"]
            assert row["gpu_tf32_tflops"] >= row["gpu_fp32_tflops"] * 0.99, row["name"]
        elif capability >= 8.0:
            # Only GPUs whose tensor peaks NVIDIA does not publish (or the catalog could not
            # check) may lack them, and the notes say so.
            assert "left empty" in row["notes"], row["name"]
        if _given(row["gpu_fp16_tflops"]):
            assert row["gpu_fp16_tflops"] > row["gpu_fp32_tflops"], row["name"]
            if _given(row["gpu_tf32_tflops"]):
                assert row["gpu_fp16_tflops"] >= row["gpu_tf32_tflops"], row["name"]


def test_the_datasets_gpus_are_in_the_catalog() -> None:
    # lattuada2022's GFLOPS figures: whole K80/M60 boards at base clock, the others at the
    # catalog's clock.
    k80, m60 = catalog.lookup("Tesla K80"), catalog.lookup("Tesla M60")
    assert 2 * k80["gpu_cuda_cores"] * 2 * 560 / 1e6 == pytest.approx(5.591, rel=1e-3)
    assert 2 * m60["gpu_cuda_cores"] * 2 * 899 / 1e6 == pytest.approx(7.365, rel=1e-3)
    assert catalog.lookup("GeForce GTX 1080 Ti")["gpu_fp32_tflops"] == pytest.approx(11.339, 1e-3)
    assert catalog.lookup("Quadro P600")["gpu_fp32_tflops"] == pytest.approx(1.195, rel=0.01)
    assert catalog.lookup("GeForce GT 750M")["gpu_fp32_tflops"] == pytest.approx(0.742, 1e-2)


SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def _column(path: Path, column: str) -> set[str]:
    with path.open(newline="", encoding="utf-8") as file:
        return {row[column] for row in csv.DictReader(file)}


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"{SHARED_DATA} is not here")
def test_every_gpu_named_in_the_public_datasets_resolves_to_its_row() -> None:
    from gpuperf_magics import datasets

    # lambda2025: the NVML device name (`gpu`) and the name the run log gave (`gpu_reported`,
    # older drivers: "A100-PCIE-80GB", "RTX A4000", "GeForce RTX 2080 with Max-Q Design").
    path = SHARED_DATA / "lambda2025" / "lambda_pytorch.csv"
    with path.open(newline="", encoding="utf-8") as file:
        pairs = {(row["gpu"], row["gpu_reported"]) for row in csv.DictReader(file)}
    assert len({gpu for gpu, _ in pairs}) == 34
    for gpu, reported in sorted(pairs):
        assert catalog.match(gpu) == gpu, gpu
        assert catalog.match(reported) == gpu, reported
    # gavel2020: K80, P100, V100 as the catalog names them.
    for gpu in _column(SHARED_DATA / "gavel2020" / "gavel.csv", "gpu"):
        assert catalog.match(gpu) == gpu, gpu
    # lattuada2022 names its GPUs by GFLOPS only (the depth files have one GPU and no such
    # column); every figure in the files maps to a GPU.
    gflops = set()
    for path in (SHARED_DATA / "lattuada2022").glob("*.csv"):
        if "GFlops(7)" in path.read_text(encoding="utf-8").partition("\n")[0]:
            gflops |= {round(float(v)) for v in _column(path, "GFlops(7)")}
    assert len(gflops) >= 4 and gflops <= set(datasets._LATTUADA_GPUS)
    for name in datasets._LATTUADA_GPUS.values():
        assert catalog.match(name) == name, name
    # sia2023 names clusters; the dataset module maps each to a GPU.
    clusters = {p.stem.removeprefix("placements-") for p in SHARED_DATA.glob("sia2023/*/*.csv")}
    assert clusters == set(datasets._SIA_GPUS)
    for name in datasets._SIA_GPUS.values():
        assert catalog.match(name) == name, name
    # The GPUs as the data sets' READMEs spell them.
    readme = {
        "GeForce GT 750M": "NVIDIA GeForce GT 750M",
        "Quadro P600": "Quadro P600",
        "Tesla K80": "Tesla K80",
        "Tesla M60": "Tesla M60",
        "GeForce GTX 1080 Ti": "NVIDIA GeForce GTX 1080 Ti",
        "Tesla V100 32 GB": "Tesla V100-SXM2-32GB",
        "A100 40 GB SXM4": "NVIDIA A100-SXM4-40GB",
        "Quadro RTX 6000": "Quadro RTX 6000",
        "GeForce RTX 2080 Ti": "NVIDIA GeForce RTX 2080 Ti",
    }
    for spelling, name in readme.items():
        assert catalog.match(spelling) == name, spelling


# ---------------------------------------------------------------- user GPUs
USER_CSV = """\
# my lab's GPUs
name,aliases,gpu_compute_capability,gpu_memory_gb,gpu_bandwidth_gbs,gpu_fp32_tflops,source
NVIDIA Example 9000,EX9K;Example Nine Thousand,8.9,32,1200,50.5,vendor sheet
Tesla T4,,7.5,16,300,8.1,our measured bandwidth
"""


def test_add_gpus_from_a_csv_adds_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "gpus.csv"
    path.write_text(USER_CSV)
    builtin_rows = len(catalog.gpus())
    assert catalog.match("Example 9000") is None
    assert catalog.add_gpus(path) == ["NVIDIA Example 9000", "Tesla T4"]
    table = catalog.gpus()
    assert len(table) == builtin_rows + 1  # the T4 replaced its built-in row
    assert catalog.match("example-9000") == "NVIDIA Example 9000"
    assert catalog.match("EX9K") == "NVIDIA Example 9000"
    assert catalog.lookup("Example 9000")["gpu_fp32_tflops"] == 50.5
    t4 = catalog.lookup("Tesla T4")
    assert t4["gpu_bandwidth_gbs"] == 300.0
    assert t4["gpu_sm_count"] == 40  # figures the row leaves empty keep the built-in ones
    assert table.loc[table["name"] == "Tesla T4", "source"].item() == "our measured bandwidth"
    catalog.clear_user_gpus()
    assert catalog.match("Example 9000") is None
    assert catalog.lookup("Tesla T4")["gpu_bandwidth_gbs"] == 320.0


def test_add_gpus_from_a_dataframe_fills_the_source() -> None:
    frame = pd.DataFrame(
        [{"name": "Lab GPU", "gpu_memory_gb": 8, "gpu_bandwidth_gbs": 256.0, "gpu_fp32_tflops": 6}]
    )
    assert catalog.add_gpus(frame) == ["Lab GPU"]
    row = catalog.gpus().set_index("name").loc["Lab GPU"]
    assert row["source"] == "user-supplied"
    assert pd.isna(row["gpu_tf32_tflops"])
    assert catalog.lookup("lab gpu")["gpu_memory_gb"] == 8.0


def test_a_later_add_replaces_an_earlier_one() -> None:
    base = {"gpu_memory_gb": 8, "gpu_bandwidth_gbs": 256, "gpu_fp32_tflops": 6}
    catalog.add_gpus(pd.DataFrame([{"name": "Lab GPU", **base}]))
    catalog.add_gpus(pd.DataFrame([{"name": "Lab GPU", **base, "gpu_fp32_tflops": 7}]))
    assert catalog.lookup("Lab GPU")["gpu_fp32_tflops"] == 7.0
    assert (catalog.gpus()["name"] == "Lab GPU").sum() == 1


BAD_CSV = """\
name,gpu_compute_capability,gpu_memory_gb,gpu_bandwidth_gbs,gpu_fp32_tflops,gpu_tf32_tflops,gpu_sm_count
Good GPU,8.0,40,1500,19.5,156,108
Slow GPU,7.0,16,fast,15.7,,80
Negative GPU,8.6,24,600,-1,,72
Old TF32 GPU,7.5,16,320,8.1,65,40
,8.0,40,1500,19.5,,108
Good GPU,8.0,40,1500,19.5,,108
Half SM GPU,8.0,40,1500,19.5,,10.5
No Memory GPU,8.0,,1500,19.5,,108
"""


def test_add_gpus_rejects_bad_rows_with_clear_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(BAD_CSV)
    before = catalog.gpus()
    with pytest.raises(ValueError) as info:
        catalog.add_gpus(path)
    message = str(info.value)
    assert str(path) in message
    assert "row 2 ('Slow GPU'): 'gpu_bandwidth_gbs' must be a number, got 'fast'" in message
    assert "row 3 ('Negative GPU'): 'gpu_fp32_tflops' must be a finite number > 0" in message
    assert "row 4 ('Old TF32 GPU'): 'gpu_tf32_tflops' given but TF32" in message
    assert "row 5: 'name' is empty" in message
    assert "row 6 ('Good GPU'): duplicate name" in message
    assert "row 7 ('Half SM GPU'): 'gpu_sm_count' must be a whole number" in message
    assert "row 8 ('No Memory GPU'): 'gpu_memory_gb' is required" in message
    assert "row 1" not in message
    pd.testing.assert_frame_equal(catalog.gpus(), before)  # nothing was added
    assert catalog.match("Good GPU") is None


def test_add_gpus_rejects_unknown_and_missing_columns() -> None:
    with pytest.raises(ValueError, match=r"unknown column\(s\) 'tflops'.*allowed: name"):
        catalog.add_gpus(pd.DataFrame([{"name": "X", "tflops": 1.0}]))
    with pytest.raises(ValueError, match="missing required column"):
        catalog.add_gpus(pd.DataFrame([{"name": "X", "gpu_fp32_tflops": 1.0}]))
    with pytest.raises(ValueError, match="no GPU rows"):
        catalog.add_gpus(pd.DataFrame(columns=["name"]))


def test_builtin_table_passes_the_user_validation() -> None:
    table = catalog.gpus()
    _, errors = catalog._validate(table.astype(object), required=catalog.REQUIRED)
    assert errors == []
    assert not any(math.isnan(v) for v in table["gpu_fp32_tflops"])


def test_a_partial_row_corrects_a_builtin_gpu_and_keeps_the_rest() -> None:
    import pandas as pd

    try:
        names = catalog.add_gpus(pd.DataFrame([{
            "name": "tesla t4", "gpu_memory_gb": 16, "gpu_bandwidth_gbs": 300,
            "gpu_fp32_tflops": 8.1}]))
        assert names == ["Tesla T4"]  # the canonical spelling stays
        row = catalog.lookup("T4")  # the built-in aliases still resolve
        assert row["gpu_name"] == "Tesla T4" and row["gpu_bandwidth_gbs"] == 300
        assert row["gpu_architecture"] == "Turing" and row["gpu_sm_count"] == 40
        assert row["gpu_fp16_tflops"] == 65
        source = catalog.gpus().set_index("name").loc["Tesla T4", "source"]
        assert source.startswith("user-supplied; other figures: ")
    finally:
        catalog.clear_user_gpus()


# ------------------------------------------------------- canonical names for every caller
def test_canonical_name_is_the_catalogs_spelling() -> None:
    assert catalog.canonical_name("t4") == "Tesla T4"
    assert catalog.canonical_name("NVIDIA A100-SXM4-80GB MIG 1g.10gb") == "NVIDIA A100-SXM4-80GB"
    with pytest.raises(UnknownGPUError, match="Close matches"):
        catalog.canonical_name("V1OO")
    with pytest.raises(UnknownGPUError, match="ambiguous"):
        catalog.canonical_name("RTX 6000")


def test_canonical_names_keep_order_and_drop_repeats() -> None:
    assert catalog.canonical_names(["T4", "v100", "tesla t4", "Tesla T4"]) == [
        "Tesla T4", "Tesla V100-SXM2-16GB"]
    assert catalog.canonical_names("a100 80gb") == ["NVIDIA A100-SXM4-80GB"]
    assert catalog.canonical_names(None) == [] and catalog.canonical_names([]) == []
    assert catalog.canonical_names(iter(["L4"])) == ["NVIDIA L4"]
    with pytest.raises(UnknownGPUError):
        catalog.canonical_names(["T4", "A10O"])
    with pytest.raises(ValueError, match=r"GPU names \(strings\), got 4090"):
        catalog.canonical_names([4090])  # type: ignore[list-item]


def test_find_gives_the_figures_or_none() -> None:
    row = catalog.find("tesla t4")
    assert row == catalog.lookup("T4") and row is not catalog.find("T4")
    for name in ("V1OO", "RTX 6000", "", "  ", None, math.nan):
        assert catalog.find(name) is None, name  # type: ignore[arg-type]


def test_a_user_gpu_is_found_by_its_name() -> None:
    catalog.add_gpus(pd.DataFrame([{"name": "Lab GPU 9000", "gpu_memory_gb": 48,
                                    "gpu_bandwidth_gbs": 900, "gpu_fp32_tflops": 40}]))
    assert catalog.canonical_name("lab gpu 9000") == "Lab GPU 9000"
    found = catalog.find("Lab GPU 9000")
    assert found is not None and found["gpu_fp32_tflops"] == 40
