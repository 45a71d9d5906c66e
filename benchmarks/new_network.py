"""Predicting a network never measured, from the others: leave-one-network-out on a CPU zoo.

Run: ``.venv/bin/python benchmarks/new_network.py [--store PATH] [--quick]``

Profiles a zoo of small networks on this machine's CPU (MLPs, CNNs, a transformer encoder, an
LSTM; widths and depths apart; 3 batch sizes each) with :func:`gpuperf_magics.profile_training`
into a SQLite store (a temporary one unless ``--store`` names a file to keep or reuse), then
holds out each network in turn and predicts its runs from the others' (``evaluate(...,
"leave_one_out", column="network")``). Prints MAPE per held-out network for
``TrainingTimeModel()`` (its cross-network model: FLOPs, parameters and layers) and for a
FLOPs-proportional baseline (time per iteration = k × batch × FLOPs per sample, k fitted on
the other networks: Paleo's platform-efficiency idea).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import gpuperf_magics as gm  # noqa: E402
from gpuperf_magics.model import TrainingTimeModel, evaluate  # noqa: E402
from gpuperf_magics.prediction.store_model import robust_times  # noqa: E402


def _mlp(width: int, depth: int) -> nn.Module:
    layers: list[nn.Module] = [nn.Linear(64, width), nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 10))


def _cnn(channels: int, blocks: int) -> nn.Module:
    layers: list[nn.Module] = [nn.Conv2d(3, channels, 3, padding=1), nn.ReLU()]
    for _ in range(blocks - 1):
        layers += [nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels),
                   nn.ReLU()]
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, 10))


class _Encoder(nn.Module):
    def __init__(self, dim: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Linear(16, dim)
        block = nn.TransformerEncoderLayer(dim, 4, dim * 2, dropout=0.0, batch_first=True)
        self.body = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.embed(x)).mean(dim=1))


class _Recurrent(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(16, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.lstm(x)[0][:, -1])


#: name -> (constructor, input shape per sample)
ZOO = {
    "mlp_256x2": (lambda: _mlp(256, 2), (64,)),
    "mlp_512x4": (lambda: _mlp(512, 4), (64,)),
    "mlp_1024x2": (lambda: _mlp(1024, 2), (64,)),
    "mlp_128x8": (lambda: _mlp(128, 8), (64,)),
    "cnn_16x3": (lambda: _cnn(16, 3), (3, 16, 16)),
    "cnn_32x2": (lambda: _cnn(32, 2), (3, 16, 16)),
    "cnn_32x4": (lambda: _cnn(32, 4), (3, 16, 16)),
    "encoder_64x2": (lambda: _Encoder(64, 2), (12, 16)),
    "lstm_128": (lambda: _Recurrent(128), (12, 16)),
}


def profile_zoo(store: Path, batch_sizes: tuple[int, ...] = (8, 32, 128), steps: int = 30,
                names: list[str] | None = None) -> None:
    """Train each network of :data:`ZOO` under the profiler at each batch size."""
    torch.manual_seed(0)
    for name in names or list(ZOO):
        build, shape = ZOO[name]
        model = build()
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        loss_fn = nn.CrossEntropyLoss()
        for batch in batch_sizes:
            x, y = torch.randn(batch, *shape), torch.randint(0, 10, (batch,))
            with gm.profile_training(name=name, store=store, warmup=3):
                for _ in range(steps):
                    opt.zero_grad()
                    loss_fn(model(x), y).backward()
                    opt.step()


class FlopsBaseline:
    """Time per iteration = k × batch × FLOPs per sample (forward + backward), one k for all."""

    def get_params(self, deep: bool = True) -> dict:
        return {}

    def set_params(self, **params: object) -> FlopsBaseline:
        return self

    @staticmethod
    def _work(X: pd.DataFrame) -> np.ndarray:
        return (X["batch_size"] * X["arch_flops_fwd_bwd"] * X["iterations"]).to_numpy(float)

    def fit(self, X: pd.DataFrame, y: np.ndarray) -> FlopsBaseline:
        ratio = np.asarray(y, float) / self._work(X)
        self.k_ = float(np.exp(np.median(np.log(ratio))))  # the MAPE-robust centre in log space
        return self

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return self.k_ * self._work(X)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, help="keep (or reuse) the zoo's runs in this file")
    parser.add_argument("--quick", action="store_true", help="fewer steps per run")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        store = args.store or Path(tmp) / "zoo.sqlite"
        if not store.exists():
            start = time.perf_counter()
            profile_zoo(store, steps=15 if args.quick else 30)
            print(f"profiled {len(ZOO)} networks in {time.perf_counter() - start:.0f} s",
                  file=sys.stderr)
        runs = gm.Store(store).runs()
        # As %predict_time learns: a trimmed mean of the steady iterations (median if busy).
        x, y = runs.drop(columns="time_s"), robust_times(gm.Store(store), runs)
        rows = {}
        for label, model in (("flops × k", FlopsBaseline()), ("default", TrainingTimeModel())):
            table = evaluate(model, x, y, "leave_one_out", column="network")
            rows[label] = 100 * table.set_index("held_out")["mape"]
        frame = pd.DataFrame(rows)
        frame.index = [i.removeprefix("network = ") for i in frame.index]
        print("leave-one-network-out on a CPU zoo (MAPE %):")
        print("| held-out network | flops × k | default |")
        print("| --- | ---: | ---: |")
        for name, r in frame.iterrows():
            print(f"| {name} | {r['flops × k']:.1f} | {r['default']:.1f} |")
        print(f"| mean | {frame['flops × k'].mean():.1f} | {frame['default'].mean():.1f} |")


if __name__ == "__main__":
    main()
