"""How a Prediction reads: the table, the header, text and HTML (gpuperf_magics.prediction.display)."""

from __future__ import annotations

import math

import pandas as pd

from gpuperf_magics.prediction import display
from gpuperf_magics.prediction.record import Prediction


def _prediction(**overrides) -> Prediction:
    frame = pd.DataFrame({
        "batch_size": [32, 64], "gpu": ["Tesla T4", None], "gpu_count": [2, 0],
        "iterations": [1000, 500], "time_s": [3725.0, 60.0], "time_low_s": [3600.0, 50.0],
        "time_high_s": [3900.0, 70.0], "per_iteration_s": [3.725, 0.12],
        "kind": ["interpolation", "extrapolation"], "detail": ["", "beyond batch 32"],
        "expected_mape": [0.05, 0.2],
    })
    fields = {"network": "resnet<18>", "frame": frame, "cv_mape": 0.042, "runs": 3,
              "measured": "batch 16, 32 on Tesla T4", "notes": ["a <note>"],
              "advice": ["profile batch 64"]}
    fields.update(overrides)
    return Prediction(**fields)


def test_table_has_one_row_per_configuration() -> None:
    table = display.table(_prediction())
    assert list(table["configuration"]) == ["batch 32 · 2× Tesla T4", "batch 64 · CPU"]
    assert table["predicted time"].iloc[0] == "1:02:05"
    assert table["kind"].iloc[1] == "extrapolation: beyond batch 32"
    assert table["expected error"].iloc[0] == "±5%"


def test_header_says_what_the_model_learnt_from_and_where_each_error_comes_from() -> None:
    assert display.header(_prediction(public_errors=False)) == (
        "resnet<18>: fitted on 3 run(s) (batch 16, 32 on Tesla T4); cross-validated error "
        "(MAPE) 4.2% on moves to unmeasured batch sizes; each row's expected error is "
        "validated on these runs")
    assert display.header(_prediction(public_errors=True)).endswith(
        "validated on these runs, or the public data's figure where too few predictions of "
        "its kind were")
    # No cross-validated figure beside rows of ±5%: the header says the rows' figure is the
    # public one, not "n/a" (one statement of the error).
    unvalidated = display.header(_prediction(cv_mape=math.nan, public_errors=True))
    assert "n/a" not in unvalidated and "not cross-validated" in unvalidated
    assert unvalidated.endswith("each row's expected error is the public data's figure for "
                                "its kind of prediction")


def test_labels_are_flat_and_a_measured_configuration_says_measured() -> None:
    assert display.label("interpolation", "measured configuration (median of its runs)") == (
        "measured: median of its runs")
    assert display.label("extrapolation", "batch_size 8 < measured min 16 (3 points, "
                         "piecewise linear)") == (
        "extrapolation: batch_size 8 < measured min 16 (3 points, piecewise linear)")
    assert display.label("transfer", "to A (from B (learnt GPU move))") == (
        "transfer: to A (from B, learnt GPU move)")
    assert display.label("interpolation", "") == "interpolation"


def test_text_and_html_carry_notes_and_advice() -> None:
    p = _prediction()
    assert str(p) == display.as_text(p)
    assert "note: a <note>" in str(p) and "advice: profile batch 64" in str(p)
    page = p._repr_html_()
    assert "resnet&lt;18&gt;" in page and "a &lt;note&gt;" in page and "<table" in page


def test_set_features_are_part_of_the_configuration() -> None:
    p = _prediction()
    p.frame["depth"] = [50.0, 101.0]
    p.frame.attrs["set_columns"] = ["depth"]
    assert display.table(p)["configuration"].iloc[0].endswith("· depth=50")


def test_html_cells_carry_their_spacing_inside_a_widget_too() -> None:
    import re

    page = display.as_html(_prediction())
    cells = re.findall(r"<t[hd](?=[\s>])[^>]*>", page)
    assert cells and all(f"style='{display.CELL_STYLE}'" in c for c in cells)
    assert f"<th style='{display.CELL_STYLE}'>kind</th>" in page


def _with_memory(**columns) -> Prediction:
    """Two A10G rows of a network whose batch 1024 needs 41 GiB (the A10G has 24)."""
    base = _prediction()
    frame = pd.DataFrame({
        "batch_size": [256, 1024], "gpu": ["NVIDIA A10G"] * 2, "gpu_count": [1, 1],
        "iterations": [100, 100], "time_s": [10.0, 40.0], "time_low_s": [9.0, 30.0],
        "time_high_s": [11.0, 50.0], "per_iteration_s": [0.1, 0.4],
        "kind": ["interpolation", "extrapolation"], "detail": ["", ""],
        "expected_mape": [0.05, 0.2], "memory_gb": [11.0, 41.0], "gpu_memory_gb": [24.0] * 2,
        "fits": pd.array([True, False], dtype="boolean"),
        "largest_batch": pd.array([512, 512], dtype="Int64"), **columns})
    return Prediction(**{**base.__dict__, "frame": frame, "notes": [], "advice": []})


def test_a_gpu_memory_column_and_a_plain_line_for_a_batch_that_will_not_fit() -> None:
    shown = _with_memory()
    assert list(display.table(shown)["GPU memory"]) == ["11 of 24 GB",
                                                        "41 of 24 GB (won't fit)"]
    line = ("batch 1024 needs about 41 GB; the A10G has 24 GB: the largest batch that fits "
            "is about 512")
    assert display.memory_lines(shown.frame) == [line]
    assert line in display.as_text(shown).splitlines()
    assert f"<p class='gpuperf-memory'>{line}</p>" in display.as_html(shown)
    # Where no run measured a peak the column would only say "—": it is left out.
    assert "GPU memory" not in display.table(_prediction()).columns
    unknown = _with_memory(memory_gb=[math.nan] * 2,
                           fits=pd.array([None, None], dtype="boolean"))
    assert "GPU memory" not in display.table(unknown).columns
    assert display.memory_lines(unknown.frame) == []


def test_the_line_on_several_gpus_and_several_batches() -> None:
    shown = _with_memory(gpu_count=[4, 4], memory_gb=[30.0, 41.0],
                         fits=pd.array([False, False], dtype="boolean"),
                         largest_batch=pd.array([128, 128], dtype="Int64"))
    assert display.memory_lines(shown.frame) == [
        "batch 256 needs about 30 GB, batch 1024 about 41 GB per GPU; each of the 4 A10Gs "
        "has 24 GB: the largest batch that fits is about 128"]
    nothing = _with_memory(fits=pd.array([False, False], dtype="boolean"),
                           largest_batch=pd.array([0, 0], dtype="Int64"))
    assert display.memory_lines(nothing.frame)[0].endswith("24 GB: not even batch 1 fits")
