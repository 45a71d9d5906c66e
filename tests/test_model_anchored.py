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
