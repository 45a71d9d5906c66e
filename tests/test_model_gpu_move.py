"""Moving a time to another GPU (gpuperf_magics.model.gpu_move): the shipped moves."""

from __future__ import annotations

import pytest
from shared_data import NO_DATA, SHARED_DATA

DATA = SHARED_DATA


@pytest.mark.skipif(not DATA.is_dir(), reason=NO_DATA)
def test_the_shipped_gpu_moves_are_what_their_script_regenerates(monkeypatch) -> None:
    import importlib.util
    import sys
    from pathlib import Path

    from gpuperf_magics.model import gpu_move

    monkeypatch.setenv("GPUPERF_DATA_HOME", str(DATA))
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_transfer_params.py"
    spec = importlib.util.spec_from_file_location("gpu_transfer_params", path)
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gpu_transfer_params", script)
    spec.loader.exec_module(script)
    shipped = (path.parents[1] / "gpuperf_magics" / "model" / gpu_move.PARAMS_FILE).read_text()
    assert script.text() == shipped
    moves = gpu_move.shipped()
    # With the precision recorded, the learnt move beat the plain ratio on held-out GPUs; the
    # file says how much, and a move without precision falls back to the plain ratio.
    assert moves["recorded"].mape < moves["recorded"].naive_mape
    assert moves["unrecorded"].weight <= moves["recorded"].weight


def test_a_learnt_weight_that_loses_on_one_held_out_gpu_is_not_taken() -> None:
    from gpuperf_magics.model.gpu_move import robust_weight

    # Pooled, 0.75 wins (three groups better by a third); the fourth group, a GPU unlike the
    # others, is 20% worse than the plain ratio there: a new GPU may be that one.
    groups = [{0.0: 0.30, 0.25: 0.27, 0.5: 0.24, 0.75: 0.20, 1.0: 0.21}] * 3 + [
        {0.0: 0.30, 0.25: 0.31, 0.5: 0.33, 0.75: 0.36, 1.0: 0.40}]
    assert robust_weight(groups) == 0.0
    # Every group better: the weight whose worst group gains most (0.75: at worst 0.80x the
    # plain ratio, where 1.0 is at worst 0.85x).
    groups = [{0.0: 0.30, 0.25: 0.28, 0.5: 0.26, 0.75: 0.24, 1.0: 0.255},
              {0.0: 0.20, 0.25: 0.18, 0.5: 0.16, 0.75: 0.15, 1.0: 0.14}]
    assert robust_weight(groups) == 0.75
    # Ratios equal once rounded to 3 decimals go to the smaller weight: the plain ratio is not
    # left for a gain of 0.025%.
    groups = [{0.0: 0.2, 0.25: 0.19995, 0.5: 0.2001, 0.75: 0.21, 1.0: 0.22}]
    assert robust_weight(groups) == 0.0
    # A group the plain ratio answers exactly vetoes any weight that errs there.
    groups = [{0.0: 0.3, 0.25: 0.2, 0.5: 0.1, 0.75: 0.1, 1.0: 0.1},
              {0.0: 0.0, 0.25: 0.01, 0.5: 0.02, 0.75: 0.03, 1.0: 0.04}]
    assert robust_weight(groups) == 0.0
