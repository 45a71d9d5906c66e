"""The what-if panel on a store filled by real profiled CPU runs."""

from __future__ import annotations

import pytest

from gpuperf_magics.widgets import WhatIfPanel, what_if


@pytest.fixture(scope="module")
def store(tmp_path_factory, profile_mlp):
    path = tmp_path_factory.mktemp("widgets") / "runs.sqlite"
    profile_mlp(path, [8, 16, 32])
    return path


def test_panel_answers_and_follows_the_controls(store):
    panel = what_if(store)
    assert isinstance(panel, WhatIfPanel)
    first = panel.text
    assert "expected error" in first
    # 10 epochs of the profiled loader's 256 samples at the latest batch size (32).
    assert panel.batch_size.value == 32 and "for 80 iterations" in first
    panel.epochs.value = 100
    assert panel.text != first
    assert f"{100 * 256 // panel.batch_size.value:,} iterations" in panel.text
    panel.batch_size.value = 16
    assert "interpolation" in panel.text
    panel.batch_size.value = 1024
    assert "extrapolation" in panel.text
    panel.gpu.value = "Tesla T4"
    one_gpu = panel.text
    assert "transfer" in one_gpu
    panel.gpu_count.value = 4
    assert "transfer" in panel.text and panel.text != one_gpu


def test_magic_widget_flag(ip, store):
    panel = ip.run_line_magic("predict_time", f"--store {store} --widget -q -o")
    assert isinstance(panel, WhatIfPanel)
    assert panel.network.value == "mlp"
