"""Where the store lives when no path is given: ``GPUPERF_STORE``, else a per-user data folder.

Never the current working directory: a notebook's folder is often a git checkout, and a
profiler must not drop files into it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

APP_NAME = "gpuperf_magics"
ENV_VAR = "GPUPERF_STORE"
FALLBACK_ENV_VAR = "GPUPERF_FALLBACK_STORE"
STORE_FILENAME = "runs.sqlite"
FALLBACK_FILENAME = "unsynced.sqlite"


def user_data_dir() -> Path:
    """The per-user data folder of the package (not created here), as platformdirs says.

    Returns
    -------
    Path
        Linux and other Unix: ``$XDG_DATA_HOME/gpuperf_magics`` (``~/.local/share`` when unset
        or not absolute, as the XDG spec says); macOS: ``~/Library/Application
        Support/gpuperf_magics``; Windows: ``%LOCALAPPDATA%\\gpuperf_magics``. platformdirs
        keeps these rules for every platform (it is the library pip and Jupyter use), so
        the package does not.
    """
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def default_store_path(*, environ: Mapping[str, str] | None = None) -> Path | str:
    """The store used when none is given.

    ``$GPUPERF_STORE`` when set and not empty (``~`` expanded; a ``postgresql://`` URL or a
    libpq ``host=... dbname=...`` string is returned as text), else ``user_data_dir() /
    "runs.sqlite"``. Nothing is created: the folder (readable by its owner only) and the file
    appear on the first write.

    Parameters
    ----------
    environ : mapping, optional
        Where to read ``GPUPERF_STORE`` from; ``os.environ`` by default.

    Returns
    -------
    Path or str
        An absolute path, unless ``GPUPERF_STORE`` holds a relative one or a URL.
    """
    from gpuperf_magics.store.location import is_text_location

    environ = os.environ if environ is None else environ
    explicit = environ.get(ENV_VAR, "").strip()
    if explicit:
        # A URL or a libpq key=value string must not go through Path, which folds "//".
        return explicit if is_text_location(explicit) else Path(explicit).expanduser()
    return user_data_dir() / STORE_FILENAME


def fallback_store_path(environ: Mapping[str, str] | None = None) -> Path:
    """The local SQLite file that keeps runs a server store could not take.

    ``$GPUPERF_FALLBACK_STORE``, else ``unsynced.sqlite`` in the per-user data folder; push
    its runs later with ``gpuperf sync FILE URL``.
    """
    environ = os.environ if environ is None else environ
    explicit = environ.get(FALLBACK_ENV_VAR, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    return user_data_dir() / FALLBACK_FILENAME


def write_problem(path: Path) -> str | None:
    """Why a store file at ``path`` cannot be written, or None when it can (as far as can be
    told without writing: the first save creates a missing file and its folders).

    A read-only file, a read-only folder (SQLite writes its ``-wal`` and ``-shm`` files next
    to the store), or a path under a regular file, which no one can create.
    """
    if path.is_dir():
        return None  # the store says "a folder, not a store file" itself
    if path.exists():
        if not os.access(path, os.W_OK):
            return f"the file {path} is read-only"
        journal = [path.with_name(path.name + s) for s in ("-wal", "-shm")]
        if not all(os.access(j, os.W_OK) for j in journal) and not os.access(
                path.parent, os.W_OK | os.X_OK):
            return (f"its folder {path.parent} is read-only, and SQLite writes its journal "
                    "files next to the store")
        return None
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"{ancestor} is a file, not a folder, so nothing can be created under it"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"the folder {ancestor} is read-only, so the store cannot be created in it"
    return None
