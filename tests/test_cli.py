"""The ``gpuperf`` command line through subprocess, on temporary stores."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import gpuperf_magics as gm

SHARED_SIA = Path(__file__).resolve().parents[2] / "shared" / "data" / "sia2023"


def gpuperf(*args: str, store: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "GPUPERF_STORE": str(store)}
    script = Path(sys.executable).with_name("gpuperf")  # the installed entry point
    command = [str(script)] if script.exists() else [sys.executable, "-m", "gpuperf_magics.cli"]
    proc = subprocess.run([*command, *args],
                          capture_output=True, text=True, env=env, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture
def step_times(tmp_path) -> Path:
    """A table as another tool writes it: per-GPU batch and seconds per step."""
    if SHARED_SIA.is_dir():
        frame = pd.read_csv(SHARED_SIA / "cifar10" / "placements-aws.csv")
        frame = frame[frame["placement"] == 1]
    else:  # the same shape, when ../shared is absent
        frame = pd.DataFrame({"placement": 1, "local_bsz": [32, 64, 128, 256, 512],
                              "step_time": [0.04, 0.06, 0.1, 0.19, 0.37], "sync_time": 0.0})
    path = tmp_path / "steps.csv"
    frame.to_csv(path, index=False)
    return path


def test_import_runs_predict_evaluate(tmp_path, step_times):
    store = tmp_path / "cli.sqlite"
    out = gpuperf("import", str(step_times), "--map", "local_bsz=batch_size",
                  "--map", "step_time=time_s", "--map", "sync_time=sync_time_s",
                  "--network", "resnet18-cifar", "--gpu", "Tesla T4", store=store).stdout
    n = len(pd.read_csv(step_times))
    assert f"imported {n} row(s)" in out
    runs = gm.Store(store).runs()
    assert len(runs) == n and set(runs["gpu"]) == {"Tesla T4"}
    assert (runs["iterations"] == 1).all()

    again = gpuperf("import", str(step_times), "--map", "local_bsz=batch_size",
                    "--map", "step_time=time_s", store=store, check=False)
    assert again.returncode == 2 and "--again" in again.stderr
    assert len(gm.Store(store).runs()) == n

    listing = gpuperf("runs", store=store).stdout
    assert "resnet18-cifar" in listing and "Tesla T4" in listing
    as_csv = gpuperf("runs", "--csv", store=store).stdout
    assert as_csv.splitlines()[0].startswith("run_id,network,batch_size")

    pred = gpuperf("predict", "--batch-size", "48,96", "--iterations", "1000",
                   "--gpu", "V100", store=store).stdout
    assert "resnet18-cifar: fitted on" in pred
    assert "batch 48 · Tesla T4" in pred and "Tesla V100-SXM2-16GB" in pred
    assert "interpolation" in pred and "transfer" in pred

    ev = gpuperf("evaluate", "--scenario", "leave_one_out", "--column", "batch_size",
                 store=store).stdout
    assert "mape" in ev and "leave_one_out" in ev


def test_broken_csv_imports_nothing_and_says_where(tmp_path):
    store = tmp_path / "cli.sqlite"
    bad = tmp_path / "bad.csv"
    bad.write_text("network,batch_size,time_s\nnet,32,0.5\nnet,64,abc\nnet,-8,0.4\n")
    proc = gpuperf("import", str(bad), store=store, check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "time_s" in proc.stderr and "line 3" in proc.stderr
    assert gm.Store(store).runs().empty


def test_errors_are_one_line(tmp_path):
    store = tmp_path / "empty.sqlite"
    proc = gpuperf("predict", store=store, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("gpuperf predict: error:") and "profile" in proc.stderr
    proc = gpuperf("import", str(tmp_path / "missing.csv"), store=store, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    proc = gpuperf("import", "x.csv", "--map", "nonsense", store=store, check=False)
    assert proc.returncode == 2 and "COLUMN=CANONICAL" in proc.stderr
