"""The CPU→GPU estimate: the GPU's work or the host's issue time, whichever is longer
(gpuperf_magics.model.roofline)."""

from __future__ import annotations

import pytest

from gpuperf_magics.model import roofline as rl

#: The tutorial's SmallCNN (two conv/BN/ReLU/pool blocks and a linear head: 25,674 parameters)
#: as the profiler records it, trained with SGD.
SMALL_CNN = {"arch_layers_conv": 2, "arch_layers_norm": 2, "arch_layers_activation": 2,
             "arch_layers_pool": 2, "arch_layers_linear": 1, "arch_layers_total": 9,
             "arch_params": 25_674, "arch_flops_fwd_bwd": 0.00897e9, "optimizer": "SGD"}


def test_small_cnn_launch_counts_by_hand() -> None:
    ops = rl.iteration_ops(SMALL_CNN)
    # By layer (a run recorded before arch_kernels): conv 2×8 + norm 2×3 + ReLU 2×2 + pool
    # 2×2 + linear 4; copies and loss 6; tensors conv 2×2 + norm 2×2 + linear 2; SGD: 3 foreach
    # operators of one kernel each.
    assert ops == {"model": 34, "iteration": 6, "tensors": 10, "optimizer_ops": 3,
                   "optimizer_kernels": 3, "kernels": 43}
    assert rl.host_seconds(SMALL_CNN) == pytest.approx(43 * rl.HOST_KERNEL_S)


def test_the_traced_kernel_count_wins_over_the_layers() -> None:
    traced = {**SMALL_CNN, "arch_kernels": 30, "arch_param_tensors": 100}
    ops = rl.iteration_ops(traced)
    # 100 tensors: each SGD foreach operator launches three kernels of at most 48 tensors.
    assert (ops["model"], ops["tensors"], ops["optimizer_kernels"]) == (30, 100, 9)
    assert ops["kernels"] == 30 + rl.ITERATION_KERNELS + 9
    # A store's missing value (a run without the figure: NaN, pandas' NA, None), a string or
    # a nonsense count fall back to the layers; so does a missing tensor count.
    import pandas as pd

    for missing in (float("nan"), pd.NA, None, "30", -5, float("inf")):
        ops = rl.iteration_ops({**SMALL_CNN, "arch_kernels": missing,
                                "arch_param_tensors": missing})
        assert (ops["model"], ops["tensors"]) == (34, 10), missing


def test_small_cnn_on_a_gpu_is_bound_by_the_host() -> None:
    a100 = {"gpu_name": "NVIDIA A100-SXM4-40GB", "gpu_fp32_tflops": 19.5}
    t4 = {"gpu_name": "Tesla T4", "gpu_fp32_tflops": 8.1}
    host = rl.host_seconds(SMALL_CNN)
    # The GPU's work at batch 64: 64 × 8.97 MFLOP at half the peak: 59 µs (A100), 142 µs (T4);
    # the host's 43 launches take 1.7 ms (measured on an H200: 1.8 ms, docs/figures).
    assert host > 64 * 0.00897e9 / (0.5 * 8.1e12)
    for gpu in (a100, t4):
        assert rl.cpu_to_gpu_seconds(SMALL_CNN, gpu, 64) == pytest.approx(host)
    # A large batch makes the GPU's work the longer one again.
    big = 65536 * 0.00897e9 / (0.5 * 8.1e12)
    assert big > host
    assert rl.cpu_to_gpu_seconds(SMALL_CNN, t4, 65536) == pytest.approx(big)


def test_layers_without_kinds_count_as_other_and_adam_launches_per_48_tensors() -> None:
    arch = {"arch_layers_total": 5, "arch_flops_fwd_bwd": 1e6}
    assert rl.iteration_ops(arch) == {"model": 5 * 3, "iteration": 6, "tensors": 0,
                                      "optimizer_ops": 0, "optimizer_kernels": 0,
                                      "kernels": 21}
    # 30 linear layers: 60 parameter tensors, two foreach launches per Adam operator.
    deep = {"arch_layers_linear": 30, "arch_layers_total": 30, "optimizer": "Adam"}
    ops = rl.iteration_ops(deep)
    assert (ops["tensors"], ops["optimizer_ops"], ops["optimizer_kernels"]) == (60, 10, 20)
    unknown = rl.iteration_ops({**deep, "optimizer": "Lion"})
    assert unknown["optimizer_ops"] == rl.OTHER_OPTIMIZER_OPS


def test_amp_uses_the_tensor_peak_and_missing_figures_give_none() -> None:
    arch = {"arch_flops_fwd_bwd": 1e9, "arch_amp": True}
    gpu = {"gpu_fp32_tflops": 10.0, "gpu_fp16_tflops": 100.0}
    work = 1024 * 1e9 / (0.25 * 100e12)
    assert rl.cpu_to_gpu_seconds(arch, gpu, 1024) == pytest.approx(work)
    assert rl.cpu_to_gpu_seconds({"arch_depth": 3}, gpu, 1024) is None
    assert rl.cpu_to_gpu_seconds(arch, {}, 1024) is None


def test_several_gpus_add_the_allreduce() -> None:
    from gpuperf_magics.model import data_parallel as dp

    arch = {**SMALL_CNN, "arch_params": 100_000_000, "arch_flops_fwd_bwd": 1e9}
    gpu = {"gpu_name": "Tesla T4", "gpu_fp32_tflops": 8.1, "gpu_architecture": "Turing"}
    one = rl.cpu_to_gpu_seconds(arch, gpu, 256)
    two = rl.cpu_to_gpu_seconds(arch, gpu, 512, gpu_count=2)
    assert one is not None and two is not None
    link = dp.interconnect("Tesla T4", None, "Turing")
    assert two == pytest.approx(dp.step_seconds(one, 100_000_000, 2, link))
    assert two > one
