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
