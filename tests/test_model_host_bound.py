"""A host-bound network on other batches and GPUs (gpuperf_magics.model.host_bound): the host's
time per iteration is a floor, and a move from a host-bound run moves only the GPU's share."""

from __future__ import annotations

import pandas as pd
import pytest

from gpuperf_magics.model import host_bound as hb
from gpuperf_magics.model.roofline import HOST_KERNEL_S, ITERATION_KERNELS

#: 40 kernels of forward and backward, SGD over 10 tensors (3 foreach kernels): with the loss
#: and the batch's copies, 49 kernels: 1.96 ms of the host's time per iteration.
KERNELS = 40
HOST = (KERNELS + ITERATION_KERNELS + 3) * HOST_KERNEL_S


def _store(path, times_ms: dict[int, float], flops: float = 1e6, **columns):
    """One network measured on a T4 at the given batch sizes (ms per iteration)."""
    import gpuperf_magics as gm

    batches = list(times_ms)
    gm.Store(path).import_table(pd.DataFrame({
        "network": "net", "batch_size": batches, "iterations": 100,
        "time_s": [0.1 * times_ms[b] for b in batches],
        "it_median_s": [1e-3 * times_ms[b] for b in batches],
        "arch_flops_fwd_bwd": flops, "arch_param_tensors": 10, "optimizer": "SGD",
        **columns}), gpu="T4")
    return path


def test_a_host_bound_run_answers_other_batches_and_gpus_with_its_host_time(tmp_path):
    """Measured at batch 64 in 2 ms, its 49 kernels at 40 µs (1.96 ms) and its FLOPs (64 MFLOP:
    16 µs on a T4) say the T4 waited for the host: batch 8 is not eight times faster, batch 256
    not four times slower, and neither a faster nor a slower GPU moves it much."""
    import gpuperf_magics as gm

    store = _store(tmp_path / "runs.sqlite", {64: 2.0}, arch_kernels=KERNELS)
    frame = gm.predict_time(store, batch_sizes=[8, 64, 256], iterations=100,
                            gpus=["A100-SXM4-40GB", "Tesla K80"]).frame
    measured = frame["kind"].eq("interpolation")
    assert frame.loc[measured, "per_iteration_s"].tolist() == pytest.approx([2e-3])
    for _, row in frame[~measured].iterrows():
        # The GPU's work (16 µs a batch of 64 on the T4, 5.5 times that on a K80 at batch
        # 256) stays under the host's time: every row is the host's.
        assert row["per_iteration_s"] == pytest.approx(HOST), (row["gpu"], row["batch_size"])
        assert row["detail"].startswith("host-bound")
        assert row["time_low_s"] == pytest.approx(row["time_s"] / (1 + hb.HOST_SPREAD))
        assert row["time_high_s"] == pytest.approx(row["time_s"] * (1 + hb.HOST_SPREAD))
    assert (~measured).sum() == 8


def test_a_run_bound_by_its_gpu_moves_as_the_model_says(tmp_path):
    """100 ms per iteration is fifty times the host's 2 ms: nothing changes."""
    import gpuperf_magics as gm

    with_kernels = _store(tmp_path / "a.sqlite", {64: 100.0, 128: 200.0}, flops=1e12,
                          arch_kernels=KERNELS)
    without = _store(tmp_path / "b.sqlite", {64: 100.0, 128: 200.0}, flops=1e12)
    ask = {"batch_sizes": [32, 256], "iterations": 100, "gpus": ["A100-SXM4-40GB"]}
    one = gm.predict_time(with_kernels, **ask).frame
    two = gm.predict_time(without, **ask).frame
    pd.testing.assert_frame_equal(one, two)
    assert not one["detail"].str.contains("host-bound").any()


def test_one_batch_with_a_kernel_count_moves_its_gpu_work_with_the_batch(tmp_path):
    """Measured at batch 64 alone in 100 ms (fifty times its host's 2 ms: its GPU's work), a
    run that counted its kernels moves in proportion to the batch, down to the host's floor;
    without the count the model grows it as public GPU batch series of 100 ms do
    (model/batch_single.py), less than in proportion."""
    import gpuperf_magics as gm
    from gpuperf_magics.model import batch_single

    ask = {"batch_sizes": [256, 1], "iterations": 100}
    counted = gm.predict_time(_store(tmp_path / "a.sqlite", {64: 100.0}, flops=1e12,
                                     arch_kernels=KERNELS), **ask).frame
    by_batch = counted.set_index("batch_size")["per_iteration_s"]
    assert by_batch[256] == pytest.approx(0.4)
    assert by_batch[1] == pytest.approx(max(0.1 / 64, HOST))
    plain = gm.predict_time(_store(tmp_path / "b.sqlite", {64: 100.0}, flops=1e12),
                            **ask).frame.set_index("batch_size")["per_iteration_s"]
    assert plain[256] == pytest.approx(0.1 * 4 ** batch_single.elasticity(0.1))
    assert plain[256] < 0.4


def test_a_single_batch_move_is_one_configuration_in_one_precision(tmp_path):
    """Batch 64 measured in FP32 (100 ms) and in AMP (40 ms), with kernel counts: batch 256
    is four times each in its own precision, not four times their median; a two-GPU row at
    the measured batch keeps its all-reduce (not a move from one batch size)."""
    import gpuperf_magics as gm

    store = tmp_path / "p.sqlite"
    gm.Store(store).import_table(pd.DataFrame({
        "network": "net", "batch_size": [64, 64], "iterations": 100, "time_s": [10.0, 4.0],
        "it_median_s": [0.1, 0.04], "arch_flops_fwd_bwd": 1e12, "arch_param_tensors": 10,
        "optimizer": "SGD", "arch_kernels": KERNELS, "arch_params": 25_000_000,
        "arch_amp": [False, True]}), gpu="T4")
    for precision, per_it in (("fp32", 0.4), ("amp", 0.16)):
        frame = gm.predict_time(store, batch_sizes=[256], iterations=100,
                                precision=precision).frame
        assert frame["per_iteration_s"].iloc[0] == pytest.approx(per_it), precision
        assert "in proportion to the batch" in frame["detail"].iloc[0]
        assert "host-bound" not in frame["detail"].iloc[0]  # fifty times the host's time
    two = gm.predict_time(store, batch_sizes=[64], iterations=100, gpu_count=2,
                          precision="fp32").frame
    assert two["per_iteration_s"].iloc[0] > 0.1 and "all-reduce" in two["detail"].iloc[0]


def test_the_floor_holds_a_gpu_bound_network_above_its_host_time() -> None:
    """Bound by the GPU where measured (10 ms against a 2 ms host), it is not scaled by a
    share; but a move to a GPU twenty times faster stops at the host's time."""
    runs = pd.DataFrame({"gpu": ["Tesla T4"], "batch_size": [64], "it_median_s": [0.010],
                         "status": ["ok"], "arch_kernels": [KERNELS], "arch_param_tensors": [10],
                         "optimizer": ["SGD"], "arch_flops_fwd_bwd": [1e9],
                         "gpu_fp32_tflops": [8.1]})
    table = pd.DataFrame({"gpu": ["H100", "Tesla T4"], "batch_size": [64, 128],
                          "kind": ["transfer", "extrapolation"],
                          "per_iteration_s": [0.0005, 0.020], "time_s": [0.05, 2.0],
                          "time_low_s": [0.04, 1.8], "time_high_s": [0.06, 2.2],
                          "detail": ["spec", "batch"], "expected_mape": [0.2, 0.1]})
    out = hb.apply_host_floor(table, runs)
    assert out["per_iteration_s"].tolist() == pytest.approx([HOST, 0.020])
    assert out["time_s"].tolist() == pytest.approx([100 * HOST, 2.0])
    assert out["expected_mape"].tolist() == pytest.approx([hb.HOST_SPREAD, 0.1])
    assert out["detail"].iloc[0].startswith("host-bound") and out["detail"].iloc[1] == "batch"
    assert table["per_iteration_s"].tolist() == [0.0005, 0.020]  # the input is not changed


@pytest.mark.parametrize("missing", [None, float("nan"), "many"])
def test_runs_without_a_kernel_count_change_nothing(missing) -> None:
    runs = pd.DataFrame({"gpu": ["Tesla T4"], "batch_size": [64], "it_median_s": [0.002],
                         "arch_kernels": [missing]})
    table = pd.DataFrame({"gpu": ["H100"], "batch_size": [64], "kind": ["transfer"],
                          "per_iteration_s": [0.0001], "time_s": [0.01], "time_low_s": [0.01],
                          "time_high_s": [0.01], "detail": ["spec"], "expected_mape": [0.2]})
    assert hb.apply_host_floor(table, runs) is table
    assert hb.apply_host_floor(table, runs.drop(columns="arch_kernels")) is table


def test_a_measured_busy_share_decides_and_sets_the_share() -> None:
    """With ``use_busy`` (off in the package): 2.5 ms per iteration is within 1.5× of the
    1.96 ms its kernels take the host, but a GPU busy 97% of the run was not waiting for it:
    the model's move stands. Busy 25% (0.625 ms): its 49 kernels' 3 µs each stay at batch 256,
    the rest grows with the batch, and that share of the model's move is the GPU's (the FLOPs
    would have said less)."""
    def runs(busy: float) -> pd.DataFrame:
        return pd.DataFrame({"gpu": ["Tesla T4"], "batch_size": [64], "it_median_s": [0.0025],
                             "arch_kernels": [KERNELS], "arch_param_tensors": [10],
                             "optimizer": ["SGD"], "arch_flops_fwd_bwd": [1e6],
                             "gpu_fp32_tflops": [8.1], "device_busy": [busy]})

    table = pd.DataFrame({"gpu": ["Tesla K80"], "batch_size": [256], "kind": ["transfer"],
                          "per_iteration_s": [0.040], "time_s": [4.0], "time_low_s": [3.0],
                          "time_high_s": [5.0], "detail": ["spec"], "expected_mape": [0.3]})
    # Off in the package (it did worse on networks it was not set on): the FLOPs decide.
    kept = hb.apply_host_floor(table, runs(0.25))
    assert kept["per_iteration_s"].iloc[0] == pytest.approx(HOST)
    assert hb.apply_host_floor(table, runs(0.97), use_busy=True) is table
    out = hb.apply_host_floor(table, runs(0.25), use_busy=True)
    fixed = 49 * hb.KERNEL_MIN_S
    share = ((0.000625 - fixed) + fixed * 64 / 256) / 0.0025
    assert out["per_iteration_s"].iloc[0] == pytest.approx(0.040 * share)
    assert out["time_low_s"].iloc[0] == pytest.approx(3.0 * share)  # the interval scaled too
    assert out["detail"].iloc[0].startswith("host-bound where measured")


def test_a_precision_move_of_a_host_bound_run_keeps_its_host_time_and_adds_autocasts(tmp_path):
    """Measured at batch 64 in FP32 in 2 ms (its host's time: 49 kernels at 40 µs is 1.96 ms)
    on a T4: asked in AMP at the same batch on the same GPU, the same host issues the same
    kernels and autocast's casts: AMP_HOST_FACTOR × 2 ms, however much faster the tensor
    cores would do the GPU's 16 µs. Asked back from AMP, the host's time shrinks by as much."""
    import gpuperf_magics as gm

    fp32 = _store(tmp_path / "fp32.sqlite", {64: 2.0}, arch_kernels=KERNELS,
                  arch_amp=False, arch_tf32_matmul=False, arch_tf32_conv=False)
    frame = gm.predict_time(fp32, batch_sizes=[64], iterations=100, precision="amp").frame
    row = frame.iloc[0]
    assert row["per_iteration_s"] == pytest.approx(hb.AMP_HOST_FACTOR * 2e-3)
    assert "autocast" in row["detail"] and row["detail"].startswith("host-bound")
    # Without the precision the measured configuration answers as measured.
    same = gm.predict_time(fp32, batch_sizes=[64], iterations=100).frame.iloc[0]
    assert same["per_iteration_s"] == pytest.approx(2e-3)

    amp = _store(tmp_path / "amp.sqlite", {64: 2.6}, arch_kernels=KERNELS, arch_amp=True)
    back = gm.predict_time(amp, batch_sizes=[64], iterations=100, precision="fp32").frame
    assert back["per_iteration_s"].iloc[0] == pytest.approx(2.6e-3 / hb.AMP_HOST_FACTOR)
    assert "leaving autocast" in back["detail"].iloc[0]


@pytest.mark.parametrize(("measured", "asked", "factor"), [
    ("fp32", "fp16", hb.AMP_HOST_FACTOR), ("tf32", "fp16", hb.AMP_HOST_FACTOR),
    ("fp16", "fp32", 1 / hb.AMP_HOST_FACTOR), ("fp16", "tf32", 1 / hb.AMP_HOST_FACTOR),
    ("fp32", "tf32", 1.0), ("fp16", "fp16", 1.0), ("fp32", None, 1.0), (None, "fp16", 1.0),
])
def test_amp_host_factor_between_precisions(measured, asked, factor) -> None:
    assert hb.between(measured, asked) == pytest.approx(factor)


def test_the_same_configuration_s_floor_is_its_own_run_s_in_the_asked_precision() -> None:
    """A host-bound run at batch 256 (with GPU work in it) is the floor of a precision move
    of that configuration, each run scaled from its own precision; not of batch 8, another GPU
    count or another GPU."""
    t4 = {"gpu": "Tesla T4", "batch_size": 256.0, "gpu_count": 1}
    view = hb._HostView(0.001, [], [(t4, "fp32", 0.0025), (t4, "fp16", 0.0028)], "fp32")
    row = pd.Series(t4)
    # In AMP: the AMP run itself (2.8 ms), not the FP32 run times the factor (3.25 ms).
    assert view.same_floor(row, "fp16") == pytest.approx(0.0028)
    # In FP32: the lower of the two (a floor is the least the host was seen to need).
    assert view.same_floor(row, "fp32") == pytest.approx(0.0028 / hb.AMP_HOST_FACTOR)
    for other in ({"batch_size": 8.0}, {"gpu_count": 4}, {"gpu": "A100"}):
        assert view.same_floor(pd.Series({**t4, **other}), "fp32") == 0.0
