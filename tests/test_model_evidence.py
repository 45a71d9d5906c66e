"""The evidence base of GPU moves (gpuperf_magics.model.evidence): keys, aliases, the file."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from shared_data import NO_DATA, SHARED_DATA

from gpuperf_magics.model import evidence as ev

ROOT = Path(__file__).resolve().parents[1]


def _script(monkeypatch: pytest.MonkeyPatch, home: Path):
    monkeypatch.setenv("GPUPERF_DATA_HOME", str(home))
    path = ROOT / "benchmarks" / "build_evidence.py"
    spec = importlib.util.spec_from_file_location("build_evidence", path)
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "build_evidence", script)
    spec.loader.exec_module(script)
    return script


def test_device_keys_tell_precisions_apart_only_where_the_gpu_has_them() -> None:
    assert ev.device_key("Tesla T4", None, "Turing") == "Tesla T4|fp32"
    assert ev.device_key("Tesla T4", "tf32", "Turing") == "Tesla T4|fp32"
    assert ev.device_key("NVIDIA A100-SXM4-40GB", None, "Ampere") == "NVIDIA A100-SXM4-40GB|unk"
    assert ev.device_key("NVIDIA A100-SXM4-40GB", "amp", "Ampere").endswith("|fp16")
    assert [k for k, _ in ev.alternates("G|unk")] == ["G|unk", "G|tf32", "G|fp32"]
    assert ev.alternates("G|fp16") == [("G|fp16", 1.0)]


def test_aliases_name_one_network_family() -> None:
    assert ev.family_of("imagenet") == ("resnet50", "cnn")  # sia2023's ImageNet is ResNet-50
    assert ev.family_of("resnet50|v2")[0] == "resnet50"
    assert ev.family_of("cifar10")[0] == ev.family_of("resnet18")[0]
    assert ev.family_of("my_net") == ("my_net", None)



def test_neighbours_count_the_workloads_each_other_device_shares() -> None:
    """Which devices share workloads with a device, and how many (what chains and
    ``from_other_hosts`` read), from the device's own workloads."""
    placed = {"A|fp32": ("w1", "w2", "w3"), "B|fp32": ("w1",), "C|fp32": ("w1", "w2"),
              "D|fp32": ("w4",)}
    frame = pd.DataFrame([
        {"source": "own", "workload": w, "network": "net", "family": "net", "kind": None,
         "gpu": d.split("|")[0], "precision": "fp32", "batch_size": 8, "t": 0.1,
         "quality": 1.0} for d, ws in placed.items() for w in ws])
    base = ev.EvidenceBase(frame)
    assert base.neighbours("A|fp32") == {"B|fp32": 1, "C|fp32": 2}
    assert list(base.neighbours("C|fp32")) == ["A|fp32", "B|fp32"]  # sorted by device
    assert base.neighbours("C|fp32") == {"A|fp32": 2, "B|fp32": 1}
    assert base.neighbours("D|fp32") == {}
    assert base.neighbours("E|fp32") == {}  # a device the base never measured
    mine = base.neighbours("A|fp32")
    mine["B|fp32"] = 99  # a copy: the cache is not the caller's to change
    assert base.neighbours("A|fp32")["B|fp32"] == 1

def _fixture(home: Path) -> None:
    rows = []
    for net, scale in (("resnet18", 1.0), ("transformer", 2.0), ("lstm_lm", 0.5)):
        for b in (16, 32, 64):
            for gpu, speed in (("Tesla K80", 1.0), ("Tesla P100-PCIE-16GB", 2.5),
                               ("Tesla V100-SXM2-16GB", 4.0)):
                rows.append({"network": net, "gpu": gpu, "batch_size": b, "precision": "fp32",
                             "gpu_count": 1, "time_s": scale * 0.001 * b / speed})
    (home / "gavel2020").mkdir(parents=True)
    pd.DataFrame(rows).to_csv(home / "gavel2020" / "gavel.csv", index=False)


def test_a_rebuild_of_a_small_fixture_gives_the_same_bytes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fixture(tmp_path)
    script = _script(monkeypatch, tmp_path)
    first = ev.to_json(script.build(("gavel2020",)))
    script.collect.cache_clear()
    second = ev.to_json(script.build(("gavel2020",)))
    assert first == second
    base = ev.from_json(first)
    assert base.n == 27 and set(base.frame["gpu"]) == {
        "Tesla K80", "Tesla P100-PCIE-16GB", "Tesla V100-SXM2-16GB"}
    assert ev.to_json(base) == first  # read back, written again: the same text
    assert base.sources["gavel2020"]["commit"].startswith("c4fa400")
    assert "gpu:spec" in base.calibration and "gpu:weak" in base.calibration
    # A held-out GPU is dropped by its catalog name, whatever the spelling asked.
    less = script.build(("gavel2020",), exclude_gpus=("v100 16gb",))
    assert "Tesla V100-SXM2-16GB" not in set(less.frame["gpu"])


def test_peak_power_recovers_the_power_a_data_set_was_made_with(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GPUs whose times scale as the square root of their effective-peak ratio: the report
    # says 0.50, and the spec-sheet move's error grows as the power leaves it.
    script = _script(monkeypatch, tmp_path)
    gpus = ("Tesla K80", "Tesla P100-PCIE-16GB", "Tesla V100-SXM2-16GB")
    peak = {g: script._peak(f"{g}|fp32") for g in gpus}
    rows = [{"network": net, "gpu": g, "batch_size": b, "precision": "fp32", "gpu_count": 1,
             "time_s": scale * 0.001 * b / np.sqrt(peak[g] / peak["Tesla K80"])}
            for net, scale in (("resnet18", 1.0), ("transformer", 2.0), ("lstm_lm", 0.5))
            for b in (16, 32, 64) for g in gpus]
    (tmp_path / "gavel2020").mkdir(parents=True)
    pd.DataFrame(rows).to_csv(tmp_path / "gavel2020" / "gavel.csv", index=False)
    lines = script.peak_power(("gavel2020",))
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells[0] == "gavel2020" and cells[1] == "54"  # 9 workloads on 3 GPUs, 6 ordered pairs each
    assert cells[2] == "0.50" and cells[3] == "54, 0.50" and cells[4] == "0.50, 0.00"
    # Each move errs by half its log peak ratio at the power 1: σ is half the 16th-84th
    # percentile range of those errors (six moves per workload, alike in all nine).
    ratios = [np.log(peak[a] / peak[b]) for a in gpus for b in gpus if a != b]
    errors = -0.5 * np.array(ratios * 9)
    assert float(cells[5]) == pytest.approx(np.diff(np.quantile(errors, [0.16, 0.84]))[0] / 2,
                                            abs=0.005)
    assert float(cells[5]) > 0.1
    mape = [float(line.split("|")[2].split("/")[0]) for line in lines[-4:]]
    assert mape == sorted(mape, reverse=True) and mape[0] > 10  # 1.0, 0.9, 0.8, 0.7


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=NO_DATA)
def test_the_shipped_evidence_is_what_its_script_rebuilds(monkeypatch: pytest.MonkeyPatch) -> None:
    script = _script(monkeypatch, SHARED_DATA)
    shipped = (ROOT / "gpuperf_magics" / "model" / ev.EVIDENCE_FILE).read_text()
    sources = tuple(ev.from_json(shipped).sources)
    assert ev.to_json(script.build(sources)) == shipped
    base = ev.shipped()
    assert base.n > 500 and np.all(base.quality > 0)
    # sia2023's host-bound V100 rows carry little to another host.
    v100 = base.frame[(base.frame["source"] == "sia2023")
                      & (base.frame["gpu"] == "Tesla V100-SXM2-32GB")]
    assert (v100["quality"] <= 0.15).all()
