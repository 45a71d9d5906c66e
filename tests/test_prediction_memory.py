"""The GPU memory a batch needs, from the peaks runs measured."""

from __future__ import annotations

import pandas as pd
import pytest

from gpuperf_magics.prediction.memory import HEADROOM, fits, peak_memory


def runs(peaks, gpu_count=1):
    """Runs of one network: ``peaks`` is a list of (batch size, peak GiB or None)."""
    return pd.DataFrame({"batch_size": [b for b, _ in peaks],
                         "peak_memory_gb": [p for _, p in peaks],
                         "gpu_count": gpu_count})


def test_a_fixed_part_and_a_part_per_sample_are_fitted_from_two_or_more_batches():
    model = peak_memory(runs([(16, 3.0), (16, 3.4), (32, 4.4), (64, 7.4)]))
    # Medians per batch: 3.2, 4.4, 7.4 -> least squares.
    assert model.batch_sizes == (16, 32, 64)
    assert model.fixed_gb == pytest.approx(1.8, abs=0.2)
    assert model.per_sample_gb == pytest.approx(0.0875, rel=0.1)
    assert model.needed_gb(128) == pytest.approx(model.fixed_gb + 128 * model.per_sample_gb)
    assert model.needed_gb(128, gpus=8) == pytest.approx(model.fixed_gb + 16 * model.per_sample_gb)
    assert model.needed_gb(100, gpus=8) == pytest.approx(model.fixed_gb + 13 * model.per_sample_gb)


def test_one_batch_size_scales_in_proportion_with_a_caveat():
    model = peak_memory(runs([(32, 8.0), (32, None)]))
    assert (model.fixed_gb, model.per_sample_gb) == (0.0, 0.25)
    assert model.needed_gb(64) == 16.0
    assert "one batch size only" in model.caveat and "larger batch" in model.caveat


def test_noise_that_gives_a_negative_fixed_part_or_no_growth_stays_sensible():
    through_origin = peak_memory(runs([(10, 1.0), (20, 2.6)]))
    assert through_origin.fixed_gb == 0 and through_origin.per_sample_gb > 0
    assert "proportional" in through_origin.caveat
    flat = peak_memory(runs([(8, 2.0), (16, 1.9)]))
    assert (flat.fixed_gb, flat.per_sample_gb) == (2.0, 0.0)


def test_single_device_runs_are_preferred_and_unknown_peaks_give_none():
    mixed = pd.concat([runs([(16, 2.0), (32, 3.0)]), runs([(64, 50.0)], gpu_count=8)])
    assert peak_memory(mixed).batch_sizes == (16, 32)
    assert peak_memory(runs([(64, 5.0)], gpu_count=8)).batch_sizes == (64,)
    assert peak_memory(runs([(16, None)])) is None
    assert peak_memory(pd.DataFrame({"batch_size": [8], "gpu_count": [0]})) is None


def test_fits_keeps_headroom_for_the_context_and_the_allocator():
    assert fits(14.0, 16.0) is True
    assert fits((1 - HEADROOM) * 16 + 0.01, 16.0) is False
    assert fits(1.0, None) is None and fits(float("nan"), 16.0) is None
