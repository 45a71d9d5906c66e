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
    import numpy as np

    assert fits(np.float64(17.0), 16.0) is False  # a plain bool for numpy figures too


# ---------------------------------------------------------------- memory_columns


def _imported(path, batches=(16, 32), gpu="T4", **columns):
    """Imported rows of one network on ``gpu`` whose peak is 1 GiB + 1 GiB per 16 samples."""
    import gpuperf_magics as gm

    gm.Store(path).import_table(pd.DataFrame({
        "network": "resnet", "batch_size": list(batches),
        "time_s": [0.01 + 0.001 * b for b in batches],
        "peak_memory_gb": [1 + b / 16 for b in batches], **columns}), gpu=gpu)
    return path


def test_every_prediction_row_carries_its_memory_against_a_known_answer(tmp_path):
    """1 GiB fixed + 1/16 GiB per sample: batch 512 needs 33 GiB; the T4 (16 GB, 14.4 after
    the headroom) holds up to batch 214, so 128 is its largest power of two; the A10G (24 GB,
    21.6) 256; the H100 (80 GB, 72) 1024. On 4 H100s the batch is each GPU's, as the
    predictor reads it (weak scaling), so each needs what one did."""
    import gpuperf_magics as gm

    store = _imported(tmp_path / "runs.sqlite")
    frame = gm.predict_time(store, batch_sizes=[16, 512], iterations=100,
                            gpus=["A10G", "H100"]).frame
    assert list(frame["memory_gb"]) == pytest.approx([2.0, 33.0] * 3)
    assert list(frame["gpu_memory_gb"]) == [16.0, 16.0, 24.0, 24.0, 80.0, 80.0]
    assert list(frame["fits"]) == [True, False, True, False, True, True]
    assert list(frame["largest_batch"]) == [128, 128, 256, 256, 1024, 1024]
    assert str(frame["fits"].dtype) == "boolean" and str(frame["largest_batch"].dtype) == "Int64"
    four = gm.predict_time(store, batch_sizes=[512], iterations=100, gpus=["H100"],
                           gpu_count=4).frame.iloc[-1]
    assert "weak scaling" in four["detail"]
    assert four["memory_gb"] == pytest.approx(33.0) and four["largest_batch"] == 1024


def test_unknown_memory_is_na_not_a_guess(filled):
    """CPU runs record no peak: no row has a figure, and the CPU has no GPU memory."""
    import gpuperf_magics as gm

    frame = gm.predict_time(filled, batch_sizes=[64], iterations=100, gpus=["T4"]).frame
    assert frame["memory_gb"].isna().all()
    assert frame["gpu_memory_gb"].isna().tolist() == [True, False]  # CPU row, then the T4
    assert frame["fits"].isna().all() and frame["largest_batch"].isna().all()


def test_memory_columns_go_by_network_and_scale_a_deeper_row():
    from gpuperf_magics.prediction.memory import memory_columns

    runs = pd.DataFrame({"network": ["a", "a", "b"], "batch_size": [8, 16, 8],
                         "gpu": "T4", "gpu_count": 1, "depth": [10, 10, 10],
                         "peak_memory_gb": [2.0, 3.0, 4.0]})
    asked = pd.DataFrame({"network": ["a", "a", "b", "b"], "batch_size": [32, 32, 16, 8],
                          "gpu": ["T4", "T4", "T4", None], "gpu_count": [1, 1, 1, 0],
                          "depth": [10, 20, 10, 10]})
    out = memory_columns(asked, runs)
    # a: 1 GiB + 1/8 per sample; b: one batch size, 0.5 GiB per sample; depth 20 doubles.
    assert out["memory_gb"].iloc[:3].tolist() == pytest.approx([5.0, 10.0, 8.0])
    assert pd.isna(out["memory_gb"].iloc[3])  # the CPU row
    assert out["largest_batch"].iloc[:3].tolist() == [64, 32, 16]  # 14.4 GiB usable
    assert list(asked.columns) == list(out.columns[:5])  # the rows' own columns kept


def test_a_global_batch_is_split_over_the_gpus_a_held_one_is_not():
    """As the predictor reads a data-parallel query (model.data_parallel): ``batch_size`` is
    each GPU's unless a ``global_batch_size`` or ``local_batch_size`` says otherwise."""
    from gpuperf_magics.prediction.memory import memory_columns

    runs = pd.DataFrame({"batch_size": [8, 16], "gpu": "T4", "gpu_count": 1,
                         "peak_memory_gb": [2.0, 3.0]})  # 1 GiB + 1/8 GiB per sample
    held = pd.DataFrame({"batch_size": [64], "gpu": ["T4"], "gpu_count": [4]})
    split = held.assign(global_batch_size=[64])
    local = held.assign(local_batch_size=[16])
    assert memory_columns(held, runs)["memory_gb"].tolist() == pytest.approx([9.0])
    assert memory_columns(held, runs)["largest_batch"].tolist() == [64]  # per GPU
    assert memory_columns(split, runs)["memory_gb"].tolist() == pytest.approx([3.0])  # 16 each
    assert memory_columns(split, runs)["largest_batch"].tolist() == [256]  # over the 4
    assert memory_columns(local, runs)["memory_gb"].tolist() == pytest.approx([3.0])


def test_largest_batch_edges():
    from gpuperf_magics.prediction.memory import PeakMemory, largest_batch

    grows = PeakMemory(1.0, 1.0, (8, 16), "")
    assert largest_batch(grows, 10.0) == 8  # 1 + 8 = 9 ≤ 9.0; 17 is not
    assert largest_batch(grows, 1.5) == 0  # not even batch 1
    assert largest_batch(grows, None) is None
    assert largest_batch(PeakMemory(2.0, 0.0, (8, 16), ""), 16.0) is None  # any batch fits


class _PeakCuda:
    """The CUDA peak-memory counters, faked: the cell sets ``peak`` as its batch would."""

    def __init__(self) -> None:
        self.peak = 0

    def reset_peak_memory_stats(self, device: object = None) -> None:
        self.peak = 0

    def max_memory_allocated(self, device: object = None) -> int:
        return self.peak


CELL = """
for step in range(6):
    x, y = torch.randn({batch}, 32), torch.randint(0, 10, ({batch},))
    opt.zero_grad()
    loss_fn(model(x), y).backward()
    opt.step()
    cuda.peak = int((1 + {batch} / 16) * 2**30)
"""


def test_csv_of_the_magic_and_the_command_after_real_training(ip, tmp_path, monkeypatch,
                                                              capsys):
    """Real training in a real shell, its peaks read at the CUDA seam (1 GiB + 1 GiB per 16
    samples), stored in SQLite: ``%predict_time --csv`` and ``gpuperf predict --csv`` carry
    the memory columns, and batch 512 is said not to fit the T4."""
    from gpuperf_magics.capture import recorder as recorder_mod
    from gpuperf_magics.capture.clock import CudaPeakMemory
    from gpuperf_magics.skins.cli import main

    cuda = _PeakCuda()
    monkeypatch.setattr(recorder_mod, "make_peak_memory",
                        lambda device: CudaPeakMemory(cuda, device))
    store = tmp_path / "runs.sqlite"
    ip.user_ns["cuda"] = cuda
    ip.run_cell("import torch\nfrom torch import nn\ntorch.manual_seed(0)\n"
                "model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))\n"
                "opt = torch.optim.SGD(model.parameters(), lr=0.05)\n"
                "loss_fn = nn.CrossEntropyLoss()\n")
    for batch in (16, 32):
        ip.run_cell_magic("profile_training", f"-n mlp --store {store} -q",
                          CELL.format(batch=batch))
    capsys.readouterr()
    import gpuperf_magics as gm

    assert gm.Store(store).runs()["peak_memory_gb"].tolist() == pytest.approx([2.0, 3.0])
    line = f"mlp --store {store} --iterations 100 --gpu T4 --batch-size 32, 512 --csv"
    ip.run_line_magic("predict_time", line)
    magic = pd.read_csv(__import__("io").StringIO(capsys.readouterr().out))
    assert main(["predict", "mlp", "--store", str(store), "--iterations", "100",
                 "--gpu", "T4", "--batch-size", "32,512", "--csv"]) == 0
    command = pd.read_csv(__import__("io").StringIO(capsys.readouterr().out))
    for table in (magic, command):
        assert {"memory_gb", "gpu_memory_gb", "fits", "largest_batch"} <= set(table.columns)
        t4 = table[table["gpu"] == "Tesla T4"]
        assert t4["memory_gb"].tolist() == pytest.approx([3.0, 33.0])
        assert t4["fits"].tolist() == [True, False]
        assert t4["largest_batch"].tolist() == [128, 128]
        assert table.loc[table["gpu"].isna(), "memory_gb"].isna().all()  # the CPU rows
    assert magic.columns.tolist() == command.columns.tolist()
    # Shown inline: the GPU memory column and the plain line on the batch that won't fit.
    ip.run_line_magic("predict_time", line.replace(" --csv", ""))
    out = capsys.readouterr().out
    assert "GPU memory" in out and "33 of 16 GB (won't fit)" in out
    assert ("batch 512 needs about 33 GB; the T4 has 16 GB: the largest batch that fits is "
            "about 128") in out.splitlines()
