"""Shared fixtures: one thread for torch, a fresh store per test, the public data from ../shared."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import gpuperf_magics as gm

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def pytest_configure(config: pytest.Config) -> None:
    # Timings are never asserted, but a 2-core CI box thrashes with OpenMP contention
    # (notes/capture.md: 0.5 ms iterations became 85 ms with 2 threads under load).
    import torch

    torch.set_num_threads(1)
    if SHARED_DATA.is_dir():
        os.environ.setdefault("GPUPERF_DATA_HOME", str(SHARED_DATA))


@pytest.fixture(autouse=True)
def _isolated_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test writes to its own store: nothing lands in the user's data directory."""
    path = tmp_path / "store.sqlite"
    monkeypatch.setenv("GPUPERF_STORE", str(path))
    return path


@pytest.fixture(scope="session")
def ip():
    """A real IPython shell with the extension loaded (a process-wide singleton)."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpuperf_magics")
    return shell


def _profile_mlp(store, batch_sizes, name="mlp", steps=10, samples=256):
    """Real training of a tiny MLP under the profiler at each batch size."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    for batch in batch_sizes:
        data = torch.utils.data.TensorDataset(torch.randn(samples, 32),
                                              torch.randint(0, 10, (samples,)))
        loader = torch.utils.data.DataLoader(data, batch_size=batch)
        with gm.profile_training(name=name, store=store):
            for _ in range(max(1, steps * batch // samples + 1)):
                for x, y in loader:
                    opt.zero_grad()
                    loss_fn(model(x), y).backward()
                    opt.step()


@pytest.fixture(scope="session")
def profile_mlp():
    """``profile_mlp(store, batch_sizes, name=...)``: real profiled CPU runs into a store."""
    return _profile_mlp
