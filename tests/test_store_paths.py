"""Tests of gpuperf_magics.store.paths: where the default store is, on each platform."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from made_runs import make_run

from gpuperf_magics.store import Store, default_store_path, user_data_dir


def test_default_path_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GPUPERF_STORE", str(tmp_path / "team.sqlite"))
    assert default_store_path() == tmp_path / "team.sqlite"
    assert Store().path == tmp_path / "team.sqlite"


def test_default_path_per_platform(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The per-user folder is platformdirs' (XDG on Linux; its own rules elsewhere)."""
    import platformdirs

    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    expected = Path(platformdirs.user_data_dir("gpuperf_magics", appauthor=False))
    assert user_data_dir() == expected
    assert default_store_path(environ={}) == expected / "runs.sqlite"
    if sys.platform.startswith("linux"):
        assert expected == home / ".local/share/gpuperf_magics"
        monkeypatch.setenv("XDG_DATA_HOME", "/data/x")
        assert default_store_path(environ={}) == Path("/data/x/gpuperf_magics/runs.sqlite")
        # A relative XDG_DATA_HOME is ignored, as the XDG spec says.
        monkeypatch.setenv("XDG_DATA_HOME", "rel")
        assert user_data_dir() == home / ".local/share/gpuperf_magics"
    # An empty GPUPERF_STORE counts as unset.
    assert default_store_path(environ={"GPUPERF_STORE": " "}) == user_data_dir() / "runs.sqlite"


def test_default_store_created_on_first_write_never_in_cwd(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cwd = tmp_path / "notebooks"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("GPUPERF_STORE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    store = Store()
    expected = tmp_path / "xdg" / "gpuperf_magics" / "runs.sqlite"
    assert store.path == expected
    # Reading a store that does not exist yet creates nothing.
    assert store.runs().empty
    assert store.revision() == 0
    assert not (tmp_path / "xdg").exists()
    store.save_run(make_run())
    assert expected.is_file()
    assert list(cwd.iterdir()) == []
