"""What a store argument names: an SQLite file or a PostgreSQL server, and how to show it.

``postgresql://user@host:5432/db?sslmode=require`` (or ``postgres://``) is a server store; any
other ``scheme://`` is refused, so that a URL is never taken for a file path (which used to
create folders named ``postgresql:/alice:pw@host`` in the working directory). ``sqlite:///path``
names a file explicitly. A libpq ``key=value`` string (``host=db dbname=team user=ann``) is a
server store too, never a file named with its password.

Passwords never leave this module unmasked except towards libpq: :func:`mask` is what
messages, ``repr`` and run records show. They are found as libpq finds them, by psycopg's own
parser of connection strings, since libpq takes a URL's password up to the first ``@``,
``#`` and ``?`` included, where ``urlsplit`` would end the authority.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
_POSTGRES = ("postgresql", "postgres")
#: libpq's keywords whose values are secrets (PostgreSQL 18 adds the last three).
_SECRET_KEYS = frozenset({"password", "sslpassword", "scram_client_key", "scram_server_key",
                          "oauth_client_secret"})
#: libpq's connection keywords (PostgreSQL 18): a text starting with one of them and ``=`` is
#: a ``key=value`` connection string, never a file name.
_LIBPQ_KEYWORDS = frozenset((
    "host", "hostaddr", "port", "dbname", "user", "password", "passfile", "channel_binding",
    "connect_timeout", "client_encoding", "options", "application_name",
    "fallback_application_name", "keepalives", "keepalives_idle", "keepalives_interval",
    "keepalives_count", "tcp_user_timeout", "replication", "gssencmode", "sslmode",
    "sslnegotiation", "sslcompression", "sslcert", "sslkey", "sslpassword", "sslcertmode",
    "sslrootcert", "sslcrl", "sslcrldir", "sslsni", "requirepeer", "require_auth",
    "ssl_min_protocol_version", "ssl_max_protocol_version", "min_protocol_version",
    "max_protocol_version", "krbsrvname", "gsslib", "gssdelegation", "service",
    "target_session_attrs", "load_balance_hosts", "scram_client_key", "scram_server_key",
    "oauth_issuer", "oauth_client_id", "oauth_client_secret", "oauth_scope", "requiressl",
))
_PAIR = re.compile(r"(?:^|\s)([A-Za-z_]+)\s*=")
MASK = "***"
_KEY = re.compile(r"([^=\s]*)\s*=\s*")


def is_url(text: str) -> bool:
    """``scheme://...``: a URL, never a file name (Windows ``C:\\`` paths have no ``//``)."""
    return bool(_URL.match(text))


def is_conninfo(text: str) -> bool:
    """A libpq ``key=value`` connection string (``host=db dbname=team user=ann``).

    It starts with ``word=``, and a word of it is one of libpq's keywords: ``hots=db
    password=x`` is one (that libpq refuses, naming ``hots``), so that a mistyped keyword
    never becomes a file named with the password; ``lr=0.1.sqlite`` is a file. So is a name
    that :func:`names_a_file` (``user=ann.sqlite``, or any path that exists).
    """
    words = _PAIR.findall(text)
    return bool(re.match(r"\s*[A-Za-z_]+\s*=", text)) and any(
        w in _LIBPQ_KEYWORDS for w in words) and not names_a_file(text)


#: Ends of a file name that make one ``key=value`` word an SQLite file, not a server.
FILE_SUFFIXES = (".sqlite", ".sqlite3", ".db")


def names_a_file(text: str) -> bool:
    """``text``, shaped like a libpq string, is an SQLite file all the same.

    A path that exists is the file it names. Otherwise one ``key=value`` word ending in
    :data:`FILE_SUFFIXES` (``user=ann.sqlite``: a file named after its owner) is a file,
    unless its key is a password's (``password=x.db`` stays a server string, so that no
    file is ever named with a password); two or more words (``host=db dbname=a.db``) are a
    server string.
    """
    try:
        if os.path.exists(os.path.expanduser(text)):
            return True
    except (OSError, ValueError):  # a name the OS cannot even look up (NUL, too long)
        return False
    spans = _kv_spans(text.strip())
    return (len(spans) == 1 and spans[0][3] == len(text.strip())
            and spans[0][0] not in _SECRET_KEYS and text.strip().lower().endswith(FILE_SUFFIXES))


def is_text_location(text: str) -> bool:
    """A URL or a connection string: kept as text, never folded by ``Path`` (``//``)."""
    return is_url(text) or is_conninfo(text)


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
    """The store text (URL or libpq ``key=value`` string) with every password shown as ``***``.

    The password is found as libpq finds it (:func:`libpq_fields`): in a URL it runs from the
    first ``:`` of the user part to the first ``@`` and may hold ``#`` and ``?`` unencoded
    (which ``urlsplit`` takes for the end of the authority, showing the rest in clear).
    """
    return _masked(url, _secrets(url))


def _masked(text: str, secrets: tuple[str, ...]) -> str:
    spans = [(key, value, start, end) for key, value, start, end in conninfo_spans(text)
             if key in _SECRET_KEYS]
    for _key, _value, start, end in sorted(spans, key=lambda s: s[2], reverse=True):
        if end > start:
            text = text[:start] + MASK + text[end:]
    # A password libpq reads that the spans missed (a grammar libpq alone knows) is scrubbed
    # wherever it appears; the ones masked above are not, so that ``a`` leaves ``alice`` be.
    covered = {form for _k, value, _s, _e in spans for form in (value, quote(value, safe=""))}
    return redact(text, tuple(s for s in secrets if s not in covered and s != MASK))


def _secrets(text: str) -> tuple[str, ...]:
    """Every form in which a password of ``text`` may be shown: raw, decoded, re-quoted."""
    try:
        found = [value for key, value in libpq_fields(text).items() if key in _SECRET_KEYS]
    except ValueError:  # refused by libpq: what its grammar would read as passwords
        found = []
    for key, value, start, end in conninfo_spans(text):
        if key in _SECRET_KEYS and value:
            found += [text[start:end], value]
    found += [quote(s, safe="") for s in list(found)]
    return tuple(sorted({s for s in found if s}, key=len, reverse=True))


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every secret replaced by ``***`` (a driver may quote the conninfo)."""
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


def libpq_fields(text: str) -> dict[str, str]:
    """The connection parameters libpq reads from a URL or ``key=value`` string.

    Through psycopg's own parser (``psycopg.conninfo.conninfo_to_dict``, i.e. libpq's
    ``PQconninfoParse``), so that what is masked is what the server receives; without
    psycopg, through :func:`conninfo_spans`, which follows libpq's grammar.

    Raises
    ------
    ValueError
        libpq refuses the string (its message, not yet masked: see :func:`redact`).
    """
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:  # no driver (or no libpq): libpq's grammar, as followed here
        return {key: value for key, value, _start, _end in conninfo_spans(text)}
    try:
        return {key: str(value) for key, value in conninfo_to_dict(text).items()}
    except psycopg.Error as exc:
        raise ValueError(" ".join(str(exc).split())) from None


def conninfo_spans(text: str) -> list[tuple[str, str, int, int]]:
    """``(keyword, value, start, end)`` of each parameter of ``text`` as libpq splits it.

    ``text[start:end]`` is the value as written (quoted or percent-encoded), ``value`` as
    libpq reads it. A URL's user part ends at the first ``@`` or ``/`` and its password at
    the first ``@`` (``#`` and ``?`` belong to it); its query starts at the next ``?``. A
    ``key=value`` string follows libpq's quoting (``'...'``, backslash escapes). Stops at
    the first malformed parameter rather than raising.
    """
    return _url_spans(text) if is_url(text) else _kv_spans(text)


def _url_spans(text: str) -> list[tuple[str, str, int, int]]:
    spans = []
    head = text.index("://") + 3
    start = head
    end = min((i for i in (text.find("@", head), text.find("/", head)) if i >= 0),
              default=-1)
    if end >= 0 and text[end] == "@":
        colon = text.find(":", head, end)
        user_end = end if colon < 0 else colon
        spans.append(("user", unquote(text[head:user_end]), head, user_end))
        if colon >= 0:
            spans.append(("password", unquote(text[colon + 1:end]), colon + 1, end))
        start = end + 1
    query = text.find("?", start)
    if query >= 0:
        pos = query + 1
        for part in text[query + 1:].split("&"):
            key, sep, value = part.partition("=")
            if sep:
                spans.append((unquote(key), unquote(value), pos + len(key) + 1,
                              pos + len(part)))
            pos += len(part) + 1
    return spans


def _kv_spans(text: str) -> list[tuple[str, str, int, int]]:
    spans: list[tuple[str, str, int, int]] = []
    pos, size = 0, len(text)
    while True:
        while pos < size and text[pos].isspace():
            pos += 1
        match = _KEY.match(text, pos)
        if pos >= size or match is None:
            return spans
        key, pos = match.group(1), match.end()
        start, quoted, value = pos, text.startswith("'", pos), []
        pos += quoted
        while pos < size and (quoted or not text[pos].isspace()):
            if text[pos] == "\\" and pos + 1 < size:
                pos += 1
            elif quoted and text[pos] == "'":
                pos += 1
                break
            value.append(text[pos])
            pos += 1
        spans.append((key, "".join(value), start, pos))


def parse_location(text: str) -> Location:
    """The store named by ``text``: a path, ``sqlite:///path``, a PostgreSQL URL or a libpq
    ``key=value`` connection string.

    Raises
    ------
    ValueError
        An empty name, ``:memory:``, an SQLite ``file:`` URI, a URL of another scheme, or a
        connection string libpq refuses (the message masks its passwords).
    """
    if text in ("", ":memory:") or text.startswith("file:"):
        raise ValueError(
            f"Store needs a file path or a postgresql:// URL, not {text!r}: the store is shared "
            "between processes, so it cannot live in memory; use e.g. tmp_path / 'runs.sqlite'"
        )
    if is_conninfo(text):
        return _server(text)
    if is_url(text):
        scheme = text.split("://", 1)[0].lower()
        if scheme in _POSTGRES or scheme.startswith("postgresql+"):
            return _server("postgresql://" + text.split("://", 1)[1])
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


def _server(conninfo: str) -> Location:
    """A server store, checked by libpq's parser now rather than at the first connection."""
    secrets = _secrets(conninfo)
    display = _masked(conninfo, secrets)
    try:
        libpq_fields(conninfo)
    except ValueError as exc:
        raise ValueError(
            f"libpq cannot read the store location {display!r}: {redact(str(exc), secrets)}. "
            "Write it as postgresql://user@host:5432/dbname or as host=... dbname=... user=... "
            "(https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-CONNSTRING), "
            "and keep the password in ~/.pgpass or PGPASSWORD rather than in it."
        ) from None
    return Location("postgresql", url=conninfo, display=display, secrets=secrets)


def _file(text: str) -> Location:
    # Absolute now, so that a notebook's %cd does not move the store.
    path = Path(os.path.abspath(os.path.expanduser(text)))
    return Location("sqlite", path=path, display=str(path))


def shell_quote(text: str) -> str:
    """``text`` in single quotes for a POSIX shell, a quote inside it closed, escaped and
    reopened: a store shown in a command to copy (``gpuperf sync``, ``gpuperf migrate``) may
    hold spaces and quotes (a libpq ``options='-c x'``) that would break it unquoted."""
    return "'" + text.replace("'", "'\"'\"'") + "'"
