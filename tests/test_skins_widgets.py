"""The what-if panel on stores filled by real profiled CPU runs and by imported tables."""

from __future__ import annotations

import html
import re
from typing import Any

import pandas as pd
import pytest
from made_runs import per_step_times

import gpuperf_magics as gm
from gpuperf_magics.hardware.catalog import UnknownGPUError
from gpuperf_magics.prediction.store_model import PredictionError
from gpuperf_magics.skins.widgets import WhatIfPanel, what_if

ASSUMED = "no dataset size recorded for 'resnet': assuming 50,000 samples per epoch"


def iterations(panel) -> int:
    """The job's iterations in the panel's answer (one row: the chosen configuration)."""
    assert len(panel.answer.frame) == 1
    return int(panel.answer.frame["iterations"].iloc[0])


# The what-if panel's two stores (conftest): real profiled CPU runs, imported T4 rows.
@pytest.fixture
def store(mlp_runs_store):
    return mlp_runs_store


@pytest.fixture
def imported(imported_t4_store):
    return imported_t4_store


def _import_unfittable(path) -> None:
    """Rows of a GPU the catalog lacks: the import takes them (its figures are given), but
    no model can place the GPU, so fitting the network fails."""
    figures = {"gpu_fp32_tflops": 10.0, "gpu_bandwidth_gbs": 500.0}
    gm.Store(path).import_table(per_step_times("bad", **figures), gpu="Foo GPU 9000")


def test_panel_answers_and_follows_the_controls(store):
    panel = what_if(store)
    assert isinstance(panel, WhatIfPanel)
    first = panel.text
    assert "expected error" in first
    # 10 epochs of the profiled loader's 256 samples at the latest batch size (32).
    assert panel.batch_size.value == 32 and iterations(panel) == 80 and " 80 " in first
    assert panel.samples.value == 256 and "note:" not in first
    assert panel.iterations.value == 80 and panel.iterations.disabled
    panel.epochs.value = 100
    assert panel.text != first
    assert iterations(panel) == 100 * 256 // panel.batch_size.value
    panel.batch_size.value = 16
    assert "measured: median of its runs" in panel.text
    panel.batch_size.value = 1024
    assert "extrapolation" in panel.text
    panel.gpu.value = "Tesla T4"
    one_gpu = panel.text
    assert "transfer" in one_gpu
    panel.gpu_count.value = 4
    assert "transfer" in panel.text and panel.text != one_gpu


def test_assumed_dataset_size_is_shown_until_samples_is_set(imported):
    panel = what_if(imported)
    assert panel.samples.value == 50_000 and panel.epochs.value == 10
    # ceil(50,000 / 128) = 391 iterations per epoch at the latest batch size.
    assert iterations(panel) == 3910
    assert ASSUMED in panel.text and "set samples / epoch to your dataset" in panel.text
    panel.epochs.value = 2
    panel.batch_size.value = 64
    assert iterations(panel) == 1564 and ASSUMED in panel.text
    panel.samples.value = 6_400
    assert iterations(panel) == 200 and "note:" not in panel.text
    panel.samples.value = 50_000  # the user's own figure now, even if it is the default
    assert "note:" not in panel.text


def test_assumed_dataset_size_is_not_noted_when_the_answer_does_not_use_it(imported):
    panel = what_if(imported, iterations=100)
    assert iterations(panel) == 100 and "note:" not in panel.text
    panel.length.value = "epochs"
    assert ASSUMED in panel.text


def test_a_network_without_dataset_size_does_not_inherit_another_ones(store, tmp_path):
    path = tmp_path / "both.sqlite"
    gm.Store(store).export(tmp_path / "runs.csv")
    gm.Store(path).import_table(tmp_path / "runs.csv")
    gm.Store(path).import_table(per_step_times("resnet"), gpu="T4")
    panel = what_if(path, "mlp")
    assert panel.samples.value == 256 and "note:" not in panel.text
    panel.network.value = "resnet"
    assert "no dataset size recorded for 'resnet': assuming 256 samples per epoch" in panel.text
    assert panel.gpu.value == "T4"  # the measured device of the new network


def test_starting_gpus_are_matched_tolerantly_and_listed_first(store):
    panel = what_if(store, gpus=["a100 80gb", "T4"], gpu_count=2)
    assert panel.gpu.value == "NVIDIA A100-SXM4-80GB"
    assert list(panel.gpu.options[:3]) == ["this CPU (measured)", "NVIDIA A100-SXM4-80GB",
                                           "Tesla T4"]
    assert panel.gpu_count.value == 2 and "transfer" in panel.text
    panel.gpu.value = "Tesla T4"
    assert "transfer" in panel.text


def test_gpu_count_on_a_cpu_answer_says_it_is_unused(store):
    panel = what_if(store, gpu_count=4)
    assert "GPUs = 4 applies to a GPU" in panel.text
    panel.gpu.value = "Tesla T4"
    assert "transfer" in panel.text and "note:" not in panel.text


def test_the_measured_gpu_asked_for_by_another_name_is_the_measured_device(imported):
    panel = what_if(imported, gpus=["tesla t4"])
    assert panel.gpu.value == "T4" and "Tesla T4" not in panel.gpu.options
    assert panel.answer.frame["kind"].iloc[0] != "transfer"


def test_unknown_gpu_is_refused_with_close_matches(store):
    # "A10O" reads as the A100 with a letter O for a zero first, then as the A10 it starts with.
    with pytest.raises(UnknownGPUError,
                       match="Close matches: NVIDIA A100-SXM4-40GB, NVIDIA A10, NVIDIA A10G"):
        what_if(store, gpus=["T4", "A10O"])
    with pytest.raises(ValueError, match="GPU names"):
        what_if(store, gpus=[4090])


def test_unknown_network_and_empty_store_still_raise(store, tmp_path):
    with pytest.raises(PredictionError, match="known networks: 'mlp'"):
        what_if(store, "resnet")
    with pytest.raises(PredictionError, match="no completed run"):
        what_if(tmp_path / "empty.sqlite")


def test_unfittable_latest_network_opens_with_the_error_and_others_to_pick(imported):
    _import_unfittable(imported)
    panel = what_if(imported)
    assert panel.network.value == "bad" and list(panel.network.options) == ["resnet", "bad"]
    text = panel.text
    assert "cannot fit a model for 'bad'" in text and "unknown GPU 'Foo GPU 9000'" in text
    assert "Choose another network above." in text and "Traceback" not in text
    assert "expected error" not in text
    panel.network.value = "resnet"
    assert iterations(panel) == 3910 and "expected error" in panel.text
    assert panel.gpu.value == "T4"
    panel.network.value = "bad"
    assert "cannot fit a model for 'bad'" in panel.text
    panel.batch_size.value = 8  # no answer to give, and no exception from the observer
    assert "cannot fit a model for 'bad'" in panel.text


def test_unfittable_only_network_opens_with_the_error(tmp_path):
    path = tmp_path / "bad.sqlite"
    _import_unfittable(path)
    panel = what_if(path, batch_sizes=[32])
    assert "unknown GPU 'Foo GPU 9000'" in panel.text
    assert "Choose another network" not in panel.text
    assert panel.batch_size.value == 32 and panel.gpu.value == "Foo GPU 9000"


def test_magic_widget_flag(ip, store):
    panel = ip.run_line_magic("predict_time", f"--store {store} --widget -q -o")
    assert isinstance(panel, WhatIfPanel)
    assert panel.network.value == "mlp"


def test_feature_controls_follow_the_network(imported):
    depths = pd.DataFrame({"network": "deep", "batch_size": [16, 32, 16, 32, 64],
                           "depth": [18, 18, 50, 50, 50],
                           "time_s": [0.02, 0.03, 0.05, 0.08, 0.14]})
    gm.Store(imported).import_table(depths, gpu="T4")
    panel = what_if(imported)
    assert list(panel.features) == ["depth"] and panel.features["depth"].value == 50
    assert "expected error" in panel.text
    before = panel.text
    panel.features["depth"].value = 34  # no run at depth 34: two moves (depth, then batch)
    assert panel.text != before and "estimated points" in panel.text
    panel.network.value = "resnet"  # no depth: its model would refuse a depth setting
    assert panel.features == {} and "expected error" in panel.text


def test_magic_widget_opens_at_the_line_values(ip, store):
    panel = ip.run_line_magic(
        "predict_time",
        f"--store {store} -w --batch-size 48 --gpu T4 --epochs 3 --samples 1000 -q -v pw")
    assert panel is None and isinstance(ip.user_ns["pw"], WhatIfPanel)
    pw = ip.user_ns["pw"]
    assert pw.batch_size.value == 48 and pw.epochs.value == 3 and pw.samples.value == 1000
    assert "T4" in str(pw.gpu.value)


@pytest.mark.parametrize("line, message", [
    ("--batch-size 32,64", "one batch size"),
    ("--set depth=50", "does not take --set"),
    ("--gpu 'Voodoo 5'", "Voodoo"),
])
def test_magic_widget_errors_are_usage_errors(ip, store, line, message):
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match=message):
        ip.run_line_magic("predict_time", f"--store {store} -w {line}")


def test_offers_table_costs_marks_and_deadline_follow_the_controls(imported):
    panel = what_if(imported, iterations=10_000)
    frame = panel.offers.frame
    assert frame.iloc[0]["offer"] == "measured: T4"
    assert len(frame) == 1 + len(panel.instances.value)
    priced = frame.iloc[1:]
    assert priced["cost_usd"].to_numpy() == pytest.approx(
        (priced["time_s"] * priced["usd_per_hour"] / 3600).to_numpy())
    assert panel.offers.cheapest["cost_usd"] == priced["cost_usd"].min()
    assert panel.offers.fastest["time_s"] == priced["time_s"].min()
    assert "job cost" in panel.offers_view.value and "cheapest" in panel.offers_view.value
    assert panel.offers.within_deadline is None
    ends = sorted(priced["time_high_s"])
    panel.deadline.value = (ends[0] + ends[1]) / 2 / 3600
    assert panel.offers.within_deadline["time_high_s"] == ends[0]
    assert "cheapest within deadline" in panel.offers_view.value
    panel.instances.value = ["g5.xlarge"]
    assert list(panel.offers.frame["instance"]) == ["", "g5.xlarge"]
    panel.batch_size.value = 16  # a cheaper job: the table follows
    assert panel.offers.frame.iloc[1]["cost_usd"] < priced.iloc[0]["cost_usd"]
    panel.instances.value = []
    assert panel.offers is None and "Choose offers" in panel.offers_view.value


def test_a_users_prices_join_the_offers(imported, tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("provider,region,instance,gpu,gpus,pricing,usd_per_hour,date,source\n"
                    "acme,eu,t4-box,T4,1,on-demand,0.25,2026-11-01,quote\n")
    panel = what_if(imported, iterations=1000, prices=path)
    assert "t4-box" in panel.offers.frame["instance"].tolist()
    with pytest.raises(ValueError, match="usd_per_hour"):
        path.write_text("provider,region,instance,gpu,gpus,pricing,usd_per_hour,date,source\n"
                        "acme,eu,t4-box,T4,1,on-demand,free,2026-11-01,quote\n")
        what_if(imported, prices=path)


def test_a_price_file_is_validated_once_per_version_of_it(imported, tmp_path, monkeypatch):
    from gpuperf_magics.hardware import prices as prices_mod

    header = "provider,region,instance,gpu,gpus,pricing,usd_per_hour,date,source\n"
    path = tmp_path / "mine.csv"
    path.write_text(header + "acme,eu,t4-box,T4,1,on-demand,0.25,2026-11-01,quote\n")
    checked = []
    original = prices_mod._validate
    monkeypatch.setattr(prices_mod, "_validate",
                        lambda frame, origin: checked.append(origin) or original(frame, origin))
    panel = what_if(imported, iterations=1000, prices=path)
    checked.clear()
    for batch in (16, 32, 64):
        panel.batch_size.value = batch
    panel.deadline.value = 2
    assert checked == []  # four changes, the files unchanged: nothing validated again
    assert panel.offers.frame.set_index("instance").loc["t4-box", "usd_per_hour"] == 0.25
    path.write_text(header + "acme,eu,t4-box,T4,1,on-demand,0.35,2026-11-01,quote\n")
    panel.batch_size.value = 128
    assert checked == [f"price file {path}"]  # the new version, once; the built-in table not
    assert panel.offers.frame.set_index("instance").loc["t4-box", "usd_per_hour"] == 0.35
    panel.batch_size.value = 16
    assert len(checked) == 1


def test_changes_do_not_refit_the_model(imported, monkeypatch):
    from gpuperf_magics.model import TrainingTimeModel

    panel = what_if(imported, iterations=1000)
    fits = []
    original = TrainingTimeModel.fit
    monkeypatch.setattr(TrainingTimeModel, "fit",
                        lambda self, *a, **k: fits.append(1) or original(self, *a, **k))
    panel.batch_size.value = 32
    panel.gpu.value = "NVIDIA A10G"
    panel.deadline.value = 2
    assert fits == [] and "expected error" in panel.text


def test_one_change_predicts_once(imported, monkeypatch):
    """The answer, the plot and the offers table come from one prediction per change (the
    offers table predicted again, once per GPU count of the chosen offers)."""
    from gpuperf_magics.prediction import predict

    asked = []
    real = predict.predict_time

    def spy(store, job=None, **fields):
        asked.append(job)
        return real(store, job, **fields)

    monkeypatch.setattr(predict, "predict_time", spy)
    panel = what_if(imported, iterations=1000)
    panel.instances.value = ()  # no offers: the panel's own predictions only
    for change in (lambda: setattr(panel.batch_size, "value", 64),
                   lambda: setattr(panel.gpu, "value", "NVIDIA A10G"),
                   lambda: setattr(panel.gpu_count, "value", 2),
                   lambda: setattr(panel.iterations, "value", 2000)):
        asked.clear()
        change()
        assert len(asked) == 1, asked
    job = asked[0]
    assert job.iterations == 2000 and job.gpu_count == 2 and len(job.batch_sizes) > 1
    assert iterations(panel) == 2000 and panel.figure is not None
    # Offers of one and of several GPUs: still the panel's one prediction, and the offers'
    # rows are the ones offers() computes on its own.
    asked.clear()
    panel.instances.value = ["g4dn.xlarge", "g4dn.12xlarge"]
    assert len(asked) == 1 and panel.offers is not None
    asked.clear()
    panel.batch_size.value = 32
    assert len(asked) == 1
    alone = gm.offers(imported, panel.job().with_(gpus=None, gpu_count=None),
                      instances=["g4dn.xlarge", "g4dn.12xlarge"])
    assert list(panel.offers.frame["time_s"]) == pytest.approx(list(alone.frame["time_s"]))
    assert list(panel.offers.frame["offer"]) == list(alone.frame["offer"])


def test_the_answer_is_shown_as_predict_time_shows_a_prediction(imported):
    from gpuperf_magics.prediction import display

    panel = what_if(imported, iterations=1000)
    assert panel.answer.header() in panel.text
    assert panel.text.startswith(display.as_text(panel.answer).split("\n")[0])
    assert "gpuperf-prediction" in panel.result.value
    assert panel.answer.table().iloc[0]["iterations"] == "1,000"


def test_errors_inside_callbacks_are_shown_in_the_panel(imported):
    panel = what_if(imported, iterations=1000)

    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    panel._predict_time = broken
    panel.batch_size.value = 32  # the observer must not raise
    assert "the panel failed: RuntimeError: disk on fire" in panel.text


def test_magic_widget_opens_at_the_lines_job_and_deadline(ip, imported):
    panel = ip.run_line_magic("predict_time", f"--store {imported} -w --batch-size 64 "
                              "--iterations 500 --deadline 1:30 -q -o")
    assert panel.batch_size.value == 64 and panel.deadline.value == 1.5
    assert panel.job().deadline_s == 5400 and iterations(panel) == 500
    assert panel.offers.deadline_s == 5400


def test_magic_widget_takes_the_configured_prices(ip, imported, tmp_path):
    from IPython.core.error import UsageError

    path = tmp_path / "mine.csv"
    path.write_text("provider,region,instance,gpu,gpus,pricing,usd_per_hour,date,source\n"
                    "acme,eu,t4-box,T4,1,on-demand,0.25,2026-11-01,quote\n")
    ip.run_line_magic("config", f"GpuPerf.prices = {str(path)!r}")
    try:
        panel = ip.run_line_magic("predict_time", f"--store {imported} -w -q -o")
        assert "t4-box" in panel.offers.frame["instance"].tolist()
        path.write_text("provider,region\nacme,eu\n")
        with pytest.raises(UsageError, match="missing column"):
            ip.run_line_magic("predict_time", f"--store {imported} -w -q")
    finally:
        ip.run_line_magic("config", "GpuPerf.prices = None")


class _Published:
    """What the shell publishes: (data, display id, whether an update), as a kernel sends
    ``display_data`` and ``update_display_data``."""

    def __init__(self, ip, monkeypatch) -> None:
        self.messages: list[tuple[Any, str | None, bool]] = []

        def publish(data, metadata=None, *args, transient=None, update=False, **kwargs):
            self.messages.append((data, (transient or {}).get("display_id"), update))

        monkeypatch.setattr(ip.display_pub, "publish", publish)

    def saved(self) -> list[tuple[str, str | None, bool]]:
        return [(d["text/html"], i, u) for d, i, u in self.messages
                if "gpuperf-whatif-saved" in d.get("text/html", "")]


def test_a_saved_answer_sits_next_to_the_widgets_and_follows_them(ip, imported, monkeypatch):
    published = _Published(ip, monkeypatch)
    panel = what_if(imported, iterations=1000)
    panel._ipython_display_()
    widget = published.messages[0][0]
    assert widget["application/vnd.jupyter.widget-view+json"]["model_id"] == \
        panel.widget.model_id
    (page, display_id, update), = published.saved()
    assert display_id and not update
    assert ">1,000</td>" in page
    assert "data:image/png;base64," in page and "job cost" in page
    assert published.messages[1][0]["text/plain"] == panel.text
    # The widgets carry the style that hides the saved copy while they render.
    assert any("gpuperf-whatif-saved {display: none}" in getattr(c, "value", "")
               for c in panel.widget.children)
    panel.iterations.value = 2000
    page, same, update = published.saved()[-1]
    assert update and same == display_id and ">2,000</td>" in page


def test_the_saved_copy_follows_after_a_reload_and_a_new_display(ip, imported, monkeypatch):
    published = _Published(ip, monkeypatch)
    panel = what_if(imported, iterations=1000)
    panel._ipython_display_()
    first_id = published.saved()[0][1]
    panel.widget._view_count = 1  # the front end rendered the displayed view
    assert panel.saved_note.value == ""
    # A page reload: the new page renders the widgets again from the kernel (a view no
    # display made) and has forgotten the output the display id named.
    panel.widget._view_count = 2
    assert "The page was reloaded" in panel.saved_note.value
    assert "no longer follows" in panel.saved_note.value
    panel.batch_size.value = 32
    assert "batch 32" in published.saved()[-1][0]  # still sent, for pages that know it
    # Shown again in a new cell, by the code the note gives: a copy under the same id,
    # which every change rewrites.
    again = html.unescape(re.search(r"<code>(.+?)</code>", panel.saved_note.value).group(1))
    assert ip.run_cell(again).result is panel
    page, display_id, update = published.saved()[-1]
    assert display_id == first_id and not update and "batch 32" in page
    assert panel.saved_note.value == ""
    panel.widget._view_count = 3  # that display's own view: no reload
    assert panel.saved_note.value == ""
    panel.batch_size.value = 16
    page, display_id, update = published.saved()[-1]
    assert update and display_id == first_id and "batch 16" in page


def test_a_failing_offers_table_leaves_the_answer_and_the_plot_standing(imported, monkeypatch):
    import gpuperf_magics.prediction.offers

    panel = what_if(imported, iterations=1000)

    def broken(*args, **kwargs):
        raise PredictionError("no offers today")

    monkeypatch.setattr(gpuperf_magics.prediction.offers, "offers", broken)
    panel.batch_size.value = 32
    assert "PredictionError: no offers today" in panel.offers_view.value
    assert panel.offers is None
    assert "expected error" in panel.text and panel.figure is not None


# --------------------------------------------------------------------------- measure next
def _two_batches(path):
    """Imported T4 rows at two batch sizes (16, 32): room for a suggestion up to 512."""
    gm.Store(path).import_table(pd.DataFrame({"network": "resnet", "batch_size": [16, 32],
                                              "time_s": [0.026, 0.042]}), gpu="T4")
    return path


def test_the_panel_says_what_to_measure_next_beside_the_interval(tmp_path, monkeypatch):
    """The top suggestion of ``%predict_time --suggest`` for the panel's job, under the
    answer's interval; it follows the changes without a second prediction or a refit, and
    is not shown where nothing is left to profile."""
    from gpuperf_magics.model import TrainingTimeModel
    from gpuperf_magics.prediction import display, predict
    from gpuperf_magics.prediction.suggestions import with_suggestions

    asked, fits = [], []
    real, fit = predict.predict_time, TrainingTimeModel.fit
    monkeypatch.setattr(predict, "predict_time",
                        lambda *a, **k: asked.append(1) or real(*a, **k))
    store = _two_batches(tmp_path / "runs.sqlite")
    panel = what_if(store, iterations=1000, batch_sizes=[512])
    line = panel.measure_next
    listed = with_suggestions(real(store, panel.job()), store).advice
    assert line is not None and line == next(a for a in listed if a.startswith("profile batch"))
    assert re.fullmatch(r"profile batch (64|128|256|512) next: ±[\d.]+% → ±[\d.]+%, about .+", line)
    assert f"{display.MEASURE_NEXT}: {line}" in panel.text
    assert panel.text.index("interval") < panel.text.index("measure next") \
        < panel.text.index("advice:")
    assert f"<b>measure next:</b> {html.escape(line)}" in panel.result.value
    assert "measure next" in panel.snapshot_html()
    asked.clear()
    monkeypatch.setattr(TrainingTimeModel, "fit",
                        lambda self, *a, **k: fits.append(1) or fit(self, *a, **k))
    panel.batch_size.value = 64  # the one candidate left: 64 itself
    assert panel.measure_next.startswith("profile batch 64 next: ")
    assert asked == [1] and fits == []
    panel.batch_size.value = 32  # measured, and nothing between: no line
    assert panel.measure_next is None and "measure next" not in panel.text
    assert "expected error" in panel.text


def test_a_failing_suggestion_leaves_the_answer_standing(tmp_path, store, monkeypatch, caplog):
    """A suggestion that cannot be made (a GPU answered from CPU FLOPs) or that breaks says
    "no suggestion: <why>" in the line, is logged, and leaves the answer and plot."""
    import logging

    from gpuperf_magics.model import TrainingTimeModel

    cpu = what_if(store, iterations=1000)
    cpu.gpu.value = "Tesla T4"
    assert cpu.measure_next.startswith("no suggestion: the answer for Tesla T4 is estimated "
                                       "from the FLOPs of CPU runs")
    assert "transfer" in cpu.text and cpu.answer is not None
    panel = what_if(_two_batches(tmp_path / "runs.sqlite"), iterations=1000, batch_sizes=[512])

    def broken(self, *args, **kwargs):
        raise RuntimeError("the suggestion broke")

    monkeypatch.setattr(TrainingTimeModel, "suggest", broken)
    with caplog.at_level(logging.WARNING, logger="gpuperf_magics"):
        panel.batch_size.value = 256
    assert panel.measure_next == "no suggestion: the suggestion broke"
    assert "measure next: no suggestion: the suggestion broke" in panel.text
    assert panel.answer is not None and "expected error" in panel.text
    assert panel.figure is not None and "failed" not in panel.text
    logged = [r for r in caplog.records if "no suggestion" in r.getMessage()]
    assert logged and logged[-1].exc_info is not None
    assert logged[-1].name.startswith("gpuperf_magics.")


def test_a_batch_beyond_the_devices_memory_is_not_suggested_in_the_panel(tmp_path):
    """Peaks of 1 GiB + 1 GiB per 16 samples on a 16 GiB T4: batches 256 and 512 would not
    fit, so the line suggests a smaller one and says which were left out."""
    path = tmp_path / "runs.sqlite"
    gm.Store(path).import_table(pd.DataFrame({
        "network": "resnet", "batch_size": [16, 32], "time_s": [0.026, 0.042],
        "peak_memory_gb": [2.0, 3.0]}), gpu="T4")
    panel = what_if(path, iterations=1000, batch_sizes=[512])
    line = panel.measure_next
    assert re.match(r"profile batch (64|128) next: ", line)
    assert line.endswith("; not suggested for memory: batch 256, 512 (from about 17.0 GiB; "
                         "the T4 has 16.0, 10% of it kept back)")


def test_the_precision_control_asks_the_job_in_that_precision(imported, monkeypatch):
    """Opened with precision="amp", the control shows AMP and the job asks it; each change of
    the control predicts once, and "as measured" asks none."""
    from gpuperf_magics.prediction import predict

    asked = []
    real = predict.predict_time

    def spy(store, job=None, **fields):
        asked.append(job)
        return real(store, job, **fields)

    monkeypatch.setattr(predict, "predict_time", spy)
    panel = what_if(imported, iterations=1000, precision="amp")
    assert panel.precision.value == "fp16" and panel.job().precision == "fp16"
    assert "(FP16)" in panel.text  # the T4 row moved to its AMP device
    panel.instances.value = ()
    asked.clear()
    panel.precision.value = ""
    assert len(asked) == 1 and asked[0].precision is None
    assert panel.job().precision is None and "(FP16)" not in panel.text
    asked.clear()
    panel.precision.value = "tf32"
    assert len(asked) == 1 and asked[0].precision == "tf32"
