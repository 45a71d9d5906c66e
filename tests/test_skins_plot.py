"""The what-if panel's plot (gpuperf_magics.skins.plot): batch sizes drawn, the figure, its PNG."""

from __future__ import annotations

import base64

import pandas as pd
import pytest

import gpuperf_magics as gm
from gpuperf_magics.skins import plot
from gpuperf_magics.skins.widgets import what_if

pytest.importorskip("matplotlib")


# The what-if panel's two stores (conftest): real profiled CPU runs, imported T4 rows.
@pytest.fixture
def store(mlp_runs_store):
    return mlp_runs_store


@pytest.fixture
def imported(imported_t4_store):
    return imported_t4_store


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


# --------------------------------------------------------------------------- plot and offers
def _lines(panel) -> dict[str, object]:
    return {line.get_label(): line for line in panel.figure.axes[0].lines
            if not line.get_label().startswith("_")}


def test_plot_draws_time_against_batch_size_with_measured_points_and_band(imported):
    panel = what_if(imported, iterations=1000)
    lines = _lines(panel)
    assert set(lines) == {"T4 (extrapolated)", "T4 (interpolated)",
                          "measured (× the job's iterations)"}
    assert list(lines["T4 (extrapolated)"].get_xdata()) == [8, 16, 32, 64, 128, 256, 512]
    assert lines["T4 (extrapolated)"].get_linestyle() == "--"
    assert list(lines["T4 (interpolated)"].get_xdata()) == [16, 32, 64, 128]
    assert lines["T4 (interpolated)"].get_linestyle() == "-"
    points = lines["measured (× the job's iterations)"]
    # The imported per-step times (0.01 + 0.001 × batch) × the job's 1,000 iterations.
    assert list(points.get_xdata()) == [16, 32, 64, 128]
    assert list(points.get_ydata()) == pytest.approx([26, 42, 74, 138])
    assert len(panel.figure.axes[0].collections) == 1  # the interval band
    assert "image/png" in panel.plot.outputs[0]["data"]
    before = list(lines["T4 (extrapolated)"].get_ydata())
    panel.iterations.value = 2000
    after = list(_lines(panel)["T4 (extrapolated)"].get_ydata())
    assert after == pytest.approx([2 * t for t in before])


def test_plot_keeps_the_measured_device_beside_a_chosen_gpu(store):
    # Runs profiled on the CPU have no GPU name; with pandas' text dtype it reads as NaN.
    panel = what_if(store)
    panel.gpu.value = next(g for g in panel.gpu.options if "A100" in str(g))
    lines = _lines(panel)
    here = [name for name in lines if name.startswith(panel._here)]
    assert here and all(len(lines[name].get_xdata()) > 0 for name in here)
    assert len(lines["measured (× the job's iterations)"].get_xdata()) == 3
    assert any("A100" in name and "transfer" in name for name in lines)


def test_measured_points_are_the_robust_times_the_model_learns(tmp_path):
    """A stall in a profiled run moves neither the model nor the plotted point."""
    from gpuperf_magics.run import IterationRecord, Run

    path = tmp_path / "stalls.sqlite"
    for batch, steady in ((16, 0.01), (32, 0.02)):
        durations = [0.5] + [steady] * 18 + [40 * steady]  # warm-up, steady, one stall
        gm.Store(path).save_run(Run(
            network="mlp", batch_size=batch, created_at="2026-11-01T00:00:00+00:00",
            iterations=[IterationRecord(i, d, batch, warmup=i == 0)
                        for i, d in enumerate(durations)]))
    panel = what_if(path, iterations=1000)
    points = _lines(panel)["measured (× the job's iterations)"]
    assert list(points.get_xdata()) == [16, 32]
    # The trimmed steady mean (0.01 and 0.02 s), not the raw mean with the stall (~0.03, 0.06).
    assert list(points.get_ydata()) == pytest.approx([10.0, 20.0])
    runs = gm.Store(path).runs()
    robust = gm.prediction.store_model.robust_times(gm.Store(path), runs) / runs["iterations"]
    assert list(robust) == pytest.approx([0.01, 0.02])


def test_plot_adds_the_chosen_gpu_as_a_transfer(imported):
    panel = what_if(imported, iterations=1000)
    panel.gpu.value = "NVIDIA A10G"
    lines = _lines(panel)
    assert "NVIDIA A10G (transfer)" in lines and "T4 (interpolated)" in lines
    assert lines["NVIDIA A10G (transfer)"].get_linestyle() == "--"
    assert len(panel.figure.axes[0].collections) == 2
    panel.deadline.value = 1
    assert list(_lines(panel)["deadline"].get_ydata()) == [3600, 3600]


def test_a_dollar_in_a_name_is_drawn_as_written_not_as_mathtext() -> None:
    frame = _frame().replace({"gpu": {"Tesla T4": "T4 $x^$"}})
    what = plot.JobPlot(network="net $x^$ cost", here="CPU $1", batch_size=32,
                        measured_per_iteration={32: 0.3})
    out = plot.png_output(plot.job_time_figure(frame, what), "<plot>")  # raised ValueError
    assert base64.b64decode(out["data"]["image/png"]).startswith(b"\x89PNG")
    figure = plot.job_time_figure(frame, what)
    assert figure.axes[0].get_title() == r"net \$x^\$ cost: time of the job"
    labels = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert r"T4 \$x^\$ (transfer)" in labels and r"CPU \$1 (extrapolated)" in labels


def test_the_legend_lies_outside_the_axes() -> None:
    what = plot.JobPlot(network="mlp", here="this CPU (measured)",
                        measured_per_iteration={32: 0.3, 64: 0.6}, batch_size=32,
                        deadline_s=5000.0)
    figure = plot.job_time_figure(_frame(), what)
    plot.png_output(figure, "<plot>")  # draws it
    renderer = figure.canvas.get_renderer()
    axes = figure.axes[0].get_window_extent(renderer)
    legend = figure.axes[0].get_legend().get_window_extent(renderer)
    assert not axes.overlaps(legend)
