"""The GPU spec sheet: the built-in figures are sane and sourced, and a user's rows pass the
same checks or are refused with clear errors."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from catalog_rows import gpu_rows

from gpuperf_magics.hardware import catalog
from gpuperf_magics.hardware.gpu import architecture_name, cuda_cores_per_sm

# No GPUs added by add_gpus before or during a test (conftest.no_user_gpus).
pytestmark = pytest.mark.usefixtures("no_user_gpus")


# ---------------------------------------------------------------- the figures themselves
def _given(value: object) -> bool:
    return value is not None and value is not pd.NA and not pd.isna(value)


def test_the_catalog_covers_at_least_120_gpus_each_with_a_source() -> None:
    rows = gpu_rows()
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
    for row in gpu_rows():
        for column in catalog.REQUIRED:
            assert _given(row[column]) and row[column] != "", (row["name"], column)
        assert row["source"], row["name"]
        assert row["gpu_bandwidth_gbs"] > 0 and row["gpu_memory_gb"] > 0
        assert 2010 <= row["gpu_release_year"] <= 2030


def test_fp32_peak_is_cores_times_two_times_boost_clock() -> None:
    without_clock = set()
    for row in gpu_rows():
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
    for row in gpu_rows():
        major, minor = divmod(round(row["gpu_compute_capability"] * 10), 10)
        assert row["gpu_architecture"] == architecture_name(major, minor), row["name"]
        if not _given(row["gpu_sm_count"]):
            assert not _given(row["gpu_cuda_cores"]), row["name"]
            assert "SM count" in row["notes"] and "left empty" in row["notes"], row["name"]
            continue
        per_sm = cuda_cores_per_sm(major, minor)
        assert row["gpu_cuda_cores"] == row["gpu_sm_count"] * per_sm, row["name"]


def test_tensor_peaks_fit_the_architecture() -> None:
    for row in gpu_rows():
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
