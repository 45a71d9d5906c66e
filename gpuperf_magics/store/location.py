"""What a store argument names: an SQLite file or a PostgreSQL server, and how to show it.

``postgresql://user@host:5432/db?sslmode=require`` (or ``postgres://``) is a server store; any
other ``scheme://`` is refused, so that a URL is never taken for a file path (which used to
create folders named ``postgresql:/alice:pw@host`` in the working directory). ``sqlite:///path``
names a file explicitly. Passwords never leave this module unmasked except towards libpq:
:func:`mask` is what messages, ``repr`` and run records show.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
_POSTGRES = ("postgresql", "postgres")
_SECRET_KEYS = ("password", "sslpassword")
MASK = "***"


def is_url(text: str) -> bool:
    """``scheme://...``: a URL, never a file name (Windows ``C:\\`` paths have no ``//``)."""
    return bool(_URL.match(text))


@dataclass(frozen=True)
class Location:
    """Where a store lives.

    Attributes
    ----------
    kind : {"sqlite", "postgresql"}
    path : Path or None
        The SQLite file (absolute).
    url : str
        The server URL as given (password included: only for the driver).
    display : str
        What messages show: the file path, or the URL with any password masked.
    secrets : tuple of str
        Passwords found in the URL, scrubbed from any text shown (:func:`redact`).
    """

    kind: str
    path: Path | None = None
    url: str = field(default="", repr=False)
    display: str = ""
    secrets: tuple[str, ...] = field(default=(), repr=False)


def mask(url: str) -> str:
    """The URL with its password (in the authority or the query) replaced by ``***``."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user, sep, _password = userinfo.partition(":")
        netloc = f"{user}{':' + MASK if sep else ''}@{hostport}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, MASK if k.lower() in _SECRET_KEYS else v) for k, v in pairs],
                          safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _secrets(url: str) -> tuple[str, ...]:
    parts = urlsplit(url)
    found = []
    if "@" in parts.netloc:
        userinfo = parts.netloc.rpartition("@")[0]
        if ":" in userinfo:
            raw = userinfo.partition(":")[2]
            found += [raw, unquote(raw), quote(unquote(raw), safe="")]
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key.lower() in _SECRET_KEYS:
            found += [value, quote(value, safe="")]
    return tuple(sorted({s for s in found if s}, key=len, reverse=True))


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every secret replaced by ``***`` (a driver may quote the conninfo)."""
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


def parse_location(text: str) -> Location:
    """The store named by ``text`` (a path, ``sqlite:///path`` or a PostgreSQL URL).

    Raises
    ------
    ValueError
        An empty name, ``:memory:``, an SQLite ``file:`` URI, or a URL of another scheme.
    """
    if text in ("", ":memory:") or text.startswith("file:"):
        raise ValueError(
            f"Store needs a file path or a postgresql:// URL, not {text!r}: the store is shared "
            "between processes, so it cannot live in memory; use e.g. tmp_path / 'runs.sqlite'"
        )
    if is_url(text):
        scheme = text.split("://", 1)[0].lower()
        if scheme in _POSTGRES or scheme.startswith("postgresql+"):
            url = "postgresql://" + text.split("://", 1)[1]
            return Location("postgresql", url=url, display=mask(url), secrets=_secrets(url))
        if scheme == "sqlite":
            rest = text.split("://", 1)[1]
            if not rest.startswith("/") or rest == "/":
                raise ValueError(f"sqlite URLs name a file as sqlite:///absolute/path, not "
                                 f"{mask(text)!r}")
            path = Path(rest[1:] if rest.startswith("//") else rest)
            return _file(os.fspath(path))
        raise ValueError(
            f"unknown store URL {mask(text)!r}: a store is a file path, sqlite:///path, or "
            "postgresql://user@host:5432/dbname (needs pip install 'gpuperf-magics[postgres]')"
        )
    return _file(text)


def _file(text: str) -> Location:
    # Absolute now, so that a notebook's %cd does not move the store.
    path = Path(os.path.abspath(os.path.expanduser(text)))
    return Location("sqlite", path=path, display=str(path))
