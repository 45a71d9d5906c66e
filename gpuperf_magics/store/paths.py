"""Where the store lives when no path is given: ``GPUPERF_STORE``, else a per-user data folder.

Never the current working directory: a notebook's folder is often a git checkout, and a
profiler must not drop files into it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

APP_NAME = "gpuperf_magics"
ENV_VAR = "GPUPERF_STORE"
FALLBACK_ENV_VAR = "GPUPERF_FALLBACK_STORE"
STORE_FILENAME = "runs.sqlite"
FALLBACK_FILENAME = "unsynced.sqlite"


def user_data_dir(
    *,
    platform: str | None = None,
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> Path:
    """The per-user data folder of the package (not created here).

    Parameters
    ----------
    platform : str, optional
        ``sys.platform`` value to resolve for; the running platform by default.
    environ : mapping, optional
        Environment to read ``XDG_DATA_HOME``/``LOCALAPPDATA`` from; ``os.environ`` by default.
    home : Path, optional
        The home folder; ``Path.home()`` by default.

    Returns
    -------
    Path
        Linux and other Unix: ``$XDG_DATA_HOME/gpuperf_magics`` (``~/.local/share`` when unset
        or not absolute, as the XDG spec says); macOS: ``~/Library/Application
        Support/gpuperf_magics``; Windows: ``%LOCALAPPDATA%\\gpuperf_magics``.
    """
    platform = sys.platform if platform is None else platform
    environ = os.environ if environ is None else environ
    home = Path.home() if home is None else home
    if platform.startswith("win"):
        local = environ.get("LOCALAPPDATA")
        base = Path(local) if local else home / "AppData" / "Local"
    elif platform == "darwin":
        base = home / "Library" / "Application Support"
    else:
        xdg = environ.get("XDG_DATA_HOME", "")
        # The XDG spec tells to ignore relative values.
        base = Path(xdg) if xdg and os.path.isabs(xdg) else home / ".local" / "share"
    return base / APP_NAME


def default_store_path(
    *,
    platform: str | None = None,
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> Path | str:
    """The store used when none is given.

    ``$GPUPERF_STORE`` when set and not empty (``~`` expanded; a ``postgresql://`` URL is
    returned as text), else ``user_data_dir() / "runs.sqlite"``. Nothing is created: the
    folder (readable by its owner only) and the file appear on the first write.

    Parameters
    ----------
    platform, environ, home
        As for :func:`user_data_dir` (for tests and tools resolving another platform).

    Returns
    -------
    Path or str
        An absolute path, unless ``GPUPERF_STORE`` holds a relative one or a URL.
    """
    from gpuperf_magics.store.location import is_url

    environ = os.environ if environ is None else environ
    explicit = environ.get(ENV_VAR, "").strip()
    if explicit:
        # A URL must not go through Path, which folds "//" into "/".
        return explicit if is_url(explicit) else Path(explicit).expanduser()
    return user_data_dir(platform=platform, environ=environ, home=home) / STORE_FILENAME


def fallback_store_path(environ: Mapping[str, str] | None = None) -> Path:
    """The local SQLite file that keeps runs a server store could not take.

    ``$GPUPERF_FALLBACK_STORE``, else ``unsynced.sqlite`` in the per-user data folder; push
    its runs later with ``gpuperf sync FILE URL``.
    """
    environ = os.environ if environ is None else environ
    explicit = environ.get(FALLBACK_ENV_VAR, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    return user_data_dir(environ=environ) / FALLBACK_FILENAME
