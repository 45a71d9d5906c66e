"""A network's measured configurations as arrays (gpuperf_magics.model.series): set-up time
and time per iteration of each configuration."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from gpuperf_magics.model import TrainingTimeModel
from gpuperf_magics.model.clusters import sample_interval
from gpuperf_magics.model.evidence import empty_base
from gpuperf_magics.model.inputs import HARDWARE, prepare
from gpuperf_magics.model.series import build_index, network_index


def test_set_up_time_is_only_told_apart_by_iteration_counts_far_apart() -> None:
    # 1201 and 1221 iterations in the same 220 s (one public file): no set-up time to tell.
    values = np.ones((2, 1))
    index = build_index(values, ["batch_size"], np.zeros((2, 0)), np.full(2, np.nan),
                        np.array([1201.0, 1221.0]), np.array([220.0, 220.5]))
    assert index.setup[0] == 0.0
    assert index.t[0] == pytest.approx(np.median([220 / 1201, 220.5 / 1221]))
    # 100 and 1000 iterations: 20 s of set-up and 0.2 s per iteration.
    index = build_index(values, ["batch_size"], np.zeros((2, 0)), np.full(2, np.nan),
                        np.array([100.0, 1000.0]), np.array([40.0, 220.0]))
    assert index.setup[0] == pytest.approx(20.0)
    assert index.t[0] == pytest.approx(0.2)


def _setup_store() -> pd.DataFrame:
    """An imported table of total run times: eight batch sizes run for 100 and 400 iterations
    with set-up times of 2-16 s (which the two lengths tell), and batch 512 run for 400 only,
    with 14 s of set-up."""
    setups = [2.0, 5.0, 8.0, 3.0, 6.0, 4.0, 16.0, 7.0]
    rows = []
    for b, setup in zip((8, 16, 24, 32, 48, 64, 96, 128), setups):
        for its in (100, 400):
            rows.append({"network": "cnn", "gpu": "Tesla T4", "batch_size": b,
                         "iterations": its, "time_s": setup + its * 0.001 * b})
    rows.append({"network": "cnn", "gpu": "Tesla T4", "batch_size": 512, "iterations": 400,
                 "time_s": 14.0 + 400 * 0.512})
    return pd.DataFrame(rows)


def test_another_length_of_a_run_whose_set_up_was_not_told_carries_the_set_ups_spread() -> None:
    """Batch 512 ran for 400 iterations only: its time per iteration holds the median set-up
    of the others (5.5 s), 8.5 s short of its own. Asked for 100 iterations, the answer errs
    by 8.5 × (1 − 100/400) s, which the interval now holds: the set-ups' spread (one more
    configuration's difference from their median) carried to the length asked. Asked for the
    length it ran, or a configuration that told its own set-up, the interval is as before."""
    store = _setup_store()
    model = TrainingTimeModel(evidence=empty_base()).fit(store.drop(columns="time_s"),
                                                         store["time_s"])
    index = model.estimator_.local_["cnn"].index
    c = int(np.flatnonzero(index.values[:, index.batch_axis] == 512)[0])
    assert not index.setup_told[c] and index.setup_told.sum() == 8
    asked = pd.DataFrame([{"network": "cnn", "gpu": "Tesla T4", "batch_size": b,
                           "iterations": its} for b, its in ((512, 100), (512, 400), (64, 100))])
    table = model.predict_table(asked)
    truth = 14.0 + 100 * 0.512
    short = table.iloc[0]
    assert short["kind"] == "interpolation" and short["time_s"] < truth / 1.05
    assert short["time_low_s"] <= truth <= short["time_high_s"]
    # The set-up term by hand: the 80% interval of the told set-ups' differences from their
    # median, times the lever 1 − 100/400, over the answer's seconds.
    told = index.setup[index.setup_told]
    lo, hi = sample_interval(told - np.median(told), 0.8)
    total = index.setup[c] + index.t[c] * 100
    assert math.log(short["time_low_s"] / short["time_s"]) <= math.log1p(0.75 * lo / total) + 1e-9
    assert math.log(short["time_high_s"] / short["time_s"]) >= math.log1p(0.75 * hi / total) - 1e-9
    # The length it ran, and a configuration whose two lengths told its set-up: no set-up term.
    same, told_one = table.iloc[1], table.iloc[2]
    assert same["time_high_s"] / same["time_s"] < short["time_high_s"] / short["time_s"]
    noise = model.estimator_.local_["cnn"].moves["repeat"]
    assert told_one["expected_mape"] == pytest.approx(noise.mape)


GTX = "NVIDIA GeForce GTX 1080 Ti"  # no FP16 peak in the catalog


def _precision_store(ratio: float) -> pd.DataFrame:
    """Five networks on the 1080 Ti in FP32 and under AMP (AMP ``ratio`` × the FP32 time),
    one new network in FP32 only."""
    rows = []
    for k in range(5):
        for b in (16, 32, 64):
            t = 0.002 * (k + 1) * b
            for precision, factor in (("fp32", 1.0), ("amp", ratio)):
                rows.append({"network": f"net{k}", "gpu": GTX, "precision": precision,
                             "batch_size": b, "iterations": 10, "time_s": 10 * t * factor})
    rows += [{"network": "new", "gpu": GTX, "precision": "fp32", "batch_size": b,
              "iterations": 10, "time_s": 10 * 0.004 * b} for b in (16, 32, 64)]
    return pd.DataFrame(rows)


def test_precisions_are_devices_even_where_the_catalog_has_no_peak_for_one() -> None:
    store = _precision_store(ratio=0.7)
    prep = prepare(store.drop(columns="time_s"), prefer_catalog=True)
    # The catalog gives FP32 and AMP rows the same peak and bandwidth ...
    assert len(np.unique(prep.features[list(HARDWARE)].to_numpy(), axis=0)) == 1
    rows = np.flatnonzero(store["network"].to_numpy() == "net0")
    index, _ = network_index(prep, rows, store["time_s"].to_numpy()[rows])
    # ... yet FP32 and AMP are two devices, each batch size a configuration on each.
    assert len(index.hw_table) == 2
    assert index.n == 6
    assert sorted(set(index.device)) == [f"{GTX}|fp16", f"{GTX}|fp32"]


def test_an_amp_run_without_a_catalog_peak_comes_from_the_pairs_not_the_fp32_time() -> None:
    store = _precision_store(ratio=0.7)
    model = TrainingTimeModel(evidence=empty_base()).fit(store.drop(columns="time_s"),
                                                         store["time_s"])
    query = pd.DataFrame({"network": ["new"] * 3, "gpu": GTX, "precision": "amp",
                          "batch_size": [16, 32, 64], "iterations": 10})
    table = model.predict_table(query)
    # The other workloads ran 0.7× as long under AMP: so does the new one (its FP32 time,
    # a repeat of one device, would be 1×).
    assert table["per_iteration_s"].to_numpy() == pytest.approx(
        [0.7 * 0.004 * b for b in (16, 32, 64)], rel=0.05)
    assert table["detail"].str.contains("workloads measured on both").all()
    assert (table["time_low_s"] < table["time_s"]).all()
    assert (table["time_s"] < table["time_high_s"]).all()


def test_an_amp_run_without_a_peak_or_evidence_is_the_same_time_and_says_so() -> None:
    store = _precision_store(ratio=0.7)
    alone = store[store["network"] == "new"]
    model = TrainingTimeModel(evidence=empty_base()).fit(alone.drop(columns="time_s"),
                                                         alone["time_s"])
    query = pd.DataFrame({"network": ["new"], "gpu": GTX, "precision": "amp",
                          "batch_size": [32], "iterations": 10})
    table = model.predict_table(query)
    assert table["per_iteration_s"].iloc[0] == pytest.approx(0.004 * 32)
    detail = table["detail"].iloc[0]
    assert "spec sheet only" in detail and "same time" in detail
    assert table["time_low_s"].iloc[0] < 0.9 * table["time_s"].iloc[0]
    assert table["time_high_s"].iloc[0] > 1.1 * table["time_s"].iloc[0]
