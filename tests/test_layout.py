"""The tests mirror the modules: each ``tests/test_<name>.py`` tests one module of the package.

``test_store_paths.py`` tests ``gpuperf_magics/store/paths.py``; ``test_run.py`` tests
``gpuperf_magics/run.py``; ``test_hardware.py`` tests the package ``hardware/__init__.py``.
A file that tests how several modules work together is listed in ``WHOLE`` with its reason,
so a reader looking for a module's tests finds them in one place.

A test file holds tests, not a library for other files: what several files share lives in a
helper module not named ``test_*`` (``tiny_models.py``, ``fake_nvml.py``, ...) or, for a
fixture, in ``conftest.py``; no file under tests/ imports a ``test_*`` module.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gpuperf_magics"

WHOLE = {
    "test_benchmarks": "the scripts in benchmarks/ run end to end",
    "test_browser": "JupyterLab and Chromium drive the what-if panel",
    "test_capture_frameworks": "unchanged loops of Lightning, Accelerate and HF Trainer",
    "test_docs": "the README and the documentation pages: short, linked, figures with a source",
    "test_import_graph": "no module imports up the README's layer order",
    "test_layers": "each layer imports alone in a fresh process",
    "test_layout": "this file",
    "test_notebooks": "the tutorials run under nbval",
    "test_public_api": "every documented import path resolves",
}


def module_for(stem: str) -> Path | None:
    """The module a test file is named for, trying each split of its name into folders."""
    parts = stem.removeprefix("test_").split("_")

    def candidates(prefix: Path, rest: list[str]):
        if not rest:
            return
        name = "_".join(rest)
        yield prefix / f"{name}.py"
        yield prefix / f"_{name}.py"  # a private module: test_checks.py tests _checks.py
        yield prefix / name / "__init__.py"
        for i in range(1, len(rest)):
            folder = "_".join(rest[:i])
            if (prefix / folder).is_dir():
                yield from candidates(prefix / folder, rest[i:])

    for path in candidates(PACKAGE, parts):
        if path.is_file():
            return path
    return None


def test_every_test_file_is_named_for_a_module():
    stray = []
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        if path.stem not in WHOLE and module_for(path.stem) is None:
            stray.append(path.name)
    assert not stray, (f"{stray}: name each test file for the module it tests "
                       "(tests/test_<package>_<module>.py), or list it in WHOLE with a reason")


def test_whole_lists_only_files_that_exist():
    tests = {p.stem for p in (ROOT / "tests").glob("test_*.py")}
    assert set(WHOLE) <= tests, set(WHOLE) - tests


def imported_modules(source: str) -> list[str]:
    """The modules a file's source imports, anywhere in it (functions too), in order."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return names


def imported_test_modules(source: str) -> list[str]:
    """The ``test_*`` modules, and ``conftest``, that a file's source imports."""
    return [n for n in imported_modules(source)
            if n.split(".")[0].startswith("test_") or n.split(".")[0] == "conftest"]


def test_no_file_imports_a_test_module():
    coupled = {}
    for path in sorted((ROOT / "tests").glob("*.py")):
        imported = imported_test_modules(path.read_text(encoding="utf-8"))
        if imported:
            coupled[path.name] = imported
    assert not coupled, (f"{coupled}: a test file is not a library; move what several files "
                         "share into a helper module not named test_* (or a fixture into "
                         "conftest.py, which pytest loads itself and no file imports)")


def test_imported_test_modules_sees_every_form_of_import():
    # Spelled with T_ so that a grep for imports of test modules finds none in this file.
    source = ("import T_a\nimport os, T_b.c\nfrom T_d import x\n"
              "def f():\n    from T_f import y\nfrom tiny_models import mlp\n"
              "from conftest import z\n").replace("T_", "test_")
    assert sorted(imported_test_modules(source)) == ["conftest", "test_a", "test_b.c", "test_d",
                                                     "test_f"]


def test_every_helper_module_is_shared():
    """A helper module under tests/ holds what several files use; one file's helpers stay in it."""
    files = sorted((ROOT / "tests").glob("*.py"))
    helpers = {p.stem for p in files if not p.stem.startswith("test_") and p.stem != "conftest"}
    users: dict[str, set[str]] = {h: set() for h in helpers}
    for path in [*files, *sorted((ROOT / "benchmarks").glob("*.py"))]:  # store_scale: pgcluster
        for name in imported_modules(path.read_text(encoding="utf-8")):
            if name.split(".")[0] in helpers:
                users[name.split(".")[0]].add(path.name)
    lonely = {h: sorted(u) for h, u in users.items() if len(u) < 2}
    assert not lonely, (f"{lonely}: a helper module used by one file at most; move its helpers "
                        "into that file")


def test_module_for_reads_folders_and_underscores():
    assert module_for("test_store_paths") == PACKAGE / "store" / "paths.py"
    assert module_for("test_prediction_store_model") == PACKAGE / "prediction" / "store_model.py"
    assert module_for("test_hardware_gpu_names") == PACKAGE / "hardware" / "gpu_names.py"
    assert module_for("test_hardware") == PACKAGE / "hardware" / "__init__.py"
    assert module_for("test_checks") == PACKAGE / "_checks.py"
    assert module_for("test_no_such_module") is None
