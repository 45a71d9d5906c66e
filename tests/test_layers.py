"""The layers as the README draws them: each imported alone, in a fresh process, pulls in none
of the modules above it.

Bottom to top: ``_version, columns, units, _checks, auto_stop`` → ``hardware/`` →
``architecture/`` → ``run`` → ``store/`` → ``model/`` → ``capture/`` → ``prediction/`` → ``skins/`` → the package
root, which imports nothing until a name is used.
Imports inside functions (``Run.save`` → store) are not checked here: they run at call time.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PACKAGE = "gpuperf_magics"
# Modules above the model and the store: what neither may import.
PREDICTION = ("prediction",)
SKINS = ("skins",)
# The prediction layer's answers: what the modules they build on may not import.
ANSWERS = ("prediction.predict", "prediction.offers", "prediction.remaining")
NOTEBOOK = ("IPython", "ipywidgets", "traitlets", "matplotlib")

# module → (our modules it may not import, third-party/stdlib modules it may not import).
# Ours are named without the package prefix; a name covers its submodules.
FORBIDDEN: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "": (("*",), ("torch", "pandas", "numpy", "sklearn", *NOTEBOOK)),
    "_version": (("*",), ("numpy", "pandas")),
    "columns": (("*",), ("numpy", "pandas")),
    "units": (("*",), ("numpy", "pandas")),
    "_checks": (("*",), ("numpy", "pandas")),
    "auto_stop": (("*",), ("numpy", "pandas")),
    "hardware": (("store", "model", "run", "architecture", "capture", *PREDICTION, *SKINS),
                 ("torch", "pynvml", "pandas", *NOTEBOOK)),
    "hardware.catalog": (("store", "model", "run", "capture", *PREDICTION, *SKINS),
                         ("torch", "pynvml", *NOTEBOOK)),
    "hardware.prices": (("store", "model", "run", "capture", *PREDICTION, *SKINS),
                        ("torch", "pynvml", *NOTEBOOK)),
    "architecture": (("store", "model", "run", "capture", "datasets", *PREDICTION, *SKINS),
                     NOTEBOOK),
    "run": (("store", "model", "capture", "hardware", "architecture", "datasets",
             *PREDICTION, *SKINS), ("torch", "pandas", "numpy", *NOTEBOOK)),
    "store": (("model", "capture", "architecture", "datasets", *PREDICTION, *SKINS),
              ("torch", "sklearn", *NOTEBOOK)),
    "store.frame": (("model", "capture", "datasets", *PREDICTION, *SKINS),
                    ("torch", "sklearn", *NOTEBOOK)),
    "store.importer": (("model", "capture", "datasets", *PREDICTION, *SKINS),
                       ("torch", "sklearn", *NOTEBOOK)),
    # The model learns from tables: no storage, no capture, no download, no notebook.
    "model": (("store", "run", "capture", "architecture", "datasets", *PREDICTION, *SKINS),
              ("torch", "psycopg", "urllib.request", "http.client", *NOTEBOOK)),
    # A worker process that validates networks imports what validation needs, not
    # scikit-learn (the public estimator's base class): it starts 1.5 s sooner.
    "model.parallel": (("store", "run", "capture", "architecture", "datasets",
                        "model.training_time", "model.evaluation", *PREDICTION, *SKINS),
                       ("torch", "sklearn", *NOTEBOOK)),
    "capture": (("store", "model", "datasets", *PREDICTION, *SKINS), ("pandas", *NOTEBOOK)),
    # The live line draws with tqdm, imported when a line is first drawn.
    "capture.progress": (("store", "model", "datasets", *PREDICTION, *SKINS),
                         ("pandas", "tqdm", *NOTEBOOK)),
    # The prediction layer's own modules: what predict builds on imports neither predict nor
    # anything above it, nor pandas before a prediction is asked for.
    "prediction.store_model": (("datasets", *ANSWERS, *SKINS), ("torch", "pandas", *NOTEBOOK)),
    "prediction.display": (("datasets", *ANSWERS, *SKINS), ("torch", "pandas", *NOTEBOOK)),
    "prediction.options": (("datasets", "store", "model", *ANSWERS, *SKINS),
                           ("torch", "pandas", *NOTEBOOK)),
    # What to profile next: asked by the answers' skins, built on the fitted store model.
    "prediction.suggestions": (("datasets", *ANSWERS, *SKINS), ("torch", "pandas", *NOTEBOOK)),
    # The job, the prediction's record and the live prior: what the answers build on, light
    # enough for a magic to parse a line (the model's coverage is read when it is needed).
    "prediction.job": (("datasets", "store", "model", *ANSWERS, *SKINS),
                       ("torch", "pandas", *NOTEBOOK)),
    "prediction.record": (("datasets", "store", "model", *ANSWERS, *SKINS),
                          ("torch", "pandas", *NOTEBOOK)),
    "prediction.live": (("datasets", "store", "model", "capture", *ANSWERS, *SKINS),
                        ("torch", "pandas", *NOTEBOOK)),
    "prediction.predict": (("datasets", *SKINS), ("torch", *NOTEBOOK)),
    "prediction.offers": (("datasets", *SKINS), ("torch", *NOTEBOOK)),
    "prediction.remaining": (("datasets", *SKINS), ("torch", *NOTEBOOK)),
    "datasets": (("store", "model", "capture", *PREDICTION, *SKINS), ("torch", *NOTEBOOK)),
    "skins.widgets": (("skins.magics", "skins.cli"), ("torch", "IPython")),
    # The panel's controls: ipywidgets is imported when a panel is built, not on import.
    "skins.panel_controls": (("store", "model", "skins.magics", "skins.cli", "skins.widgets",
                              *PREDICTION),
                       ("torch", "pandas", *NOTEBOOK)),
    # The panel's figure: matplotlib is imported when a figure is drawn, not on import.
    "skins.plot": (("store", "model", "skins.magics", "skins.cli", "skins.widgets", *PREDICTION),
             ("torch", "pandas", *NOTEBOOK)),
    "skins.cli": (("skins.magics", "skins.widgets"), ("torch", *NOTEBOOK)),
    "skins.magics": (("model", "capture", "skins.widgets", "skins.cli", *ANSWERS),
                     ("torch", "pandas")),
}

_CODE = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(sys.modules)))
"""


def _imported(module: str) -> list[str]:
    """Every module a fresh interpreter holds after importing ``module`` alone."""
    out = subprocess.run([sys.executable, "-c", _CODE, module], capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize("layer", list(FORBIDDEN), ids=lambda layer: layer or "root")
def test_layer_imports_nothing_above_it(layer: str) -> None:
    ours, others = FORBIDDEN[layer]
    module = f"{PACKAGE}.{layer}" if layer else PACKAGE
    imported = _imported(module)
    own = [m.removeprefix(PACKAGE + ".") for m in imported if m.startswith(PACKAGE + ".")]
    if ours == ("*",):
        # Nothing but itself and the version, which the package root reads.
        bad = [m for m in own if m not in (layer, "_version")]
    else:
        bad = [m for m in own if _under(m, ours)]
    bad += [m for m in imported if _under(m, others)]
    assert not bad, f"importing {module} imports {sorted(set(bad))}"


def test_every_layer_named_is_a_module() -> None:
    import importlib.util

    for layer in FORBIDDEN:
        name = f"{PACKAGE}.{layer}" if layer else PACKAGE
        assert importlib.util.find_spec(name) is not None, name
