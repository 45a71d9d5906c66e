"""The GPU catalog's API: lookups, the table, user GPUs added and corrected, canonical names."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from catalog_rows import gpu_rows

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


# ------------------------------------------------------------- tensor peaks by precision
#: The catalog's architectures, oldest first; tensor cores from Volta, TF32/BF16 from Ampere.
ARCHITECTURES = ("Kepler", "Maxwell", "Pascal", "Volta", "Turing", "Ampere", "Ada Lovelace",
                 "Hopper", "Blackwell")
#: Rows with tensor cores whose peaks no source here gives (their notes say "left empty").
UNSOURCED = {"NVIDIA A10G", "NVIDIA RTX 4000 Ada Generation"}


def _since(row: dict, architecture: str) -> bool:
    return ARCHITECTURES.index(row["gpu_architecture"]) >= ARCHITECTURES.index(architecture)


def _has(value: object) -> bool:
    return value is not None and not pd.isna(value)


def test_every_tensor_core_row_has_its_peaks_and_a_source() -> None:
    rows = gpu_rows()
    assert {row["gpu_architecture"] for row in rows} <= set(ARCHITECTURES)
    tensor = [r for r in rows if _since(r, "Volta") and "no tensor cores" not in r["notes"]]
    assert len(tensor) >= 90
    missing = {r["name"] for r in tensor if not _has(r["gpu_fp16_tflops"])}
    assert missing == UNSOURCED
    for row in tensor:
        name = row["name"]
        if name in UNSOURCED:
            assert "left empty" in row["notes"], name
            continue
        assert _has(row["gpu_tf32_tflops"]) == _since(row, "Ampere"), name
        assert _has(row["gpu_bf16_tflops"]) == _since(row, "Ampere"), name
        assert "datasheet" in row["source"] or "whitepaper" in row["source"] or (
            "specifications" in row["source"]), name
        if "derived" in row["notes"]:  # a derived figure names the whitepaper of its rate
            assert "whitepaper" in row["source"], name


def test_gpus_without_tensor_cores_have_no_tensor_peaks() -> None:
    for row in gpu_rows():
        if not _since(row, "Ampere"):  # Volta and Turing have FP16 tensor cores only
            assert not _has(row["gpu_bf16_tflops"]), row["name"]
            assert not _has(row["gpu_tf32_tflops"]), row["name"]
        if "no tensor cores" in row["notes"] and row["gpu_architecture"] != "Pascal":
            assert not _has(row["gpu_fp16_tflops"]), row["name"]  # the P100's is packed FP16


def test_peaks_are_ordered_as_the_sources_say() -> None:
    for row in gpu_rows():
        fp32, tf32 = row["gpu_fp32_tflops"], row["gpu_tf32_tflops"]
        fp16, bf16 = row["gpu_fp16_tflops"], row["gpu_bf16_tflops"]
        if not _has(fp16) or not _since(row, "Volta"):
            continue
        assert fp16 >= 2 * fp32 * 0.99, row["name"]  # tensor cores at least double FP32
        if _since(row, "Ampere"):
            # BF16 accumulates in FP32 and runs at the FP16 rate; TF32 at half of it (B200's
            # sheet rounds: 1100 of 2250), and never below the FP32 peak.
            assert bf16 == fp16, row["name"]
            assert tf32 == pytest.approx(fp16 / 2, rel=0.025), row["name"]
            assert tf32 >= fp32 * 0.99, row["name"]


# NVIDIA's published GeForce figures (whitepaper tables) that the derived rows' rule rests on:
# dense FP32-accumulate FP16 = SMs x clock x 512 FLOP/clock (Turing through Blackwell), TF32
# = SMs x clock x 256 (Ampere and later). The rule must reproduce them.
PUBLISHED = {
    "NVIDIA GeForce RTX 2070": (None, 29.9), "NVIDIA GeForce RTX 2080": (None, 40.3),
    "NVIDIA GeForce RTX 2080 Ti": (None, 53.8), "NVIDIA GeForce RTX 3070": (20.3, 40.6),
    "NVIDIA GeForce RTX 3080": (29.8, 59.5), "NVIDIA GeForce RTX 3090": (35.6, 71),
    "NVIDIA GeForce RTX 4080": (48.7, 97.5), "NVIDIA GeForce RTX 4090": (82.6, 165.2),
    "NVIDIA GeForce RTX 5090": (104.8, 209.5),
}


def test_geforce_peaks_follow_the_whitepapers_per_sm_rates() -> None:
    rows = {row["name"]: row for row in gpu_rows()}
    for name, (tf32, fp16) in PUBLISHED.items():
        row = rows[name]
        clock_ghz = row["gpu_clock_mhz"] / 1000
        assert row["gpu_sm_count"] * clock_ghz * 512 / 1000 == pytest.approx(fp16, rel=0.01)
        if tf32 is not None:
            assert row["gpu_sm_count"] * clock_ghz * 256 / 1000 == pytest.approx(tf32, rel=0.01)
    geforce = [r for r in rows.values() if "GeForce RTX" in r["name"]]
    assert len(geforce) >= 40
    for row in geforce:  # the derived rows are the rule's figures, rounded to 0.1
        rate = row["gpu_sm_count"] * row["gpu_clock_mhz"] / 1e6
        assert row["gpu_fp16_tflops"] == pytest.approx(rate * 512, abs=0.3), row["name"]
        if _since(row, "Ampere"):
            assert row["gpu_tf32_tflops"] == pytest.approx(rate * 256, abs=0.15), row["name"]


def test_peak_gives_each_precisions_own_figure() -> None:
    a100 = catalog.lookup("A100 80GB")
    assert a100["gpu_bf16_tflops"] == 312.0
    for precision, tflops in (("fp32", 19.5), ("tf32", 156.0), ("fp16", 312.0),
                              ("bf16", 312.0), ("BFloat16", 312.0), ("half", 312.0),
                              (" FP32 ", 19.5), ("float32", 19.5)):
        got = catalog.peak("A100 80GB", precision)
        assert (got.tflops, got.reason) == (tflops, ""), precision
        assert got.precision == got.asked == catalog._precision(precision)
    assert catalog.peak(a100, "bf16") == catalog.peak("a100-sxm4-80gb", "bf16")
    assert catalog.peak("RTX 4090", "bf16").tflops == 165.2  # GeForce: FP32-accumulate rate
    assert set(catalog.PRECISIONS.values()) <= set(catalog.COLUMNS)


def test_peak_falls_back_where_the_gpu_has_no_such_tensor_cores() -> None:
    t4 = catalog.peak("Tesla T4", "bf16")
    assert (t4.tflops, t4.precision, t4.asked) == (8.1, "fp32", "bf16")
    assert t4.reason == ("Tesla T4 has no BF16 tensor cores (compute capability 7.5; they "
                         "need 8.0): the FP32 peak")
    v100 = catalog.peak("V100", "tf32")
    assert (v100.tflops, v100.precision) == (15.7, "fp32") and "7.0; they need 8.0" in v100.reason
    assert catalog.peak("V100", "fp16").tflops == 125.0
    k80 = catalog.peak("K80", "fp16")
    assert (k80.tflops, k80.precision) == (4.37, "fp32") and "need 7.0" in k80.reason


def test_peak_falls_back_where_the_figure_is_unknown() -> None:
    a10g = catalog.peak("A10G", "bf16")  # Ampere, but no source gives its tensor peaks
    assert (a10g.tflops, a10g.precision) == (31.52, "fp32")
    assert a10g.reason == "no BF16 tensor peak is known for NVIDIA A10G: the FP32 peak"
    catalog.add_gpus(pd.DataFrame([{
        "name": "Lab Ampere", "gpu_compute_capability": 8.6, "gpu_memory_gb": 24,
        "gpu_bandwidth_gbs": 900, "gpu_fp32_tflops": 30, "gpu_fp16_tflops": 120}]))
    lab = catalog.peak("Lab Ampere", "bf16")  # BF16 unknown, FP16 known: the FP16 rate
    assert (lab.tflops, lab.precision, lab.asked) == (120.0, "fp16", "bf16")
    assert lab.reason.startswith("no BF16 tensor peak is known for Lab Ampere: the FP16 peak")
    bare = catalog.peak({"gpu_fp32_tflops": 10.0, "gpu_tf32_tflops": math.nan}, "tf32")
    assert (bare.tflops, bare.precision) == (10.0, "fp32") and "the GPU" in bare.reason


def test_peak_refuses_an_unknown_precision_or_gpu() -> None:
    with pytest.raises(ValueError, match=r"one of 'fp32', 'tf32', 'fp16', 'bf16'.*got 'int8'"):
        catalog.peak("A100", "int8")
    with pytest.raises(UnknownGPUError):
        catalog.peak("V1OO", "fp16")


def test_a_bf16_peak_needs_ampere() -> None:
    frame = pd.DataFrame([{"name": "Old BF16 GPU", "gpu_compute_capability": 7.5,
                           "gpu_memory_gb": 16, "gpu_bandwidth_gbs": 320,
                           "gpu_fp32_tflops": 8.1, "gpu_bf16_tflops": 65}])
    with pytest.raises(ValueError, match=r"'gpu_bf16_tflops' given but BF16 tensor cores need "
                                         r"compute capability 8.0 or newer \(got 7.5\)"):
        catalog.add_gpus(frame)
    assert catalog.match("Old BF16 GPU") is None


@pytest.mark.parametrize(("name", "note"), [
    ("A100", "A100 → NVIDIA A100-SXM4-40GB (also: NVIDIA A100 80GB PCIe, "
             "NVIDIA A100-PCIE-40GB, NVIDIA A100-SXM4-80GB; name one to choose)"),
    ("a100 80gb", "a100 80gb → NVIDIA A100-SXM4-80GB (also: NVIDIA A100 80GB PCIe; "
                  "name one to choose)"),
    ("NVIDIA A100-SXM4-40GB", None), ("NVIDIA H100 80GB HBM3", None), ("T4", None), ("4090", None), ("4090 laptop", None),
])
def test_a_short_name_that_fits_several_variants_says_which_it_took(name, note):
    assert catalog.choice_note(name) == note
    assert catalog.variants(name)[0] == catalog.canonical_name(name)


def test_a_choice_note_of_an_ambiguous_or_unknown_name_is_the_lookup_error():
    with pytest.raises(catalog.UnknownGPUError, match="ambiguous"):
        catalog.choice_note("RTX 6000")
    with pytest.raises(catalog.UnknownGPUError, match="unknown GPU"):
        catalog.choice_note("Z9000")
