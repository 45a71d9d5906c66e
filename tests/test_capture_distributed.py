"""Data-parallel jobs: real 2-process DDP training on the CPU (gloo), started as users start
them (torchrun, torch.multiprocessing.spawn), each rank profiling its own loop.

Nothing may hang: the job sets a 30 s process-group timeout, each job runs under a subprocess
timeout, and each test under pytest-timeout.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import gpuperf_magics as gm

JOB = Path(__file__).parent / "jobs" / "ddp_mlp.py"
ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(150)


def run_job(store: Path, *args: str, torchrun: bool = True) -> subprocess.CompletedProcess:
    launcher = (
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
        if torchrun else [sys.executable]
    )
    return subprocess.run(
        [*launcher, str(JOB), str(store), *args],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )


def hooks_report(proc: subprocess.CompletedProcess) -> dict[str, str]:
    out = proc.stdout + proc.stderr
    assert "model-hook-left" not in out
    return dict(line.split()[1:3] for line in out.splitlines() if line.startswith("hooks-left"))


def test_a_ddp_job_is_one_run_written_by_rank_0(tmp_path):
    store = tmp_path / "runs.sqlite"
    proc = run_job(store, "--steps", "12", "--batch", "8", "--phases")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert hooks_report(proc) == {"0": "False", "1": "False"}
    runs = gm.Store(store).runs()
    assert len(runs) == 1
    row = runs.iloc[0]
    assert row["status"] == "ok" and row["network"] == "ddp-mlp"
    assert row["iterations"] + row["warmup_iterations"] == 12
    assert row["batch_size"] == 8  # samples per step of one process
    assert row["world_size"] == 2 and row["global_batch_size"] == 2 * 8
    assert row["gpu_count"] == 0  # the CPU
    assert row["dist_backend"] == "gloo"
    assert row["rank_slowest"] in (0, 1)
    assert row["rank_median_max_s"] >= row["rank_median_min_s"] > 0
    assert row["rank_spread"] == pytest.approx(
        row["rank_median_max_s"] / row["rank_median_min_s"] - 1)
    # The stored iterations are the slowest rank's: its median is the run's.
    assert row["it_median_s"] == pytest.approx(row["rank_median_max_s"])
    assert row["arch_params"] == 32 * 64 + 64 + 64 * 10 + 10
    assert row["tags"] == {}
    # --phases: the wait for DDP's gradient all-reduce after the backward pass is its own phase.
    run = gm.Store(store).get_run(int(row["run_id"]))
    for it in run.iterations[1:]:  # the first ran before the model (and its hooks) was known
        assert set(it.phases) >= {"forward", "backward", "sync", "optimizer"}
        assert sum(it.phases.values()) == pytest.approx(it.duration_s, rel=1e-6, abs=1e-9)
    assert run.phase_medians()["sync"] > 0


def test_a_store_mixing_job_and_single_process_runs_still_predicts(tmp_path):
    """The job's figures are measurement conditions to the predictor (how they enter a
    prediction is its own business): a store with both kinds of run still answers."""
    import torch
    from torch import nn

    from gpuperf_magics.prediction.predict import predict_time

    store = tmp_path / "runs.sqlite"
    proc = run_job(store, "--steps", "8", "--batch", "8")
    assert proc.returncode == 0, proc.stderr[-3000:]
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    for batch in (8, 16):
        with gm.profile_training(name="ddp-mlp", store=store):
            for _ in range(8):
                opt.zero_grad()
                nn.functional.cross_entropy(net(torch.randn(batch, 32)),
                                            torch.randint(0, 10, (batch,))).backward()
                opt.step()
    runs = gm.Store(store).runs()
    assert sorted(runs["world_size"]) == [1, 1, 2]
    prediction = predict_time(store, "ddp-mlp", batch_sizes=[32], iterations=100)
    assert len(prediction.frame) >= 1


def test_a_failed_rank_saves_its_partial_run_and_the_other_does_too(tmp_path):
    store = tmp_path / "runs.sqlite"
    proc = run_job(store, "--fail-rank", "1", "--steps", "12")
    assert proc.returncode != 0
    assert hooks_report(proc) == {"0": "False", "1": "False"}
    runs = gm.Store(store).runs().set_index(gm.Store(store).runs()["tags"].map(
        lambda t: t.get("rank")))
    assert sorted(runs.index) == ["0", "1"], (proc.stdout + proc.stderr)[-4000:]
    failed = runs.loc["1"]
    assert failed["status"] == "failed" and "failed at step 5" in failed["error"]
    assert failed["recorded_iterations"] == 5
    assert failed["world_size"] == 2 and failed["rank"] == 1
    assert pd_isna(failed["global_batch_size"])  # a rank alone does not know the job's
    # Rank 0 lost its peer inside DDP's all-reduce (or was stopped by torchrun): its own run.
    assert runs.loc["0"]["status"] in ("failed", "interrupted")
    assert runs.loc["0"]["recorded_iterations"] >= 4


def test_a_peer_failing_after_its_loop_never_hangs_the_exchange(tmp_path):
    """torch.multiprocessing.spawn; rank 1 raises after its loop, before the exchange."""
    store = tmp_path / "runs.sqlite"
    proc = run_job(store, "--spawn", "2", "--fail-rank", "1", "--fail-after-loop",
                   torchrun=False)
    assert proc.returncode != 0
    assert hooks_report(proc) == {"0": "False", "1": "False"}
    runs = gm.Store(store).runs()
    by_rank = {t["rank"]: row for t, (_, row) in zip(runs["tags"], runs.iterrows())}
    assert sorted(by_rank) == ["0", "1"]
    assert "after its loop" in by_rank["1"]["error"]
    assert by_rank["0"]["status"] in ("failed", "interrupted")
    assert all(row["recorded_iterations"] == 12 for row in by_rank.values())


def pd_isna(value) -> bool:
    import pandas as pd

    return bool(pd.isna(value))


def spawned_worker(rank: int, world: int) -> None:
    """What a notebook's worker function does, minus the training (the point is that the
    magic cannot see it)."""


def test_a_cell_that_starts_workers_says_so_with_the_fix(ip, capsys, _isolated_store):
    """The way accelerate's notebook_launcher and Lightning's ddp_notebook start workers:
    torch.multiprocessing.start_processes with fork."""
    ip.user_ns["spawned_worker"] = spawned_worker
    ip.run_cell_magic(
        "profile_training", "",
        "import torch.multiprocessing as mp\n"
        "mp.start_processes(spawned_worker, args=(2,), nprocs=2, start_method='fork')\n",
    )
    out = " ".join(capsys.readouterr().out.split())  # the note is wrapped between words
    assert "2 worker processes" in out and "spawned_worker" in out
    assert "`with gpuperf_magics.profile_training():` around the loop in spawned_worker()" in out
    assert gm.Store(_isolated_store).runs().empty
    import multiprocessing.process

    assert multiprocessing.process.BaseProcess.start.__module__ == "multiprocessing.process"


def test_dataloader_workers_are_not_worker_processes_of_the_job():
    import torch

    data = torch.utils.data.TensorDataset(torch.randn(32, 4))
    loader = torch.utils.data.DataLoader(data, batch_size=8, num_workers=1)
    with gm.profile_training(save=False) as run:
        batches = sum(1 for _ in loader)  # loads data, trains nothing
    assert batches == 4
    assert "no training iteration detected" in run.notes[0]
    assert "worker process" not in run.notes[0]


def test_merge_counts_distinct_devices_and_keeps_the_slowest_ranks_iterations():
    """The merge of the ranks' summaries as rank 0 does it, for device layouts this machine
    cannot run (one GPU per rank on two hosts, two ranks sharing a GPU)."""
    from gpuperf_magics.capture.distributed import Job, merge
    from gpuperf_magics.run import IterationRecord, Run

    def summary(seconds, device, batch=8):
        its = [IterationRecord(i, seconds, batch, warmup=i == 0) for i in range(5)]
        return {"status": "ok", "iterations": its, "batch_size": batch,
                "median_s": seconds, "device": device}

    ranks = [summary(0.010, "a/GPU-0"), summary(0.012, "a/GPU-1"), summary(0.011, "b/GPU-0"),
             summary(0.010, "b/GPU-0")]
    run = Run("job", iterations=ranks[0]["iterations"], batch_size=8)
    gpus = merge(run, ranks, Job(0, 4, "nccl"))
    assert gpus == 3  # host b's GPU-0 is shared by two ranks
    assert run.iterations is not ranks[0]["iterations"]
    assert run.median_s == 0.012 and run.quality["rank_slowest"] == 1
    assert run.quality["global_batch_size"] == 32 and run.quality["world_size"] == 4
    assert run.quality["rank_spread"] == pytest.approx(0.2)
    cpu = Run("job", batch_size=8)
    assert merge(cpu, [summary(0.01, None), summary(0.02, None, batch=4)], Job(0, 2, "gloo")) == 0
    assert cpu.quality["global_batch_size"] == 12
