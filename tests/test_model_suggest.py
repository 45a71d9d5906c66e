"""What to profile next (gpuperf_magics.model.suggest): the best expected gain per second on a
series with a known curve and cost; measured and other-GPU candidates never suggested."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gpuperf_magics.model import TrainingTimeModel
from gpuperf_magics.model.suggest import AUTO_ITERATIONS, device_name, latest_device

#: A known curve: seconds per iteration = floor + slope × batch (a line, so a piecewise-linear
#: move through two measured points predicts every batch exactly, and so every cost).
FLOOR, SLOPE = 0.004, 2e-4


def _runs(batches: tuple[int, ...], gpu: str = "Tesla T4", stamp: str = "2026-01-01"
          ) -> pd.DataFrame:
    return pd.DataFrame({"network": "net", "batch_size": list(batches), "iterations": 50,
                         "gpu": gpu, "created_at": stamp})


def _seconds(x: pd.DataFrame) -> np.ndarray:
    return x["iterations"].to_numpy(float) * (FLOOR + SLOPE * x["batch_size"].to_numpy(float))


def _fitted(x: pd.DataFrame) -> TrainingTimeModel:
    return TrainingTimeModel(public_data=False).fit(x, _seconds(x))


def test_suggestion_is_the_best_expected_gain_per_second() -> None:
    measured = _runs((2, 4))
    model = _fitted(measured)
    target = _runs((256,))
    candidates = _runs((8, 16, 32, 64, 128)).set_index(pd.Index(list("abcde"), name="id"))
    best = model.suggest(target, candidates, k=1)
    before = best.attrs["expected_mape_before"]
    # Each candidate alone: its expected error once measured and its cost.
    alone = pd.concat([model.suggest(target, candidates.loc[[c]], k=1) for c in candidates.index])
    rate = (before - alone["expected_mape_after"]) / alone["cost_s"]
    assert best.index[0] == rate.idxmax()
    assert best["gain_per_s"].iloc[0] == pytest.approx(rate.max())
    # The known cost: a run of AUTO_ITERATIONS iterations on the known curve.
    known = AUTO_ITERATIONS * (FLOOR + SLOPE * alone["batch_size"].to_numpy(float))
    np.testing.assert_allclose(alone["cost_s"].to_numpy(), known, rtol=1e-6)
    # The candidates' own columns and index are kept.
    assert list(best.columns[: len(candidates.columns)]) == list(candidates.columns)
    assert best.index.name == "id"
    # Nearer the target leaves less to extrapolate: the expected error falls with the batch.
    after = alone["expected_mape_after"].to_numpy()
    assert np.all(np.diff(after) <= 1e-12) and after[-1] < after[0] < before


def test_k_picks_are_greedy_and_each_narrows_the_answer() -> None:
    model = _fitted(_runs((2, 4)))
    picks = model.suggest(_runs((256,)), _runs((8, 16, 32, 64, 128)), k=3)
    assert len(picks) == 3 and picks["batch_size"].is_unique
    after = picks["expected_mape_after"].to_numpy()
    assert after[0] < picks.attrs["expected_mape_before"]
    assert np.all(np.diff(after) <= 1e-12)
    assert (picks["gain_per_s"] >= 0).all()


def test_measured_and_other_gpu_candidates_are_never_suggested() -> None:
    measured = pd.concat([_runs((2, 4), stamp="2026-01-01"),
                          _runs((8,), gpu="NVIDIA A100-SXM4-40GB", stamp="2025-06-01")])
    model = _fitted(measured)
    assert model.latest_device_ == device_name("Tesla T4")
    candidates = pd.concat([_runs((4, 128)), _runs((8, 64, 128), gpu="NVIDIA A100-SXM4-40GB")],
                           ignore_index=True)
    picks = model.suggest(_runs((256,)), candidates, k=len(candidates))
    assert list(picks.index) == [1]  # batch 128 on the T4: 4 is measured, the rest elsewhere
    on_a100 = model.suggest(_runs((256,)), candidates, k=len(candidates), device="A100")
    assert set(on_a100.index) <= {3, 4}  # batch 8 was measured on the A100
    assert set(on_a100["gpu"]) == {"NVIDIA A100-SXM4-40GB"}


def test_latest_device_reads_the_latest_run() -> None:
    runs = pd.concat([_runs((2,), stamp="2026-03-01"),
                      _runs((4,), gpu="NVIDIA A100-SXM4-40GB", stamp="2026-01-01")])
    assert latest_device(runs) == device_name("Tesla T4")
    assert latest_device(runs.drop(columns="created_at")) == device_name("A100-SXM4-40GB")
    assert latest_device(runs.drop(columns="gpu")) == "CPU"
    assert device_name(None) == device_name("cpu") == "CPU"


def test_bad_input_says_what_to_do() -> None:
    model = _fitted(_runs((2, 4)))
    with pytest.raises(ValueError, match="positive whole number"):
        model.suggest(_runs((256,)), _runs((8,)), k=0)
    with pytest.raises(TypeError, match="DataFrame"):
        model.suggest(_runs((256,)).to_numpy(), _runs((8,)))
    paper = TrainingTimeModel(method="paper").fit(_runs((2, 4, 8, 16)),
                                                  _seconds(_runs((2, 4, 8, 16))))
    with pytest.raises(ValueError, match="method='default'"):
        paper.suggest(_runs((256,)), _runs((32,)))
