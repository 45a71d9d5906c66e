"""Tests of gpuperf_magics.store.location: what a store path becomes."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuperf_magics.store import Store


def test_relative_path_is_made_absolute(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    store = Store("sub/runs.sqlite")
    assert store.path == tmp_path / "sub" / "runs.sqlite"
    assert repr(store) == f"Store({str(tmp_path / 'sub' / 'runs.sqlite')!r})"
    assert Store(store).path == store.path  # a Store is path-like


def test_memory_path_is_refused() -> None:
    with pytest.raises(ValueError, match="file path"):
        Store(":memory:")
