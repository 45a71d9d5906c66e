"""The what-if panel's plot (gpuperf_magics.plot): batch sizes drawn, the figure, its PNG."""

from __future__ import annotations

import base64

import pandas as pd
import pytest

from gpuperf_magics import plot

pytest.importorskip("matplotlib")


def test_batch_sizes_span_the_measured_range_and_the_asked_one() -> None:
    assert plot.batch_sizes([16, 64], 48) == [8, 16, 32, 48, 64, 128, 256]
    assert plot.batch_sizes([], 32) == [16, 32, 64, 128]


def _frame() -> pd.DataFrame:
    batches = [16, 32, 64, 128]
    rows = [{"batch_size": b, "gpu": gpu, "iterations": 100, "time_s": t * b,
             "time_low_s": 0.9 * t * b, "time_high_s": 1.1 * t * b}
            for gpu, t in ((None, 1.0), ("Tesla T4", 0.1)) for b in batches]
    return pd.DataFrame(rows)


def test_figure_has_a_curve_per_device_and_the_measured_points() -> None:
    what = plot.JobPlot(network="mlp", here="this CPU (measured)",
                        measured_per_iteration={32: 0.3, 64: 0.6}, batch_size=32,
                        deadline_s=5000.0)
    figure = plot.job_time_figure(_frame(), what)
    labels = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert labels == ["this CPU (measured) (extrapolated)", "this CPU (measured) (interpolated)",
                      "measured (× the job's iterations)", "Tesla T4 (transfer)", "deadline"]
    points = figure.axes[0].lines[2]
    assert list(points.get_ydata()) == pytest.approx([30.0, 60.0])


def test_png_output_is_one_display_output() -> None:
    what = plot.JobPlot(network="mlp", here="T4", measured_per_iteration={},
                        batch_size=32)
    out = plot.png_output(plot.job_time_figure(_frame(), what), "<plot>")
    assert out["output_type"] == "display_data" and out["data"]["text/plain"] == "<plot>"
    assert base64.b64decode(out["data"]["image/png"]).startswith(b"\x89PNG")
