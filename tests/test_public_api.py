"""The public API: the package root's ``__all__`` and the names each documented subpackage's
``__init__`` declares. Internal paths are free to move; these are what users import."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import gpuperf_magics as gm

#: The subpackages the README and the docs present, each documented by its ``__init__``.
SUBPACKAGES = ("architecture", "capture", "datasets", "hardware", "model", "prediction",
               "skins", "store")


@pytest.mark.parametrize("name", gm.__all__)
def test_every_root_name_resolves_to_where_it_is_defined(name: str) -> None:
    value = getattr(gm, name)
    assert value is not None
    module = gm._LAZY.get(name)
    if module is not None:  # a lazy name is the defining module's own object
        assert getattr(importlib.import_module(module), name) is value


def test_the_root_lists_no_name_it_cannot_give_and_gives_every_lazy_name() -> None:
    assert set(gm._LAZY) <= set(gm.__all__)
    assert sorted(gm.__all__) == gm.__all__  # one place to look a name up
    with pytest.raises(AttributeError, match="no attribute 'predict'"):
        gm.predict  # noqa: B018 - a module, not a public name: not at the root


def test_version_is_one_value() -> None:
    from gpuperf_magics._version import __version__

    assert gm.__version__ == __version__


def test_types_users_get_back_or_catch_import_from_the_root() -> None:
    from gpuperf_magics import (
        ImportValidationError,
        Job,
        Offers,
        Prediction,
        PredictionError,
        Remaining,
        RunNotFoundError,
        StoreError,
        UnknownGPUError,
        WhatIfPanel,
    )

    assert issubclass(PredictionError, ValueError) and issubclass(UnknownGPUError, ValueError)
    for cls in (ImportValidationError, Job, Offers, Prediction, Remaining, RunNotFoundError,
                StoreError, WhatIfPanel):
        assert cls.__doc__, cls


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_each_subpackage_declares_what_it_offers(package: str) -> None:
    """A subpackage's ``__all__`` resolves; one without (the prediction layer and the skins,
    whose public names are the root's) names in its docstring only modules that exist."""
    module = importlib.import_module(f"gpuperf_magics.{package}")
    assert module.__doc__, package
    for name in getattr(module, "__all__", []):
        assert getattr(module, name) is not None, f"{package}.{name}"
    folder = Path(module.__file__).parent
    for sub in re.findall(r":mod:`\.(\w+)`", module.__doc__):
        assert (folder / f"{sub}.py").is_file(), f"{package}'s docstring names .{sub}"


def test_the_magics_and_the_command_are_where_the_entry_points_say() -> None:
    import tomllib

    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    scripts = tomllib.loads(pyproject.read_text())["project"]["scripts"]
    for target in scripts.values():
        module, _, function = target.partition(":")
        assert callable(getattr(importlib.import_module(module), function)), target
    assert callable(gm.load_ipython_extension) and callable(gm.unload_ipython_extension)
