"""The floors benchmarks/accuracy.py prints beside the default model, on cases with a known answer."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "accuracy.py"
_spec = importlib.util.spec_from_file_location("accuracy_benchmark", _PATH)
accuracy = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = accuracy  # dataclasses look their module up while it loads
_spec.loader.exec_module(accuracy)

GPUS = {"T4": 1.0, "V100": 0.5, "A100": 0.25, "K80": 2.0}


def _table(sensitivity: dict[str, float]) -> pd.DataFrame:
    """Per-iteration time = scale(network, batch) × speed(gpu) ** sensitivity(network)."""
    rows = []
    for net, power in sensitivity.items():
        for batch in (8, 16, 32):
            for gpu, speed in GPUS.items():
                rows.append({"network": net, "gpu": gpu, "local_batch_size": batch,
                             "iterations": 10, "time_s": 10 * 0.01 * batch * speed ** power})
    return pd.DataFrame(rows)


def test_transfer_floor_is_zero_when_every_network_sees_the_same_gpu_speeds():
    floor = accuracy.transfer_floor(_table({"a": 1.0, "b": 1.0}), ["local_batch_size"])
    assert list(floor.index) == ["a", "b"]
    assert floor.max() < 1e-9


def test_transfer_floor_rank_one_absorbs_a_network_specific_sensitivity():
    # Network "io" barely depends on the GPU (input-bound): one speed per GPU cannot fit both.
    table = _table({"compute": 1.0, "io": 0.1, "mixed": 0.5})
    rank0 = accuracy.transfer_floor(table, ["local_batch_size"], rank=0)
    rank1 = accuracy.transfer_floor(table, ["local_batch_size"], rank=1)
    assert rank0.mean() > 0.1
    assert rank1.max() < 1e-6
    held = accuracy.transfer_floor(table, ["local_batch_size"], rank=0, held_out="A100")
    assert held.mean() > 0.1


def test_transfer_floor_ignores_configurations_seen_on_one_gpu():
    table = _table({"a": 1.0, "b": 1.0})
    alone = pd.DataFrame([{"network": "a", "gpu": "T4", "local_batch_size": 64,
                           "iterations": 10, "time_s": 99.0}])  # would be far off the fit
    floor = accuracy.transfer_floor(pd.concat([table, alone]), ["local_batch_size"])
    assert floor.max() < 1e-9


def test_roughness_floor_is_zero_on_a_power_law_and_not_on_a_kink():
    rows = [{"network": "smooth", "gpu": "T4", "gpu_count": 1, "local_batch_size": b,
             "time_s": 0.01 * b ** 0.8} for b in (4, 8, 16, 32, 64, 128)]
    rows += [{"network": "kinked", "gpu": "T4", "gpu_count": 1, "local_batch_size": b,
              "time_s": t} for b, t in ((4, 1.0), (8, 2.0), (16, 1.5), (32, 4.0), (64, 8.0))]
    floor = accuracy.roughness_floor(pd.DataFrame(rows))
    assert floor.loc["smooth"].max() == pytest.approx(0, abs=1e-9)
    assert floor.loc["kinked", "interior"] > 0.1
    assert np.isfinite(floor.loc["kinked", "end"])


def test_repeat_floor_is_the_spread_of_repeats():
    frame = pd.DataFrame({"batch_size": [8, 8, 8, 16], "file": "f", "depth": np.nan,
                          "time_s": [1.0, 1.0, 1.2, 5.0]})
    # Runs 1-2 are predicted by median(1.0, 1.2) = 1.1 (10 % off), run 3 by 1.0 (1/6 off);
    # the batch-16 run has no repeat and is skipped.
    expected = np.mean([0.1, 0.1, 1 - 1.0 / 1.2])
    assert accuracy.repeat_floor(frame) == pytest.approx(expected)


def test_gpu_scenarios_read_the_evidence_bucket_from_the_detail():
    from gpu_scenarios import bucket_of

    assert bucket_of("to A from 1 measured GPU (measured evidence): spec sheet only") == "spec"
    assert bucket_of("...: via Tesla V100-SXM2-16GB (4 workloads on each hop)") == "chain"
    assert bucket_of("...: 3 workloads measured on both, few alike") == "weak"
    assert bucket_of("...: 12 workloads measured on both") == "direct"
    assert bucket_of("batch_size 64 between measured 32–128") == "other"


def test_batch_reach_counts_the_reach_in_measured_spacings_and_scores_each_asked_row():
    """benchmarks/batch_reach.py on one synthetic series (time per iteration 0.01 + 1e-4 ×
    batch, no noise): measured 8 and 16 (k = 2) or 8, 16 and 32 (k = 3), every larger batch
    asked, its reach in the last measured spacing (a doubling)."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "batch_reach.py"
    spec = importlib.util.spec_from_file_location("batch_reach_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    batches = [8, 16, 32, 64, 128]
    frame = pd.DataFrame({"network": "net", "gpu": "Tesla T4", "batch_size": batches,
                          "iterations": 10,
                          "time_s": [10 * (0.01 + 1e-4 * b) for b in batches]})
    rows = pd.DataFrame(module.simulate("test", "net", frame, "batch_size"))
    assert rows.groupby("k").size().to_dict() == {2: 3, 3: 2}
    assert rows[rows["k"] == 2]["reach"].tolist() == pytest.approx([1, 2, 3])
    assert rows[rows["k"] == 3]["reach"].tolist() == pytest.approx([1, 2])
    assert (rows["low"] <= rows["pred"]).all() and (rows["pred"] <= rows["high"]).all()
    lines = module.report(rows.assign(source="sia2023"))
    assert any(line.startswith("| [0.0, 1.5) | 2 |") for line in lines)


def test_coverage_weighs_each_split_alike_beside_the_pooled_rows(capsys) -> None:
    # Split 0: 8 rows, all inside; split 1: 2 rows, none inside. Pooled 80%, by split 50%.
    rows = [{"split": 0, "actual": 1.0, "low": 0.5, "high": 2.0} for _ in range(8)]
    rows += [{"split": 1, "actual": 3.0, "low": 0.5, "high": 2.0} for _ in range(2)]
    held = pd.DataFrame(rows).assign(scenario="s", dataset="d", kind="transfer",
                                     expected=0.1)
    accuracy.print_coverage(held)
    out = capsys.readouterr().out
    assert "| d | 10 | 80.0% |" in out and "| 50.0% |" in out
    assert "80% inside (50% with each split alike)" in out
