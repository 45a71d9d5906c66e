"""Data-parallel moves: the ring all-reduce term and the default model's hook
(gpuperf_magics.model.data_parallel)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gpuperf_magics.model import data_parallel as dp


def test_allreduce_matches_a_hand_computation() -> None:
    # 25.6M FP32 parameters over 4 GPUs of a p4d.24xlarge (NVSwitch, 300 GB/s per direction).
    link = dp.interconnect("NVIDIA A100-SXM4-40GB", "p4d.24xlarge")
    assert (link.bandwidth_gbs, link.hop_latency_s, link.known) == (300.0, 3.4e-6, True)
    nbytes = dp.grad_bytes(25_600_000)
    assert nbytes == 102_400_000
    buckets = 4  # ceil(102.4e6 / 26,214,400)
    by_hand = buckets * (8.4e-6 + 2 * 3 * 3.4e-6) + 2 * 3 / 4 * 102.4e6 / (300e9 * 0.75)
    assert dp.allreduce_seconds(nbytes, 4, link) == pytest.approx(by_hand, rel=1e-12)
    assert by_hand == pytest.approx(115.2e-6 + 682.67e-6, rel=1e-5)  # latency + bytes
    assert dp.allreduce_seconds(nbytes, 1, link) == 0.0


def test_backward_hides_all_but_the_last_bucket() -> None:
    link = dp.interconnect("Tesla T4", "g4dn.12xlarge")  # PCIe 3.0, 15.75 GB/s
    nbytes = dp.grad_bytes(110_000_000)  # 440 MB
    total = dp.allreduce_seconds(nbytes, 2, link)
    last = dp.allreduce_seconds(dp.BUCKET_BYTES, 2, link)
    assert total == pytest.approx(17 * (8.4e-6 + 2 * 5.7e-6) + 440e6 / (15.75e9 * 0.75))
    # A long step hides everything but the last bucket; a short one leaves the rest exposed.
    assert dp.exposed_seconds(1.0, nbytes, 2, link) == pytest.approx(last)
    short = 0.01
    assert dp.exposed_seconds(short, nbytes, 2, link) == pytest.approx(total - 2 / 3 * short)
    assert dp.step_seconds(short, 110_000_000, 2, link) == pytest.approx(
        short + total - 2 / 3 * short)


def test_gradient_bytes_follow_the_model_dtype() -> None:
    assert dp.grad_bytes(10) == 40  # FP32, and under autocast (FP32 parameters)
    assert dp.grad_bytes(10, "torch.bfloat16") == 20
    assert dp.grad_bytes(10, "float16") == 20


def test_interconnect_is_the_systems_then_the_boards_then_pcie() -> None:
    # The instance wins over the GPU: a V100 in an Azure NDv2 has NVLink.
    assert dp.interconnect("Tesla V100-SXM2-32GB", "ND40rs_v2").link.startswith("NVLink 2")
    # An SXM GPU implies its NVLink board.
    h100 = dp.interconnect("NVIDIA H100 80GB HBM3")
    assert h100.known and h100.bandwidth_gbs == 450
    # Anything else: PCIe of the architecture's generation, said in the note.
    pcie = dp.interconnect("NVIDIA GeForce RTX 4090")
    assert not pcie.known and pcie.bandwidth_gbs == 31.5 and "PCIe Gen4 assumed" in pcie.note
    assert dp.interconnect("Quadro RTX 6000", "quad").bandwidth_gbs == 15.75
    assert "not recorded" in dp.interconnect("Quadro RTX 6000", "quad").note
    assert dp.interconnect("NVIDIA H100 PCIe").bandwidth_gbs == 63.0
    every = dp.interconnects()
    assert all(row["source"].count("http") >= 1 for row in every)
    assert len({row["name"] for row in every}) == len(every)


def _one_gpu_runs() -> pd.DataFrame:
    """A network measured on one T4 at three batch sizes, 3 repeats each."""
    rng = np.random.default_rng(0)
    rows = []
    for batch in (32, 64, 128):
        for _ in range(3):
            rows.append({"network": "net", "gpu": "Tesla T4", "batch_size": batch,
                         "gpu_count": 1, "iterations": 100, "arch_params": 50_000_000,
                         "time_s": 100 * (0.01 + 0.0005 * batch) * rng.normal(1, 0.01)})
    return pd.DataFrame(rows)


def test_default_model_adds_the_allreduce_to_the_one_gpu_step() -> None:
    from gpuperf_magics.model import TrainingTimeModel

    runs = _one_gpu_runs()
    model = TrainingTimeModel().fit(runs.drop(columns="time_s"), runs["time_s"])
    query = pd.DataFrame({"network": ["net", "net"], "gpu": ["Tesla T4"] * 2,
                          "batch_size": [64, 64], "gpu_count": [1, 4], "iterations": [100, 100],
                          "arch_params": [50_000_000] * 2, "system": ["g4dn.12xlarge"] * 2})
    table = model.predict_table(query)
    one, four = table.iloc[0], table.iloc[1]
    link = dp.interconnect("Tesla T4", "g4dn.12xlarge")
    step = float(one["per_iteration_s"])
    expected = step + dp.exposed_seconds(step, 200_000_000, 4, link)
    assert float(four["per_iteration_s"]) == pytest.approx(expected, rel=1e-9)
    assert float(four["time_s"]) == pytest.approx(100 * expected, rel=1e-9)
    assert expected > step  # the all-reduce of 200 MB over PCIe outlasts a 43 ms backward
    assert four["kind"] == "extrapolation"
    assert "4 GPUs data parallel (weak scaling" in four["detail"]
    assert "PCIe 3.0" in four["detail"]
    assert four["time_low_s"] <= four["time_s"] <= four["time_high_s"]


def test_a_global_batch_is_split_over_the_gpus() -> None:
    from gpuperf_magics.model import TrainingTimeModel

    runs = _one_gpu_runs()
    model = TrainingTimeModel().fit(runs.drop(columns="time_s"), runs["time_s"])
    query = pd.DataFrame({"network": ["net"], "gpu": ["Tesla T4"], "batch_size": [256],
                          "global_batch_size": [256], "gpu_count": [4], "iterations": [1],
                          "arch_params": [50_000_000]})
    row = model.predict_table(query).iloc[0]
    at_64 = model.predict_table(query.assign(batch_size=64, global_batch_size=64,
                                             gpu_count=1)).iloc[0]
    step = float(at_64["per_iteration_s"])
    link = dp.interconnect("Tesla T4")  # no system named: the PCIe fallback, said
    assert float(row["per_iteration_s"]) == pytest.approx(
        step + dp.exposed_seconds(step, 200_000_000, 4, link), rel=1e-9)
    assert "global batch 256 split over 4 GPUs (strong scaling)" in row["detail"]
    assert "no system named: PCIe Gen3 assumed" in row["detail"]


def test_without_a_parameter_count_the_time_per_iteration_is_kept() -> None:
    from gpuperf_magics.model import TrainingTimeModel

    runs = _one_gpu_runs().drop(columns="arch_params")
    model = TrainingTimeModel().fit(runs.drop(columns="time_s"), runs["time_s"])
    query = pd.DataFrame({"network": ["net", "net"], "gpu": ["Tesla T4"] * 2,
                          "batch_size": [64, 64], "gpu_count": [1, 8], "iterations": [10, 10]})
    table = model.predict_table(query)
    assert table["time_s"].iloc[1] == pytest.approx(table["time_s"].iloc[0])
    assert "parameter count (arch_params) is unknown" in table["detail"].iloc[1]


def test_measured_gpu_counts_keep_their_own_series() -> None:
    from gpuperf_magics.model import TrainingTimeModel

    runs = _one_gpu_runs()
    two = runs.assign(gpu_count=2, time_s=runs["time_s"] * 1.3)
    both = pd.concat([runs, two], ignore_index=True)
    model = TrainingTimeModel().fit(both.drop(columns="time_s"), both["time_s"])
    query = two.drop(columns="time_s").iloc[[3]]
    row = model.predict_table(query).iloc[0]
    assert "data parallel" not in row["detail"]
    assert float(row["per_iteration_s"]) == pytest.approx(
        float(np.median(two["time_s"].iloc[3:6])) / 100, rel=1e-6)


def test_more_gpus_of_another_kind_stay_a_transfer() -> None:
    from gpuperf_magics.model import TrainingTimeModel

    runs = _one_gpu_runs()
    model = TrainingTimeModel().fit(runs.drop(columns="time_s"), runs["time_s"])
    query = pd.DataFrame({"network": ["net"] * 2, "gpu": ["NVIDIA A100-SXM4-40GB"] * 2,
                          "batch_size": [64, 64], "gpu_count": [1, 8], "iterations": [1, 1],
                          "arch_params": [50_000_000] * 2})
    one, eight = model.predict_table(query).iloc[0], model.predict_table(query).iloc[1]
    assert one["kind"] == eight["kind"] == "transfer"
    link = dp.interconnect("NVIDIA A100-SXM4-40GB")  # an SXM A100: its NVSwitch board
    step = float(one["per_iteration_s"])
    assert float(eight["per_iteration_s"]) == pytest.approx(
        step + dp.exposed_seconds(step, 200_000_000, 8, link), rel=1e-9)
    assert "NVSwitch" in eight["detail"]
