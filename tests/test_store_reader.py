"""Tests of gpuperf_magics.store.reader: opening a store for reading."""

from __future__ import annotations

from pathlib import Path

import pytest
from made_runs import make_run

from gpuperf_magics.store import Store, StoreError, StoreNotFoundError


def test_a_store_that_must_exist_names_a_missing_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    typo = tmp_path / "typo.sqlite"
    with pytest.raises(StoreNotFoundError, match=r"no store at .*typo\.sqlite: the file does "
                       r"not exist; check the path") as caught:
        Store(typo, must_exist=True)
    assert caught.value.path == str(typo) and isinstance(caught.value, StoreError)
    assert not typo.exists()
    monkeypatch.setenv("GPUPERF_STORE", str(typo))
    with pytest.raises(StoreNotFoundError, match=r"\(from \$GPUPERF_STORE\)"):
        Store(must_exist=True)
    monkeypatch.delenv("GPUPERF_STORE")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    with pytest.raises(StoreNotFoundError, match=r"\(the default store\).*nothing has been "
                       "profiled or imported"):
        Store(must_exist=True)
    assert not (tmp_path / "xdg").exists()
    # Once written, it opens; a Store of a Store was checked already.
    Store(typo).save_run(make_run())
    assert len(Store(Store(typo, must_exist=True)).runs()) == 1


def test_a_missing_store_names_another_in_the_words_of_the_python_api(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    typo = tmp_path / "typo.sqlite"
    with pytest.raises(StoreNotFoundError) as caught:
        Store(typo, must_exist=True)
    message = str(caught.value)
    assert message == (f"no store at {typo}: the file does not exist; check the path (a store "
                       "is created by the first run saved to it), or name another store with "
                       "Store(path).")
    assert caught.value.origin == "given"
    # The other interfaces are not offered to a Python caller.
    for elsewhere in ("--store", "%config", "GPUPERF_STORE"):
        assert elsewhere not in message
    # $GPUPERF_STORE and the default store keep saying where the path came from.
    monkeypatch.setenv("GPUPERF_STORE", str(typo))
    with pytest.raises(StoreNotFoundError) as caught:
        Store(must_exist=True)
    assert caught.value.origin == "env"
    assert str(caught.value).startswith(f"no store at {typo} (from $GPUPERF_STORE): ")
    assert str(caught.value).endswith("or name another store with Store(path).")


def test_a_missing_default_store_says_how_to_fill_it_in_each_interface_s_words(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("GPUPERF_STORE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    with pytest.raises(StoreNotFoundError) as caught:
        Store(must_exist=True)
    python = str(caught.value)
    assert "gm.profile_training" in python and "Store.import_table" in python
    assert "%%profile_training" not in python and "gpuperf import" not in python
    cli = str(caught.value.reworded("--store PATH"))
    assert "gpuperf import" in cli
    assert "profile_training" not in cli and "Store." not in cli
    magic = str(caught.value.reworded('--store PATH or %config GpuPerf.store = "PATH"'))
    assert "%%profile_training" in magic
    assert "gm." not in magic and "Store." not in magic and "gpuperf import" not in magic


def test_a_missing_store_is_reworded_for_another_interface(tmp_path: Path) -> None:
    typo = tmp_path / "typo.sqlite"
    with pytest.raises(StoreNotFoundError) as caught:
        Store(typo, must_exist=True)
    cli = caught.value.reworded("--store PATH")
    assert isinstance(cli, StoreNotFoundError) and cli.path == str(typo)
    assert cli.origin == "given"
    assert str(cli) == str(caught.value).replace("Store(path)", "--store PATH")
