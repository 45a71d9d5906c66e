"""Tests of gpuperf_magics.store.paths: where the default store is, on each platform."""

from __future__ import annotations

from pathlib import Path

import pytest
from made_runs import make_run

from gpuperf_magics.store import Store, default_store_path, user_data_dir


def test_default_path_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GPUPERF_STORE", str(tmp_path / "team.sqlite"))
    assert default_store_path() == tmp_path / "team.sqlite"
    assert Store().path == tmp_path / "team.sqlite"


def test_default_path_per_platform(tmp_path: Path) -> None:
    home = tmp_path / "home"
    linux = default_store_path(platform="linux", environ={}, home=home)
    assert linux == home / ".local/share/gpuperf_magics/runs.sqlite"
    xdg = default_store_path(platform="linux", environ={"XDG_DATA_HOME": "/data/x"}, home=home)
    assert xdg == Path("/data/x/gpuperf_magics/runs.sqlite")
    # A relative XDG_DATA_HOME is ignored, as the XDG spec says.
    assert user_data_dir(platform="linux", environ={"XDG_DATA_HOME": "rel"}, home=home) == (
        home / ".local/share/gpuperf_magics"
    )
    mac = default_store_path(platform="darwin", environ={}, home=home)
    assert mac == home / "Library/Application Support/gpuperf_magics/runs.sqlite"
    win = user_data_dir(platform="win32", environ={"LOCALAPPDATA": str(tmp_path / "L")},
                        home=home)
    assert win == tmp_path / "L" / "gpuperf_magics"
    assert user_data_dir(platform="win32", environ={}, home=home) == (
        home / "AppData/Local/gpuperf_magics"
    )
    # An empty GPUPERF_STORE counts as unset.
    assert default_store_path(platform="linux", environ={"GPUPERF_STORE": " "}, home=home) == (
        linux
    )


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
