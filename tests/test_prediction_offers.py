"""The offers table on a real SQLite store of fixed imported T4 measurements."""

from __future__ import annotations

import datetime
import math

import pandas as pd
import pytest

import gpuperf_magics as gm
from gpuperf_magics.hardware.prices import PriceError
from gpuperf_magics.prediction.offers import Offers, offers
from gpuperf_magics.prediction.store_model import PredictionError
from gpuperf_magics.units import format_cost

MINE = pd.DataFrame([
    {"provider": "acme", "region": "eu", "instance": "t4-box", "gpu": "T4", "gpus": 1,
     "pricing": "on-demand", "usd_per_hour": 0.30, "date": "2026-11-01", "source": "quote"},
    {"provider": "acme", "region": "eu", "instance": "a100-x2", "gpu": "A100 80GB", "gpus": 2,
     "pricing": "spot", "usd_per_hour": 2.00, "date": "2026-10-01", "source": "quote"},
])


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "runs.sqlite"
    batches = [16, 32, 64, 128]
    gm.Store(path).import_table(
        pd.DataFrame({"network": "resnet", "batch_size": batches,
                      "time_s": [0.01 + 0.001 * b for b in batches]}), gpu="T4")
    return path


def test_rows_are_the_measured_device_then_every_priced_instance(store):
    result = offers(store, iterations=10_000)
    frame = result.frame
    assert isinstance(result, Offers) and result.network == "resnet"
    assert frame.iloc[0]["offer"] == "measured: T4" and math.isnan(frame.iloc[0]["cost_usd"])
    assert list(frame["instance"][1:]) == list(gm.hardware.prices.prices()["instance"])
    assert (frame["iterations"] == 10_000).all() and (frame["batch_size"] == 128).all()
    assert (frame["time_low_s"] <= frame["time_s"]).all()
    assert (frame["time_s"] <= frame["time_high_s"]).all()
    assert frame.iloc[0]["kind"] == "interpolation"
    # One T4 is the measured device: its offer interpolates, several T4s extrapolate the GPU
    # count, and every other GPU transfers.
    priced = frame.iloc[1:]
    t4 = priced["gpu"] == "Tesla T4"
    assert (priced.loc[t4 & (priced["gpus"] == 1), "kind"] == "interpolation").all()
    assert (priced.loc[t4 & (priced["gpus"] > 1), "kind"] == "extrapolation").all()
    assert (priced.loc[~t4, "kind"] == "transfer").all() and t4.any()
    assert (frame["expected_mape"] > 0).all()


def test_cost_is_time_times_instance_price_and_marks_follow(store):
    frame = offers(store, iterations=10_000, batch_sizes=[64]).frame
    priced = frame.iloc[1:]
    assert priced["cost_usd"].to_numpy() == pytest.approx(
        (priced["time_s"] / 3600 * priced["usd_per_hour"]).to_numpy())
    assert priced["cost_high_usd"].to_numpy() == pytest.approx(
        (priced["time_high_s"] / 3600 * priced["usd_per_hour"]).to_numpy())
    cheapest = frame[frame["marks"].str.contains("cheapest")]
    fastest = frame[frame["marks"].str.contains("fastest")]
    assert len(cheapest) == len(fastest) == 1
    assert cheapest["cost_usd"].iloc[0] == priced["cost_usd"].min()
    assert fastest["time_s"].iloc[0] == priced["time_s"].min()
    assert frame.iloc[0]["marks"] == ""  # the measured device has no price to compare


def test_the_deadline_picks_the_cheapest_offer_whose_upper_end_meets_it(store):
    every = offers(store, iterations=10_000).frame.iloc[1:]
    # A deadline between the two quickest upper ends: only the quickest offer meets it.
    ends = sorted(every["time_high_s"])
    result = offers(store, iterations=10_000, deadline_s=(ends[0] + ends[1]) / 2)
    pick = result.within_deadline
    assert pick is not None and pick["time_high_s"] == ends[0]
    # A generous deadline: the cheapest of all is the pick.
    loose = offers(store, iterations=10_000, deadline_s=ends[-1] + 1)
    assert loose.within_deadline["instance"] == loose.cheapest["instance"]
    # Too short for any offer: no pick, and a note says so.
    tight = offers(store, iterations=10_000, deadline_s=1)
    assert tight.within_deadline is None
    assert any("no offer's interval ends within the deadline" in n for n in tight.notes)
    assert "deadline 1.0 s" in str(tight)


def test_multi_gpu_offers_without_a_multi_gpu_measurement_say_so(store):
    frame = offers(store, iterations=1000, prices=MINE, instances=["a100-x2", "t4-box"]).frame
    assert list(frame["instance"]) == ["", "t4-box", "a100-x2"]
    two = frame[frame["instance"] == "a100-x2"].iloc[0]
    assert two["gpus"] == 2 and "no multi-GPU measurement" in two["note"]
    assert frame[frame["instance"] == "t4-box"].iloc[0]["note"] == ""


def test_a_user_price_replaces_the_builtin_one_and_the_age_is_shown(store):
    cheap = MINE.assign(provider="aws", region="us-east-1", instance="g5.xlarge", gpu="A10G",
                        gpus=1, pricing="on-demand", usd_per_hour=0.01).iloc[:1]
    result = offers(store, iterations=1000, prices=cheap, instances=["g5.xlarge"],
                    today=datetime.date(2026, 12, 1))
    row = result.frame.iloc[1]
    assert row["usd_per_hour"] == 0.01 and row["marks"] == "cheapest, fastest"
    assert any("prices from 2026-11-01 to 2026-11-01 (the oldest 30 days old)" in n
               for n in result.notes)


def test_tables_for_people(store):
    result = offers(store, iterations=1000, prices=MINE, instances=["t4-box"], deadline_s=3600)
    text = str(result)
    assert "resnet: job time and cost per offer; deadline 1:00:00" in text
    assert "1× Tesla T4" in text and "$0.30" in text
    html = result._repr_html_()
    assert "<table" in html and "job cost" in html
    assert format_cost(1234.5) == "$1,234.50" and format_cost(math.nan) == "—"


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"instances": ["p9.huge"]}, PredictionError, "no price for instance 'p9.huge'"),
    ({"deadline_s": 0}, PredictionError, "deadline_s must be a finite number"),
    ({"deadline_s": math.inf}, PredictionError, "deadline_s must be a finite number"),
    ({"prices": MINE.assign(gpus=0)}, PriceError, "gpus must be a whole number"),
    ({"batch_sizes": [32, 64]}, PredictionError, "offers answers for one batch size"),
    ({"gpus": ["T4"]}, PredictionError, "offers take the GPUs and their count from the price"),
])
def test_bad_requests_are_refused(store, kwargs, error, message):
    with pytest.raises(error, match=message):
        offers(store, **kwargs)


def test_one_job_answers_the_prediction_and_the_offers_alike(store):
    """The Job a prediction takes, offers take too, with the same default coverage."""
    from gpuperf_magics import Job

    job = Job(batch_sizes=[64], iterations=10_000, deadline_s=3600)
    priced = offers(store, job, instances=["g4dn.xlarge"])
    predicted = gm.predict_time(store, job).frame.iloc[0]
    measured = priced.frame.iloc[0]
    for column in ("time_s", "time_low_s", "time_high_s"):
        assert measured[column] == pytest.approx(predicted[column])
    assert priced.deadline_s == 3600


# --------------------------------------------------------------------------- GPU memory
def _with_peaks(path, peaks, gpu="T4"):
    """Imported per-step times whose runs measured their peak GPU memory (GiB)."""
    batches = list(peaks)
    gm.Store(path).import_table(
        pd.DataFrame({"network": "resnet", "batch_size": batches,
                      "time_s": [0.01 + 0.001 * b for b in batches],
                      "peak_memory_gb": list(peaks.values())}), gpu=gpu)
    return path


def test_offers_whose_gpu_would_not_hold_the_batch_are_marked_and_never_recommended(tmp_path):
    # 2 GiB of weights and optimizer state, 0.1 GiB per sample, measured at four batches.
    store = _with_peaks(tmp_path / "runs.sqlite", {b: 2 + 0.1 * b for b in (16, 32, 64, 128)})
    result = offers(store, iterations=10_000, batch_sizes=[256],
                    instances=["g4dn.xlarge", "g6e.xlarge", "g4dn.metal", "p5.48xlarge"])
    frame = result.frame.set_index("instance")
    # One GPU needs 2 + 0.1 × 256 = 27.6 GiB; so does each of eight, whose time is predicted
    # with the batch held per GPU (weak scaling): the 8 T4s of a g4dn.metal do not hold it.
    assert frame.loc["g4dn.xlarge", "memory_gb"] == pytest.approx(27.6)
    assert frame.loc["g4dn.metal", "memory_gb"] == pytest.approx(27.6)
    assert "weak scaling: per-GPU batch held" in frame.loc["g4dn.metal", "detail"]
    assert frame.loc["g4dn.xlarge", "gpu_memory_gb"] == 16
    assert frame.loc["g4dn.xlarge", "fits"] is False and "too little memory" in \
        frame.loc["g4dn.xlarge", "marks"]
    assert frame.loc["g6e.xlarge", "fits"] is True  # 27.6 of an L40S's 48 GB
    assert frame.loc["g4dn.metal", "fits"] is False and frame.loc["p5.48xlarge", "fits"] is True
    assert frame.loc[result.fastest["instance"], "fits"] is True
    assert "27.6 of 16 GB" in result.table()["memory"].tolist()
    # The cheapest offer is the cheapest that holds the batch, not the T4 that cannot.
    t4s = offers(store, iterations=10_000, batch_sizes=[256],
                 instances=["g4dn.xlarge", "g4dn.metal", "p5.48xlarge"])
    one_t4 = t4s.frame.set_index("instance").loc["g4dn.xlarge"]
    assert t4s.cheapest["instance"] != "g4dn.xlarge"
    assert one_t4["cost_usd"] < t4s.cheapest["cost_usd"]
    note = next(n for n in result.notes if n.startswith("GPU memory for batch 256"))
    assert "fitted to the peaks at batch 16, 32, 64, 128" in note
    assert "2 offers marked 'too little memory'" in note
    # A batch the T4 holds: nothing marked.
    small = offers(store, iterations=10_000, batch_sizes=[64], instances=["g4dn.xlarge"]).frame
    assert small.iloc[1]["fits"] is True and "too little memory" not in small.iloc[1]["marks"]


def test_with_a_peak_at_one_batch_the_need_grows_in_proportion_and_says_so(tmp_path):
    store = _with_peaks(tmp_path / "runs.sqlite", {32: 6.0})
    result = offers(store, iterations=1000, batch_sizes=[128], instances=["g5.xlarge"])
    assert result.frame.iloc[1]["memory_gb"] == pytest.approx(24.0)  # 6 GiB × 128 / 32
    assert result.frame.iloc[1]["fits"] is False  # 24 GiB > 90% of an A10G's 24 GB
    assert any("scaled in proportion from the peak at batch 32" in n for n in result.notes)


def test_without_a_measured_peak_nothing_is_marked(store):
    result = offers(store, iterations=1000, batch_sizes=[4096])
    frame = result.frame
    assert frame["memory_gb"].isna().all() and frame["fits"].isna().all()
    assert not frame["marks"].str.contains("memory").any()
    assert (result.table()["memory"] == "—").all()
    assert not any("GPU memory" in n for n in result.notes)


def test_peaks_measured_by_a_profiled_cell_mark_the_offers(tmp_path, monkeypatch):
    """From the CUDA seam (faked) through a real store to the marks."""
    import torch
    from torch import nn

    from gpuperf_magics.capture import recorder as recorder_mod
    from gpuperf_magics.capture.clock import CudaPeakMemory

    class Allocator:  # torch.cuda's two peak-memory calls, on a fake device
        peak = 0

        def reset_peak_memory_stats(self, device=None):
            self.peak = 0

        def max_memory_allocated(self, device=None):
            return self.peak

    fake = Allocator()
    monkeypatch.setattr(recorder_mod, "make_peak_memory",
                        lambda device: CudaPeakMemory(fake, device))
    path = tmp_path / "runs.sqlite"
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for batch in (16, 64):
        with gm.profile_training("linear", store=path):
            for _ in range(6):
                opt.zero_grad()
                model(torch.randn(batch, 8)).sum().backward()
                opt.step()
                fake.peak = (1 + batch // 16) * 2**30  # 1 GiB fixed + 1 GiB per 16 samples
    runs = gm.Store(path).runs(columns=["batch_size", "peak_memory_gb"])
    assert runs["peak_memory_gb"].tolist() == pytest.approx([2.0, 5.0])
    result = offers(path, iterations=100, batch_sizes=[256], instances=["g4dn.xlarge"])
    assert result.frame.iloc[1]["memory_gb"] == pytest.approx(17.0)  # 1 + 256 / 16
    assert "too little memory" in result.frame.iloc[1]["marks"]


def test_spot_and_on_demand_prices_of_one_instance_are_separate_offers(store):
    both = offers(store, iterations=1000, instances=["a3-ultragpu-8g"]).frame
    assert list(both["pricing"][1:]) == ["on-demand", "spot"]
    spot = offers(store, iterations=1000,
                  instances=["gcp a3-ultragpu-8g (us-central1, spot)"]).frame
    assert list(spot["offer"][1:]) == ["gcp a3-ultragpu-8g (us-central1, spot)"]


def test_a_text_repeated_on_several_rows_is_said_once(store):
    four = MINE.iloc[1:].assign(instance="a100-x4", gpus=4, usd_per_hour=4.0)
    prices = pd.concat([MINE, four], ignore_index=True)
    result = offers(store, iterations=1000, prices=prices,
                    instances=["t4-box", "a100-x2", "a100-x4"])
    assert list(result.frame["note"].astype(bool)) == [False, False, True, True]
    text, page = str(result), result._repr_html_()
    for shown in (text, page):
        assert shown.count("no multi-GPU measurement") == 1
    table, said = result.compact()
    assert list(table["note"]) == ["", "", "[2]", "[2]"]
    assert said[-1].startswith("[2] scaled from one GPU with no multi-GPU measurement")
    # The measured T4 and the T4 offer share their kind: a footnote, not the text twice.
    assert table["kind"].iloc[0] == table["kind"].iloc[1] == "[1]"


def test_html_cells_are_spaced_and_costs_never_scientific(store):
    page = offers(store, iterations=10, prices=MINE, instances=["t4-box"])._repr_html_()
    assert "<th style='padding: 2px 10px 2px 0; text-align: left'>mark</th>" in page
    assert "e-0" not in page and "$0.000" in page  # a job of 10 iterations costs < $0.001
