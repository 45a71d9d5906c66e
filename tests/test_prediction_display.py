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
