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
