"""What GPU a name refers to: real device names, tolerant spellings, documented defaults,
ambiguous and unknown names with close matches, every name of the public datasets."""

from __future__ import annotations

import csv
import pickle
from pathlib import Path

import pytest
from catalog_rows import gpu_rows
from shared_data import NO_DATA, SHARED_DATA

from gpuperf_magics.hardware import catalog, gpu_names
from gpuperf_magics.hardware.catalog import UnknownGPUError

# No GPUs added by add_gpus before or during a test (conftest.no_user_gpus).
pytestmark = pytest.mark.usefixtures("no_user_gpus")

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
        ("T5", "Tesla T4"),  # a model number too short for a spelling ratio
        ("L5", "NVIDIA L4"),
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


def test_every_row_resolves_to_itself_by_name_and_alias() -> None:
    for row in gpu_rows():
        assert catalog.match(row["name"]) == row["name"]
        for alias in filter(None, (a.strip() for a in row["aliases"].split(";"))):
            assert catalog.match(alias) == row["name"], alias


def test_every_family_with_variants_has_a_default() -> None:
    families: dict[str, list[str]] = {}
    for row in gpu_rows():
        families.setdefault(gpu_names._split(row["name"]).family, []).append(row["name"])
    for family, names in families.items():
        if len(names) > 1:
            assert catalog.match(family) in names, family


def _column(path: Path, column: str) -> set[str]:
    with path.open(newline="", encoding="utf-8") as file:
        return {row[column] for row in csv.DictReader(file)}


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=NO_DATA)
def test_every_gpu_named_in_the_public_datasets_resolves_to_its_row() -> None:
    from gpuperf_magics.datasets import lattuada2022, sia2023

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
    assert len(gflops) >= 4 and gflops <= set(lattuada2022.GPUS)
    for name in lattuada2022.GPUS.values():
        assert catalog.match(name) == name, name
    # sia2023 names clusters; the dataset module maps each to a GPU.
    clusters = {p.stem.removeprefix("placements-") for p in SHARED_DATA.glob("sia2023/*/*.csv")}
    assert clusters == set(sia2023.GPUS)
    for name in sia2023.GPUS.values():
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
