"""The anchored per-network model reads arrays (features.Table) or a frame alike."""

from __future__ import annotations

import numpy as np
import pandas as pd
from model_data import multi_gpu_rows

from gpuperf_magics.model.anchored import AnchoredNetworkModel, _function_of
from gpuperf_magics.model.features import Table


def test_a_frame_and_its_table_give_the_same_model_bit_for_bit() -> None:
    rows = multi_gpu_rows()
    feats = rows[["batch_size", "gpu_count", "gpu_fp32_tflops", "gpu_bandwidth_gbs"]]
    its, y = rows["iterations"].to_numpy(float), rows["time_s"].to_numpy()
    for space in ("log", "linear"):
        hw = ("gpu_fp32_tflops", "gpu_bandwidth_gbs")
        a = AnchoredNetworkModel(space=space, hw_cols=hw)
        b = AnchoredNetworkModel(space=space, hw_cols=hw)
        a.fit(feats, its, y)
        b.fit(Table.of(feats), its, y)
        assert a.terms == b.terms
        query = feats.assign(batch_size=feats["batch_size"] * 3, gpu_fp32_tflops=19.5)
        np.testing.assert_array_equal(a.predict(query, its), b.predict(Table.of(query), its))
        np.testing.assert_array_equal(a.predict(feats, its), b.predict(feats, its))


def test_function_of_agrees_with_a_pandas_groupby() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        frame = pd.DataFrame({"g": rng.choice([1.0, 2.0, 3.0], 12),
                              "h": rng.choice([5.0, 6.0], 12)})
        frame["disk"] = frame["g"] * 10 + (rng.uniform() < 0.5) * rng.choice([0.0, 1.0], 12)
        expected = bool((frame.groupby(["g", "h"])["disk"].nunique() <= 1).all())
        assert _function_of(Table.of(frame), "disk", ("g", "h")) == expected


def _grid(configs: int, repeats: int, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray,
                                                            np.ndarray]:
    """``configs`` configurations of batch × image size on 4 GPUs, each ``repeats`` times,
    with 3% noise around a known per-iteration cost."""
    rng = np.random.default_rng(seed)
    grid = pd.DataFrame([(b, i, t) for b in 2 ** np.arange(2, 11)
                         for i in range(32, 32 + 8 * 200, 8) for t in (8.1, 15.7, 19.5, 65.0)],
                        columns=["batch_size", "image_size", "gpu_fp32_tflops"])
    x = grid.iloc[np.sort(rng.permutation(len(grid))[:configs])].reset_index(drop=True)
    x = x.loc[x.index.repeat(repeats)].reset_index(drop=True)
    x["gpu_bandwidth_gbs"] = 40 * x["gpu_fp32_tflops"]
    per_it = 0.005 + 2e-6 * x["batch_size"] * (x["image_size"] / 224) ** 2 / x["gpu_fp32_tflops"]
    y = 100 * per_it * (1 + 0.03 * rng.standard_normal(len(x)))
    return x, np.full(len(x), 100.0), y.to_numpy()


def _row_kernel_loo(model: AnchoredNetworkModel, x: pd.DataFrame, its: np.ndarray,
                    y: np.ndarray, h: float) -> np.ndarray:
    """The anchor's leave-one-configuration-out log-residuals, row by row (n × n): the
    definition that the kernel over configurations must reproduce."""
    coords = model._coords(Table.of(x), its)
    coords = np.where(np.isfinite(coords), coords, 0.0)
    base = model.backbone(Table.of(x), its)
    resid = np.log(y / base)
    d2 = ((coords[:, None, :] - coords[None, :, :]) ** 2).sum(axis=2)
    same = (d2 == 0)  # the rows of one configuration share their coordinates
    k = np.exp(-d2 / (2 * h * h)) * ~same
    corr = (k @ resid) / (k.sum(axis=1) + 1e-3)
    return np.log(y / (base * np.exp(corr)))


def test_the_kernel_over_configurations_is_the_kernel_over_their_rows() -> None:
    x, its, y = _grid(150, repeats=3)
    model = AnchoredNetworkModel(hw_cols=("gpu_fp32_tflops", "gpu_bandwidth_gbs"))
    model.fit(x, its, y)
    assert model.n_configs == 150 and len(model._train_coords) == 150
    assert model.bandwidth > 0  # the anchor is on: its leave-out residuals are compared
    np.testing.assert_allclose(model.loo_logres,
                               _row_kernel_loo(model, x, its, y, model.bandwidth), atol=1e-12)


def test_a_network_of_many_configurations_takes_its_nearest_and_answers_alike(
        monkeypatch) -> None:
    import gpuperf_magics.model.anchored as anchored

    x, its, y = _grid(600, repeats=1)
    hw = ("gpu_fp32_tflops", "gpu_bandwidth_gbs")
    dense = AnchoredNetworkModel(hw_cols=hw)
    dense.fit(x, its, y)
    monkeypatch.setattr(anchored, "DENSE_CONFIGS", 100)
    monkeypatch.setattr(anchored, "NEIGHBOURS", 64)
    near = AnchoredNetworkModel(hw_cols=hw)
    near.fit(x, its, y)
    assert near._tree is not None and dense._tree is None
    assert near.bandwidth == dense.bandwidth > 0
    query, q_its, _ = _grid(200, repeats=1, seed=3)
    np.testing.assert_allclose(near.predict(query, q_its), dense.predict(query, q_its),
                               rtol=1e-3)
    assert abs(near.anchor_mape - dense.anchor_mape) < 1e-3
