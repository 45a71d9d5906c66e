"""The quick-start demo runs end to end (tiny settings) and ends with predictions."""

from __future__ import annotations

from gpuperf_magics.skins.demo import main


def test_demo_profiles_and_predicts(tmp_path, capsys):
    store = tmp_path / "demo.sqlite"
    assert main(["--store", str(store), "--batch-sizes", "8,16,32", "--steps", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count("profile_training: DemoCNN") == 3
    assert "What the store holds" in out and "arch_flops_fwd_bwd" in out
    assert "Predicted time" in out
    assert "Tesla T4" in out and "NVIDIA A100-SXM4-80GB" in out
    assert "measured: median of its runs" in out and "transfer" in out
