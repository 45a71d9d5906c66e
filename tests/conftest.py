"""Shared fixtures: one thread for torch, a fresh store per test, the public data from ../shared."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ci import in_ci
from made_runs import per_step_times
from shared_data import SHARED_DATA

import gpuperf_magics as gm


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
    # Where runs a server could not take are kept: never the user's own data folder.
    monkeypatch.setenv("GPUPERF_FALLBACK_STORE", str(tmp_path / "unsynced.sqlite"))
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


@pytest.fixture(scope="module", name="filled")
def filled_store(tmp_path_factory, profile_mlp):
    """A store of four profiled CPU runs of an MLP, made once per test module (``filled``)."""
    path = tmp_path_factory.mktemp("predict") / "runs.sqlite"
    profile_mlp(path, [8, 16, 32, 64])
    return path


# --------------------------------------------------------------------------- PostgreSQL
# A throw-away cluster (pgcluster.py). Under CI the tests that need it fail when it cannot
# start; elsewhere they are skipped with the reason.
from pgcluster import PG_PASSWORD, PG_PASSWORD_USER, PostgresServer  # noqa: E402


@pytest.fixture(scope="session")
def postgres_server():
    """The session's PostgreSQL cluster (skipped without PostgreSQL, except under CI)."""
    try:
        import psycopg  # noqa: F401

        server = PostgresServer()
        server.start()
    except Exception as exc:
        message = f"PostgreSQL test server could not start: {exc}"
        if in_ci():
            pytest.fail(message + " (CI=true: the PostgreSQL tests must run)", pytrace=False)
        pytest.skip(message)
    server.admin(f"CREATE ROLE {PG_PASSWORD_USER} LOGIN PASSWORD '{PG_PASSWORD}'")
    server.admin("CREATE ROLE reader LOGIN")
    yield server
    server.stop()


@pytest.fixture
def pg_url(postgres_server) -> str:
    """A new, empty database on the test server (no store in it yet); dropped afterwards."""
    name = postgres_server.new_database()
    yield postgres_server.url(name)
    postgres_server.drop_database(name)


@pytest.fixture
def pg_store_url(pg_url) -> str:
    """The URL of a new PostgreSQL store (``gpuperf migrate`` already run)."""
    gm.Store(pg_url).migrate()
    return pg_url


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request) -> str:
    return request.param


@pytest.fixture
def store_url(backend, tmp_path, request) -> str:
    """The location of a new store on each backend (a file path or a server URL)."""
    if backend == "sqlite":
        return str(tmp_path / "runs.sqlite")
    return request.getfixturevalue("pg_store_url")


# --------------------------------------------------------------------------- store tests
# Runs, fixtures and checks that several tests/test_store_*.py files share.

@pytest.fixture
def store(store_url: str) -> gm.Store:
    """A new store on each backend: an SQLite file, a PostgreSQL database."""
    return gm.Store(store_url)


@pytest.fixture
def file_store(tmp_path: Path) -> gm.Store:
    """A new SQLite store, for what only a file has (pragmas, permissions, file damage)."""
    return gm.Store(tmp_path / "runs.sqlite")


# --------------------------------------------------------------------------- GPU catalog
@pytest.fixture
def no_user_gpus():
    """No user GPUs (``catalog.add_gpus``) before or after the test: the catalog tests'
    ``pytestmark``."""
    from gpuperf_magics.hardware import catalog

    catalog.clear_user_gpus()
    yield
    catalog.clear_user_gpus()


# --------------------------------------------------------------------------- public datasets
@pytest.fixture
def fresh_datasets_cache(monkeypatch: pytest.MonkeyPatch):
    """The shared data folder as the data home and an empty table cache, before and after:
    the dataset tests' ``pytestmark``."""
    from gpuperf_magics import datasets

    monkeypatch.setenv(datasets.DATA_HOME_ENV, str(SHARED_DATA))
    datasets._load.cache_clear()
    yield
    datasets._load.cache_clear()


# --------------------------------------------------------------------------- what-if panel
@pytest.fixture(scope="module")
def mlp_runs_store(tmp_path_factory, profile_mlp):
    """A store of real profiled CPU runs of an MLP at batch sizes 8, 16 and 32, one per test
    module (the what-if panel's tests: widgets, panel controls, plot)."""
    path = tmp_path_factory.mktemp("widgets") / "runs.sqlite"
    profile_mlp(path, [8, 16, 32])
    return path


@pytest.fixture
def imported_t4_store(tmp_path):
    """A store of imported T4 measurements, which record no dataset size."""
    path = tmp_path / "imported.sqlite"
    gm.Store(path).import_table(per_step_times("resnet"), gpu="T4")
    return path


@pytest.fixture
def fresh_accelerate_state():
    """accelerate keeps one process-wide state; each Trainer/Accelerator of a test sets its
    own (the framework tests of capture: frameworks and stopping)."""
    pytest.importorskip("accelerate")
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    yield
    AcceleratorState._reset_state(True)
    GradientState._reset_state()
