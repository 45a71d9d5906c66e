"""Sphinx configuration of the gpuperf_magics documentation (``make docs``).

Sphinx, because the package's docstrings are numpydoc (numpydoc renders them as written) and
autodoc imports the package to read them, so the API reference cannot drift from the code;
MyST lets the pages stay Markdown like the README; myst-nb renders the tutorials from the
outputs saved in ``notebooks/`` (``nb_execution_mode = "off"``): the build runs no notebook, no
benchmark and no download. Warnings are errors (``-W --keep-going`` in the Makefile).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))  # document this checkout, not an installed copy

from gpuperf_magics import __version__  # noqa: E402

project = "gpuperf_magics"
author = "gpuperf_magics developers"
copyright = "gpuperf_magics developers, Apache-2.0"
version = release = __version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "myst_nb",
]

# The tutorials live in notebooks/ (where `make test` runs them); Sphinx reads only below
# docs/, so each build copies them into docs/tutorials/ (ignored by git), outputs as saved.
TUTORIALS = HERE / "tutorials"
for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
    target = TUTORIALS / notebook.name
    if not target.exists() or target.read_bytes() != notebook.read_bytes():
        shutil.copyfile(notebook, target)

nb_execution_mode = "off"
nb_output_stderr = "show"
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "figures", "**.ipynb_checkpoints"]

# autodoc: members in source order, no duplicate of a class's __init__ docstring.
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_typehints = "none"  # numpydoc's Parameters sections say the types
autosummary_generate = False
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()

html_theme = "alabaster"
html_title = f"gpuperf_magics {release}"
html_static_path: list[str] = []
