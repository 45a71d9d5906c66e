"""GPU rows of a network measured on the CPU only, from its FLOPs (gpuperf_magics.model.cpu_to_gpu)."""

from __future__ import annotations

import pandas as pd
import pytest


def test_cpu_to_gpu_rows_need_a_flops_count() -> None:
    from gpuperf_magics.model.cpu_to_gpu import cpu_to_gpu_table

    configs = pd.DataFrame({"network": ["n"], "gpu": ["Tesla T4"], "batch_size": [32],
                            "gpu_count": [1], "iterations": [100]})
    with pytest.raises(ValueError, match="no FLOPs count"):
        cpu_to_gpu_table(configs, pd.Series({"arch_depth": 3}))
    rows = cpu_to_gpu_table(configs, pd.Series({"arch_flops_fwd_bwd": 1e9,
                                                "arch_layers_total": 10}))
    assert rows["kind"].iloc[0] == "transfer"
    assert rows["time_s"].iloc[0] == pytest.approx(100 * rows["per_iteration_s"].iloc[0])
    assert rows["time_low_s"].iloc[0] < rows["time_s"].iloc[0] < rows["time_high_s"].iloc[0]


def test_a_tiny_network_is_said_host_bound_and_a_big_one_is_not() -> None:
    """A tiny CNN's iteration on a GPU is its kernel launches, not its FLOPs: the rows say so
    (every GPU then answers alike), while a network whose FLOPs outlast the launches does not."""
    from gpuperf_magics.model.cpu_to_gpu import DETAIL, HOST_BOUND, cpu_to_gpu_table
    from gpuperf_magics.model.roofline import host_seconds

    configs = pd.DataFrame({"network": ["n", "n"], "gpu": ["Tesla T4", "A100-SXM4-80GB"],
                            "batch_size": [64, 64], "gpu_count": [1, 1],
                            "iterations": [100, 100]})
    tiny = pd.Series({"arch_flops_fwd_bwd": 1e6, "arch_layers_total": 6,
                      "arch_layers_conv": 2, "arch_layers_linear": 1, "arch_params": 25_700})
    rows = cpu_to_gpu_table(configs, tiny)
    assert list(rows["detail"]) == [HOST_BOUND, HOST_BOUND]
    host = host_seconds({k: tiny[k] for k in tiny.index})
    assert rows["per_iteration_s"].tolist() == pytest.approx([host, host])
    big = tiny.copy()
    big["arch_flops_fwd_bwd"] = 1e12
    assert list(cpu_to_gpu_table(configs, big)["detail"]) == [DETAIL, DETAIL]


def test_layer_counts_read_back_as_missing_count_as_none() -> None:
    """A store's frame holds pandas' NA where a run recorded no layer count: the rows are
    still made (NA counts as no layers), and a run without FLOPs still gets the clear error."""
    from gpuperf_magics.model.cpu_to_gpu import cpu_to_gpu_table

    configs = pd.DataFrame({"network": ["n"], "gpu": ["Tesla T4"], "batch_size": [32],
                            "gpu_count": [1], "iterations": [100]})
    with pytest.raises(ValueError, match="no FLOPs count"):
        cpu_to_gpu_table(configs, pd.Series({"arch_flops_fwd_bwd": pd.NA,
                                             "arch_layers_conv": pd.NA}, dtype=object))
    rows = cpu_to_gpu_table(configs, pd.Series({"arch_flops_fwd_bwd": 1e9,
                                                "arch_layers_conv": pd.NA,
                                                "arch_layers_linear": 2}, dtype=object))
    assert rows["per_iteration_s"].iloc[0] > 0


def test_a_cpu_run_asked_in_amp_uses_the_fp16_peak_and_autocast_s_host_time() -> None:
    """Asked in AMP (``precision="fp16"``): a big network's GPU work runs at the FP16 tensor
    peak (faster than its FP32 estimate on an A100), a tiny one's host time grows by
    AMP_HOST_FACTOR; asked in FP32, a run recorded under autocast loses both."""
    from gpuperf_magics.model.cpu_to_gpu import cpu_to_gpu_table
    from gpuperf_magics.model.roofline import AMP_HOST_FACTOR, host_seconds

    configs = pd.DataFrame({"network": ["n"], "gpu": ["A100-SXM4-80GB"], "batch_size": [64],
                            "gpu_count": [1], "iterations": [1]})
    tiny = pd.Series({"arch_flops_fwd_bwd": 1e6, "arch_layers_total": 6,
                      "arch_layers_conv": 2, "arch_layers_linear": 1, "arch_params": 25_700})
    host = host_seconds({k: tiny[k] for k in tiny.index})
    amp = cpu_to_gpu_table(configs, tiny, "fp16")["per_iteration_s"].iloc[0]
    assert amp == pytest.approx(AMP_HOST_FACTOR * host)
    big = tiny.copy()
    big["arch_flops_fwd_bwd"] = 1e12
    fp32 = cpu_to_gpu_table(configs, big)["per_iteration_s"].iloc[0]
    assert cpu_to_gpu_table(configs, big, "fp16")["per_iteration_s"].iloc[0] < fp32 / 2
    recorded = big.astype(object)  # a row of a store: numbers and flags side by side
    recorded["arch_amp"] = True
    assert cpu_to_gpu_table(configs, recorded, "fp32")["per_iteration_s"].iloc[0] == \
        pytest.approx(fp32)
