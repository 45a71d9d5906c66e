"""The one rule by which the store's model leads a young run, and the live line's prior, on
runs saved into a real SQLite store."""

from __future__ import annotations

import pytest

import gpuperf_magics as gm
from gpuperf_magics.prediction.live import LivePrior, blend, live_prior
from gpuperf_magics.run import IterationRecord, Run


def _run(batch, status="ok"):
    its = [IterationRecord(index=i, duration_s=0.01 + 0.001 * batch, samples=batch,
                           warmup=i == 0) for i in range(30)]
    return Run(network="cnn", status=status, iterations=its, batch_size=batch, device="cuda",
               gpu="Tesla T4", gpu_count=1)


@pytest.fixture
def store(tmp_path):
    st = gm.Store(tmp_path / "runs.sqlite")
    for batch in (16, 32, 64):  # 1 ms per sample plus 10 ms
        st.save_run(_run(batch))
    return st


def test_blend_is_the_one_rule_of_the_run_and_the_model():
    assert blend(0.1, 20, 0.3) == (pytest.approx(0.5 * 0.1 + 0.5 * 0.3), 0.5)
    assert blend(0.1, 0, 0.3) == (0.3, 0.0)  # no steady iteration yet: the model
    assert blend(None, 5, 0.3) == (0.3, 0.0)
    assert blend(0.1, 5, None) == (0.1, 1.0)  # no model: the run
    assert blend(0.1, 5, float("nan")) == (0.1, 1.0)
    assert blend(None, 0, None) == (None, 0.0)
    weights = [blend(0.1, n, 0.3)[1] for n in (1, 10, 100, 1000)]
    assert weights == sorted(weights) and weights[-1] > 0.98  # the run takes over


def test_the_prior_asks_the_model_once_the_loop_shows_its_configuration(store):
    shown = [None, ("cnn", 32, "Tesla T4", 1)]  # unknown at first, then the loop shows it
    asked = []

    def configuration():
        asked.append(1)
        return shown[min(len(asked), 2) - 1]

    prior = live_prior(store, "cnn")
    assert isinstance(prior, LivePrior) and prior.network == "cnn" and prior.reason is None
    assert prior(None, 0, configuration) is None  # nothing known yet: nothing to say
    model = gm.predict_time(store, "cnn", batch_sizes=[32], iterations=1).frame["time_s"]
    assert prior(None, 0, configuration) == pytest.approx(model.iloc[0])  # warm-up: model
    assert prior.model_per_step == pytest.approx(model.iloc[0])
    assert 0.03 < prior.model_per_step < 0.06
    # With steady steps of its own the run's mean is blended in, by the one rule.
    assert prior(0.1, 20, configuration) == blend(0.1, 20, prior.model_per_step)[0]
    assert len(asked) == 2  # kept: the model is asked once
    # Another GPU of the same network: the model's move, not the measured device.
    moved = live_prior(store)
    moved(None, 0, lambda: ("cnn", 32, "NVIDIA A100-SXM4-80GB", 1))
    assert moved.model_per_step is not None and moved.model_per_step != prior.model_per_step


def test_the_prior_never_fails_the_cell(store, tmp_path):
    for empty in (live_prior(tmp_path / "empty.sqlite"), live_prior(store, "no-such-network"),
                  live_prior(tmp_path)):  # no store, no such network, a folder
        assert empty.reason and empty(0.1, 5, lambda: ("cnn", 32, None, 0)) == 0.1
    other = live_prior(store)
    assert other(0.1, 5, lambda: ("mlp-12K", 32, None, 0)) == 0.1  # cnn's model, not mlp's
    on_cpu = live_prior(store)
    assert on_cpu(None, 0, lambda: ("cnn", 32, None, 0)) is None  # T4 runs: no CPU time

    def broken():
        raise RuntimeError("recorder gone")

    assert live_prior(store)(0.2, 3, broken) == 0.2  # asked again at the next update
