"""Quick-start demo: profile a small CNN on the CPU at a few batch sizes, show what was stored.

Run with ``gpuperf demo`` or ``python -m gpuperf_magics.skins.demo`` (``make demo`` installs and
runs it). The demo writes
to a temporary store unless ``--store`` is given, so it never mixes with your own runs.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

__all__ = ["main", "profile_demo"]


def _build_cnn():  # torch is imported lazily: `import gpuperf_magics.skins.demo` stays cheap
    from torch import nn

    class DemoCNN(nn.Module):
        """A CIFAR-sized CNN: three conv blocks and a linear head."""

        def __init__(self, width: int = 16, classes: int = 10) -> None:
            super().__init__()
            blocks = []
            channels = 3
            for k in range(3):
                out = width * 2**k
                blocks += [nn.Conv2d(channels, out, 3, padding=1), nn.BatchNorm2d(out),
                           nn.ReLU(inplace=True), nn.MaxPool2d(2)]
                channels = out
            self.features = nn.Sequential(*blocks)
            self.head = nn.Linear(channels * 4 * 4, classes)

        def forward(self, x):
            return self.head(self.features(x).flatten(1))

    return DemoCNN


def profile_demo(store: str | Path, batch_sizes: list[int], steps: int) -> None:
    """Train the demo CNN for ``steps`` iterations at each batch size under the profiler."""
    import torch
    from torch import nn

    import gpuperf_magics as gm

    torch.manual_seed(0)
    model = _build_cnn()()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for batch in batch_sizes:
        data = torch.utils.data.TensorDataset(
            torch.randn(batch * steps, 3, 32, 32), torch.randint(0, 10, (batch * steps,))
        )
        loader = torch.utils.data.DataLoader(data, batch_size=batch, shuffle=True)
        with gm.profile_training(name="DemoCNN", store=store, tags={"demo": "quickstart"}) as run:
            for x, y in loader:
                opt.zero_grad()
                loss_fn(model(x), y).backward()
                opt.step()
        print(run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpuperf_magics.skins.demo",
        description="Profile a small CNN on the CPU at a few batch sizes and show the store.",
    )
    parser.add_argument("--store", help="SQLite store to write (default: a temporary file)")
    parser.add_argument("--batch-sizes", default="16,32,64,96",
                        help="comma-separated batch sizes to profile (default: 16,32,64,96)")
    parser.add_argument("--steps", type=int, default=25, help="iterations per batch size")
    args = parser.parse_args(argv)
    try:
        batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    except ValueError:
        parser.error(f"--batch-sizes expects integers such as 16,32,64, got {args.batch_sizes!r}")
    if not batch_sizes or min(batch_sizes) <= 0 or args.steps < 2:
        parser.error("give positive batch sizes and --steps >= 2")

    import pandas as pd

    import gpuperf_magics as gm

    with tempfile.TemporaryDirectory() as tmp:
        store = args.store or str(Path(tmp) / "demo.sqlite")
        where = store if args.store else (
            f"{store} (deleted when the demo ends; --store PATH keeps it)")
        print(f"Profiling DemoCNN on the CPU at batch sizes {batch_sizes} → {where}\n")
        profile_demo(store, batch_sizes, args.steps)
        runs = gm.Store(store).runs()
        columns = ["run_id", "network", "batch_size", "iterations", "time_s", "it_median_s",
                   "samples_per_s", "arch_params", "arch_flops_fwd_bwd", "cpu_model",
                   "cpu_threads"]
        with pd.option_context("display.width", 160, "display.max_columns", 20):
            print("\nWhat the store holds (Store(path).runs(), selected columns):")
            print(runs[[c for c in columns if c in runs.columns]].to_string(index=False))
        print("\nPredicted time for 10 epochs of 50,000 samples, at batch sizes and on GPUs "
              "not measured\n(predict_time(store, epochs=10, samples=50_000, gpus=[...]); in a "
              "notebook: %predict_time --epochs 10 --samples 50000 --gpu \"T4,A100 80GB\"):\n")
        print(gm.predict_time(store, epochs=10, samples=50_000, gpus=["T4", "A100 80GB"]))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
