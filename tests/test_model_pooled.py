"""Networks never measured: the cross-network model on architecture features."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import gpuperf_magics as gm
from gpuperf_magics.architecture import describe
from gpuperf_magics.model import TrainingTimeModel, evaluate
from gpuperf_magics.model.pooled import TERM_COLUMNS, TERMS

#: (GFLOPs per sample, parameters, conv layers, layers) of made-up networks.
NETS = {
    "mlp_a": (0.5, 1e6, 0, 6),
    "mlp_b": (2.0, 4e6, 0, 10),
    "cnn_a": (4.0, 2e6, 8, 20),
    "cnn_b": (8.0, 9e6, 16, 40),
    "cnn_c": (1.0, 5e5, 4, 12),
}
GPUS = {"T4": (8.1, 320.0), "V100": (15.7, 900.0)}


def _law(gflops: float, params: float, conv: int, layers: int, batch: int, tflops: float,
         bw: float) -> float:
    """Seconds per iteration: a floor, arithmetic at 40 % of peak (convolutions at 25 %),
    and weight traffic."""
    arithmetic = batch * gflops * 1e9 / (tflops * 1e12)
    share = conv / layers
    return 2e-3 + arithmetic / 0.4 * (1 - share) + arithmetic / 0.25 * share + params * 16 / (
        bw * 1e9)


def _table(nets: dict = NETS) -> tuple[pd.DataFrame, np.ndarray]:
    rows = []
    for net, (gflops, params, conv, layers) in nets.items():
        for gpu, (tflops, bw) in GPUS.items():
            for batch in (16, 32, 64, 128):
                rows.append({"network": net, "gpu": gpu, "batch_size": batch, "iterations": 100,
                             "arch_flops_fwd_bwd": gflops * 1e9, "arch_params": params,
                             "arch_layers_conv": conv, "arch_layers_total": layers,
                             "time_s": 100 * _law(gflops, params, conv, layers, batch, tflops,
                                                  bw)})
    frame = pd.DataFrame(rows)
    return frame.drop(columns="time_s"), frame["time_s"].to_numpy()


def test_a_network_never_measured_follows_the_law_of_the_others():
    x, y = _table()
    held = x["network"] == "cnn_b"
    model = TrainingTimeModel().fit(x[~held], y[~held])
    table = model.predict_table(x[held])
    assert (table["kind"] == "new network").all()
    assert "4 measured networks" in table["detail"].iloc[0]
    assert table["time_s"].to_numpy() == pytest.approx(y[held], rel=0.02)
    assert (table["time_low_s"] < table["time_s"]).all()
    assert (table["time_s"] < table["time_high_s"]).all()
    assert model.pooled_.cv_mape < 0.02
    assert table["expected_mape"].iloc[0] == pytest.approx(model.pooled_.cv_mape)
    assert set(model.pooled_.terms) <= set(TERMS) and "1" in model.pooled_.terms
    report = model.report()
    rows = report[report["network"] == "(new network)"]
    assert set(rows["item"]) == {"new network term", "new network cv_mape"}


def test_leave_one_network_out_is_an_evaluation_scenario():
    x, y = _table()
    table = evaluate(TrainingTimeModel(), x, y, "leave_one_out", column="network")
    assert list(table["held_out"]) == [f"network = {n}" for n in sorted(NETS)]
    assert table["mape"].max() < 0.05


def test_a_new_gpu_for_a_new_network_says_both():
    x, y = _table()
    held = x["network"] == "cnn_b"
    model = TrainingTimeModel().fit(x[~held], y[~held])
    row = x[held].head(1).assign(gpu="A100 40GB")
    table = model.predict_table(row)
    assert table["kind"].iloc[0] == "new network"
    assert "never measured" in table["detail"].iloc[0]
    assert table["expected_mape"].iloc[0] > model.pooled_.cv_mape


@pytest.mark.parametrize("drop, nets", [
    (["arch_flops_fwd_bwd"], NETS),  # no architecture: nothing to carry over
    ([], dict(list(NETS.items())[:2])),  # two networks: no leave-one-network-out to trust
])
def test_without_architecture_or_enough_networks_the_error_says_what_is_needed(drop, nets):
    x, y = _table(nets)
    x = x.drop(columns=drop)
    model = TrainingTimeModel().fit(x, y)
    assert model.pooled_ is None
    unseen = x.head(1).assign(network="resnet")
    with pytest.raises(ValueError, match=r"'resnet' was not in the training data.*"
                                         r"at least 3 measured networks.*arch_flops_fwd_bwd"):
        model.predict(unseen)


def test_the_paper_method_stays_per_network():
    x, y = _table()
    model = TrainingTimeModel(method="paper").fit(x, y)
    assert model.pooled_ is None


def _mlp(width: int, depth: int) -> nn.Module:
    layers: list[nn.Module] = [nn.Linear(32, width), nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 10))


def test_real_profiled_networks_predict_one_described_but_never_trained(tmp_path):
    """Three tiny MLPs trained under the profiler; a fourth only described."""
    path = tmp_path / "zoo.sqlite"
    torch.manual_seed(0)
    for name, (width, depth) in {"narrow": (64, 2), "wide": (256, 2), "deep": (128, 4)}.items():
        model = _mlp(width, depth)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        for batch in (8, 32):
            x, y = torch.randn(batch, 32), torch.randint(0, 10, (batch,))
            with gm.profile_training(name=name, store=path, warmup=2):
                for _ in range(8):
                    opt.zero_grad()
                    nn.functional.cross_entropy(model(x), y).backward()
                    opt.step()
    runs = gm.Store(path).runs()
    runs.loc[0, "other_cpu_load"] = np.nan  # a measurement-quality gap never blocks a fit
    model = TrainingTimeModel().fit(runs.drop(columns="time_s"), runs["time_s"])
    assert model.pooled_ is not None and model.pooled_.networks == ("deep", "narrow", "wide")
    unseen = _mlp(512, 3)
    features = describe(unseen, torch.randn(16, 32)).as_features()
    row = runs.head(1).assign(network="new", batch_size=16, iterations=100, **{
        k: v for k, v in features.items() if k in runs.columns and not isinstance(v, str)})
    table = model.predict_table(row)
    assert table["kind"].iloc[0] == "new network"
    assert np.isfinite(table["time_s"].iloc[0]) and table["time_s"].iloc[0] > 0
    assert np.isfinite(table["expected_mape"].iloc[0])
    # Non-negative terms: more FLOPs and parameters per sample never cost less. The narrow
    # MLP's architecture under another name goes through the same cross-network model.
    narrow = runs[runs["network"] == "narrow"].drop(columns="time_s").head(1).assign(
        network="narrow again", batch_size=16, iterations=100)
    assert table["time_s"].iloc[0] >= model.predict(narrow)[0] * (1 - 1e-9)


def test_a_new_network_without_its_architecture_says_what_to_give():
    x, y = _table()
    held = x["network"] == "cnn_b"
    model = TrainingTimeModel().fit(x[~held], y[~held])
    row = x[held].head(1).assign(arch_flops_fwd_bwd=np.nan)
    with pytest.raises(ValueError, match=r"'cnn_b' was never measured.*'arch_flops_fwd_bwd'"):
        model.predict(row)


def test_a_new_network_on_a_gpu_needs_gpu_runs():
    x, y = _table()
    cpu = x.drop(columns="gpu")
    held = cpu["network"] == "cnn_b"
    model = TrainingTimeModel().fit(cpu[~held], y[~held])
    assert model.pooled_ is not None and model.pooled_.hw_cols == ()
    with pytest.raises(ValueError, match="measured on the CPU only"):
        model.predict(cpu[held].head(1).assign(gpu="H100 SXM"))


def test_a_new_network_lacking_a_figure_its_terms_read_is_refused():
    x, y = _table()
    held = x["network"] == "cnn_b"
    model = TrainingTimeModel().fit(x[~held], y[~held])
    reads = {c for t in model.pooled_.terms for c in TERM_COLUMNS[t]}
    dropped = sorted(reads - {"gpu_count"})
    if not dropped:
        pytest.skip("the selected terms read no optional column")
    with pytest.raises(ValueError, match=dropped[0]):
        model.predict(x[held].head(1).drop(columns=dropped))
