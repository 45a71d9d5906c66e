"""The CPU→GPU check of ``gpu_check.py``: a small zoo profiled on the CPU, its GPU predicted from
those CPU runs alone (``gm.predict_time``, as a notebook user asks it), then measured on the GPU.

Each network is profiled for a few steps on the CPU into a store of its own, so the prediction
sees only CPU runs and answers from the FLOPs and the kernels an iteration launches
(``gpuperf_magics.model.roofline``); on ``cuda:0`` the same loop is profiled at the GPU batch
and the median steady iteration compared. Without a GPU (``--cpu``) the predictions are made
for a catalog GPU and only the plumbing is checked.

The zoo spans what the estimate counts: convolutions with batch norm (the tutorial's SmallCNN,
and a wider CNN whose FLOPs matter), a plain MLP with Adam, a two-layer transformer encoder
(attention, layer norm, dropout, embedding) with AdamW, and an LSTM with an embedding.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: A prediction within this factor of the measurement passes: the estimate is an order of
#: magnitude to plan with (roofline.EXPECTED_MAPE is 50 %), not a transfer from a measured GPU.
FACTOR = 5.0


@dataclass
class Net:
    """One network of the zoo: how to build it, a batch of it, its optimizer."""

    name: str
    build: Callable[[], Any]
    inputs: Callable[[int], tuple[Any, Any]]  # batch size -> (inputs, targets) on the CPU
    optimizer: Callable[[Any], Any]
    gpu_batch: int


def _small_cnn() -> Any:
    from torch import nn

    class SmallCNN(nn.Module):  # the tutorial's network (25,674 parameters)
        def __init__(self, width: int = 16) -> None:
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
                nn.MaxPool2d(2), nn.Conv2d(width, 2 * width, 3, padding=1),
                nn.BatchNorm2d(2 * width), nn.ReLU(), nn.MaxPool2d(2))
            self.head = nn.Linear(2 * width * 8 * 8, 10)

        def forward(self, x: Any) -> Any:
            return self.head(self.features(x).flatten(1))

    return SmallCNN()


def _wide_cnn() -> Any:
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(128, 256, 3, padding=1), nn.BatchNorm2d(256), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 10))


def _mlp() -> Any:
    from torch import nn

    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256),
                         nn.ReLU(), nn.Linear(256, 10))


class _Transformer:
    """Built lazily (torch is imported only when the check runs)."""

    @staticmethod
    def build() -> Any:
        from torch import nn

        class Tiny(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.embed = nn.Embedding(1000, 128)
                layer = nn.TransformerEncoderLayer(128, 4, 256, batch_first=True)
                self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
                self.head = nn.Linear(128, 10)

            def forward(self, x: Any) -> Any:
                return self.head(self.encoder(self.embed(x)).mean(1))

        return Tiny()


def _lstm() -> Any:
    from torch import nn

    class Tagger(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(1000, 64)
            self.rnn = nn.LSTM(64, 128, batch_first=True)
            self.head = nn.Linear(128, 10)

        def forward(self, x: Any) -> Any:
            return self.head(self.rnn(self.embed(x))[0][:, -1])

    return Tagger()


def zoo() -> list[Net]:
    import torch

    def images(size: int) -> Callable[[int], tuple[Any, Any]]:
        return lambda n: (torch.randn(n, 3, size, size), torch.randint(0, 10, (n,)))

    def tokens(length: int) -> Callable[[int], tuple[Any, Any]]:
        return lambda n: (torch.randint(0, 1000, (n, length)), torch.randint(0, 10, (n,)))

    def sgd(m: Any) -> Any:
        return torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)

    return [
        Net("zoo-small-cnn", _small_cnn, images(32), sgd, 64),
        Net("zoo-wide-cnn", _wide_cnn, images(32), sgd, 128),
        Net("zoo-mlp", _mlp, lambda n: (torch.randn(n, 1, 28, 28), torch.randint(0, 10, (n,))),
            lambda m: torch.optim.Adam(m.parameters(), lr=1e-3), 256),
        Net("zoo-transformer", _Transformer.build, tokens(32),
            lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3), 32),
        Net("zoo-lstm", _lstm, tokens(20), sgd, 64),
    ]


def profile(net: Net, store: Path, device: str, batch: int, steps: int) -> Any:
    """``steps`` iterations of ``net`` under the profiler; the batch is copied to the device
    every step, as a loader's batches are."""
    import torch
    from torch import nn

    import gpuperf_magics as gm

    torch.manual_seed(0)
    model = net.build().to(device)
    opt = net.optimizer(model)
    x, y = net.inputs(batch)
    with gm.profile_training(name=net.name, store=store) as run:
        for _ in range(steps):
            xb, yb = x.to(device), y.to(device)
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    return run


def predicted(net: Net, store: Path, gpu: str, batch: int) -> Any:
    """The GPU row of ``gm.predict_time`` on a store holding only the CPU runs of ``net``."""
    import gpuperf_magics as gm

    frame = gm.predict_time(store, net.name, batch_sizes=[batch], iterations=100,
                            gpus=[gpu]).frame
    return frame[frame["gpu"].notna()].iloc[0]


def check_cpu_to_gpu(check: Callable[..., None], device: str, cpu_only: bool) -> None:
    """Profile the zoo on the CPU, predict the GPU, measure it there (see the module docstring)."""
    import torch

    gpu = torch.cuda.get_device_name(0) if not cpu_only else "Tesla T4"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for net in zoo():
            batch = net.gpu_batch if not cpu_only else min(net.gpu_batch, 8)
            cpu_store = Path(tmp) / f"{net.name}-cpu.sqlite"
            cpu_run = profile(net, cpu_store, "cpu", min(batch, 16), 6)
            try:
                row = predicted(net, cpu_store, gpu, batch)
            except ValueError as exc:  # PredictionError: a GPU the catalog lacks, no FLOPs
                check(False, f"CPU→GPU {net.name}: predicted from CPU runs", str(exc)[:300])
                continue
            per_it = float(row["per_iteration_s"])
            check(row["kind"] == "transfer" and per_it > 0 and "launches" in row["detail"],
                  f"CPU→GPU {net.name}: predicted from CPU runs",
                  f"{per_it * 1e3:.3f} ms/it on {gpu} at batch {batch} "
                  f"(CPU {cpu_run.median_s * 1e3:.1f} ms/it at batch {min(batch, 16)})")
            if cpu_only:
                continue
            gpu_run = profile(net, Path(tmp) / f"{net.name}-gpu.sqlite", device, batch, 40)
            steady = [it.duration_s for it in gpu_run.iterations[5:]]
            measured = statistics.median(steady)
            rows.append((net.name, per_it, measured))
            check(1 / FACTOR <= per_it / measured <= FACTOR,
                  f"CPU→GPU {net.name}: within {FACTOR:g}× of the measurement",
                  f"predicted {per_it * 1e3:.3f} ms, measured {measured * 1e3:.3f} ms "
                  f"({100 * (per_it / measured - 1):+.0f}%)")
    if rows:
        print(f"       CPU→GPU on {gpu}: network, predicted ms, measured ms, error")
        for name, pred, meas in rows:
            print(f"       {name:<18} {pred * 1e3:9.3f} {meas * 1e3:9.3f} "
                  f"{100 * (pred / meas - 1):+7.0f}%")
        errors = [abs(p / m - 1) for _, p, m in rows]
        print(f"       MAPE {100 * statistics.mean(errors):.0f}% over {len(rows)} networks")
