"""The GPU catalog's API: lookups, the table, user GPUs added and corrected, canonical names."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from gpuperf_magics.hardware import catalog
from gpuperf_magics.hardware.catalog import UnknownGPUError

# No GPUs added by add_gpus before or during a test (conftest.no_user_gpus).
pytestmark = pytest.mark.usefixtures("no_user_gpus")


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
