"""The tests mirror the modules: each ``tests/test_<name>.py`` tests one module of the package.

``test_store_paths.py`` tests ``gpuperf_magics/store/paths.py``; ``test_run.py`` tests
``gpuperf_magics/run.py``; ``test_hardware.py`` tests the package ``hardware/__init__.py``.
A file that tests how several modules work together is listed in ``WHOLE`` with its reason,
so a reader looking for a module's tests finds them in one place.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gpuperf_magics"

WHOLE = {
    "test_benchmarks": "the scripts in benchmarks/ run end to end",
    "test_browser": "JupyterLab and Chromium drive the what-if panel",
    "test_capture_frameworks": "unchanged loops of Lightning, Accelerate and HF Trainer",
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


def test_module_for_reads_folders_and_underscores():
    assert module_for("test_store_paths") == PACKAGE / "store" / "paths.py"
    assert module_for("test_store_model") == PACKAGE / "store_model.py"
    assert module_for("test_hardware_gpu_names") == PACKAGE / "hardware" / "gpu_names.py"
    assert module_for("test_hardware") == PACKAGE / "hardware" / "__init__.py"
    assert module_for("test_checks") == PACKAGE / "_checks.py"
    assert module_for("test_no_such_module") is None
