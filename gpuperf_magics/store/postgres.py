"""A store on a PostgreSQL server: connecting, the schema check, migrations, error messages.

The driver is psycopg 3 (``pip install 'gpuperf-magics[postgres]'``), imported only when a
``postgresql://`` store is used. Credentials are libpq's business: the URL, ``PGPASSWORD``,
``~/.pgpass``, ``PGSERVICE``; nothing here writes them anywhere, and every message is passed
through :func:`~gpuperf_magics.store.location.redact`.

Unlike an SQLite file, a server store never migrates itself: ``gpuperf migrate URL``
(:func:`migrate`) does it once, for everybody, so that a teammate on an older package is told
to upgrade rather than finding the tables changed under them.
"""

from __future__ import annotations

import math
import re
from typing import Any

from gpuperf_magics.store import schema
from gpuperf_magics.store.errors import ANOTHER_STORE, StoreError, StoreVersionError
from gpuperf_magics.store.location import Location, redact, shell_quote

#: pg_advisory_xact_lock key serialising concurrent ``gpuperf migrate`` runs ("gpmg").
_MIGRATION_LOCK = schema.APPLICATION_ID


def _driver() -> Any:
    try:
        import psycopg
    except ImportError:
        raise StoreError(
            "a postgresql:// store needs the psycopg driver: pip install "
            "'gpuperf-magics[postgres]' (or pip install 'psycopg[binary]')"
        ) from None
    return psycopg


def engine(location: Location, connect_timeout: int) -> Any:
    """The SQLAlchemy engine of a server store (one per URL and connect timeout in a process;
    no pool: a connection per operation, as a notebook may sit idle for hours)."""
    key = (location.url, connect_timeout)
    found = _ENGINES.get(key)
    if found is not None:
        return found
    psycopg = _driver()
    import sqlalchemy as sa
    from sqlalchemy.pool import NullPool

    def connect() -> Any:
        # libpq reads the URL itself (hosts, sslmode, service files, ~/.pgpass), as before.
        return psycopg.connect(location.url, connect_timeout=connect_timeout,
                               application_name="gpuperf_magics")

    made = _ENGINES[key] = sa.create_engine("postgresql+psycopg://", creator=connect,
                                            poolclass=NullPool)
    return made


_ENGINES: dict[tuple[str, int], Any] = {}


def connect_timeout(timeout: float) -> int:
    """libpq waits at least 2 s; a server silent for 10 s is unreachable for a cell about to
    train, whatever the lock timeout."""
    return max(2, min(math.ceil(timeout), 10))


def connect(location: Location, timeout: float) -> Any:
    """An SQLAlchemy connection to the server (no transaction open yet)."""
    return engine(location, connect_timeout(timeout)).connect()


def _inspect(conn: Any) -> tuple[set[str], dict[str, str]]:
    import sqlalchemy as sa

    info = sa.table("tables", sa.column("table_name"), sa.column("table_schema"),
                    schema="information_schema")
    tables = set(conn.execute(
        sa.select(info.c.table_name).where(info.c.table_schema == sa.func.current_schema(),
                                           info.c.table_name.in_(schema.REQUIRED_TABLES))
    ).scalars())
    meta: dict[str, str] = {}
    if "meta" in tables:
        from gpuperf_magics.store.tables import meta as meta_table

        meta = {str(k): str(v) for k, v in conn.execute(
            sa.select(meta_table.c.key, meta_table.c.value))}
    return tables, meta


def _version(location: Location, tables: set[str], meta: dict[str, str]) -> int:
    shown = location.display
    if not tables:
        return 0
    if "meta" not in tables or meta.get("application") != schema.APPLICATION:
        raise StoreError(
            f"the database {shown} holds tables named like a gpuperf_magics store's "
            f"({', '.join(sorted(tables))}) that are not one; they were left untouched. Use "
            "another database or schema (e.g. ?options=-csearch_path%3Dgpuperf in the URL), or "
            f"{ANOTHER_STORE}.",
            path=shown,
        )
    text = meta.get("schema_version")
    if text is None or not re.fullmatch(r"-?[0-9]+", text):
        raise _damaged(shown, f"its schema_version in table meta is {text!r}, not a version "
                       "number")
    version = int(text)
    if version < 0:
        raise _damaged(shown, f"its schema version is {version}, which no store has")
    if version == 0:
        raise _damaged(shown, "its schema version was reset to 0 although it holds tables "
                       f"({', '.join(sorted(tables))})")
    return version


def _damaged(shown: str, what: str) -> StoreError:
    """The error for a server store whose tables or meta rows were tampered with: what a
    damaged SQLite file says, for a database its administrator restores."""
    return StoreError(
        f"the store {shown} is damaged: {what}. Nothing was changed. Ask its administrator to "
        "restore it from a backup, or sync a local copy into a new database (gpuperf sync "
        f"LOCAL URL); or {ANOTHER_STORE}.",
        path=shown,
    )


def ensure_schema(conn: Any, location: Location) -> None:
    """Check that the database holds a store of this version; never changes anything.

    Raises
    ------
    StoreError
        No store yet, or an older one (run ``gpuperf migrate URL``), or a damaged one.
    StoreVersionError
        A store of a newer gpuperf-magics.
    """
    shown = location.display
    tables, meta = _inspect(conn)
    version = _version(location, tables, meta)
    latest = schema.LATEST_VERSION
    if version == 0:
        raise StoreError(
            f"the database {shown} holds no gpuperf_magics store yet: create it once with "
            f"`gpuperf migrate {shell_quote(shown)}` (as a role that may create tables), or "
            f"{ANOTHER_STORE}.",
            path=shown,
        )
    if version > latest:
        raise StoreVersionError(
            f"the store {shown} was written by a newer gpuperf-magics (schema version "
            f"{version}; this version reads up to {latest}). Upgrade the package: "
            f"pip install -U gpuperf-magics (or {ANOTHER_STORE}).",
            path=shown,
        )
    if version < latest:
        raise StoreError(
            f"the store {shown} has an older schema (version {version}; this gpuperf-magics "
            f"uses {latest}). A server store is upgraded only on purpose, for everybody: run "
            f"`gpuperf migrate {shell_quote(shown)}` once (teammates then need this version too), "
            f"or keep using the older gpuperf-magics.",
            path=shown,
        )
    missing = [t for t in schema.REQUIRED_TABLES if t not in tables]
    if missing or "revision" not in meta:
        raise _damaged(shown, f"table(s) {', '.join(missing)} missing" if missing
                       else "the revision row of table meta is missing")


def migrate(location: Location, timeout: float = 30.0) -> schema.Migrated:
    """Create or upgrade the store's tables on the server; the versions before and after.

    Concurrent calls are serialised by an advisory lock, so two administrators running it at
    once do not collide; a store already at the latest version is left as it is (and Alembic
    is not even imported then).
    """
    import sqlalchemy as sa

    try:
        conn = connect(location, timeout)
    except driver_errors() as exc:
        raise translate(exc, location, "connect", timeout) from None
    try:
        with conn.begin():
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_MIGRATION_LOCK)))
            tables, meta = _inspect(conn)
            before = _version(location, tables, meta)
            if before > schema.LATEST_VERSION:
                ensure_schema(conn, location)  # raises the "newer version" error
            after = before
            if before < schema.LATEST_VERSION:
                after = _upgrade(conn, location, before)
    except driver_errors() as exc:
        raise translate(exc, location, "migrate the store", timeout) from None
    finally:
        conn.close()
    return schema.Migrated(before, after)


#: SQLSTATEs of a migration step that finds what it adds already there: duplicate column,
#: table, object (an index).
_ALREADY_THERE = ("42701", "42P07", "42710")


def _upgrade(conn: Any, location: Location, before: int) -> int:
    """Migrate from ``before`` in the caller's transaction; a step that finds its columns or
    tables already there means the version was tampered with (set back to 1 on a newer
    store): damaged, and the caller's rollback leaves the database as it was."""
    from gpuperf_magics.store import migrations

    try:
        return migrations.upgrade(conn, before)
    except driver_errors() as exc:
        inner = _unwrapped(exc)
        if getattr(inner, "sqlstate", None) not in _ALREADY_THERE:
            raise
        detail = redact(" ".join(str(inner).split()), location.secrets)
        raise _damaged(location.display, f"its schema version says {before}, but its tables "
                       f"already hold what a later version adds ({detail})") from None


def driver_errors() -> tuple[type[BaseException], ...]:
    """What the driver and SQLAlchemy raise for a server that fails (refused, lost, denied,
    a statement it rejects): each becomes a :class:`StoreError` with :func:`translate`."""
    import sqlalchemy as sa

    return (sa.exc.SQLAlchemyError, _driver().Error, OSError)


def _unwrapped(exc: BaseException) -> BaseException:
    """The driver's exception inside SQLAlchemy's wrapper (the one whose sqlstate says what
    happened)."""
    orig = getattr(exc, "orig", None)
    return orig if isinstance(orig, BaseException) else exc


def kind_of(exc: BaseException) -> str:
    """``retry``, ``unreachable``, ``denied``, ``damaged``, ``locked`` or ``other``, for a
    driver error (SQLAlchemy's wrapper is looked through)."""
    psycopg = _driver()
    exc = _unwrapped(exc)
    state = getattr(exc, "sqlstate", None) or ""
    if state in ("40001", "40P01", "23505"):
        return "retry"
    if state == "55P03":
        return "locked"
    if state in ("42501", "25006"):
        return "denied"
    if state in ("42P01", "42703"):
        return "damaged"
    if state.startswith("08") or state in ("57P01", "57P02", "57P03"):
        return "unreachable"
    if isinstance(exc, psycopg.OperationalError) and not state:
        return "unreachable"  # connection refused, timed out, closed by the server
    if isinstance(exc, (psycopg.InterfaceError, OSError)):
        return "unreachable"
    return "other"


def translate(exc: BaseException, location: Location, action: str, timeout: float) -> StoreError:
    """A :class:`StoreError` that says what failed and what to do, password masked."""
    if isinstance(exc, StoreError):
        return exc
    exc = _unwrapped(exc)
    shown = location.display
    detail = redact(" ".join((str(exc) or type(exc).__name__).split()), location.secrets)
    kind = kind_of(exc)
    if kind == "unreachable":
        message = (
            f"could not {action}: the PostgreSQL server of {shown} cannot be reached or refused "
            f"the connection ({detail}). Check the host, port, network and credentials "
            "(~/.pgpass, PGPASSWORD or PGSERVICE), or "
            f"{ANOTHER_STORE}."
        )
    elif kind == "denied":
        message = (
            f"could not {action}: the role connecting to {shown} may read but not write this "
            f"store ({detail}). Ask the store's owner for write access (GRANT INSERT, UPDATE, "
            "DELETE), or save to a store of your own and `gpuperf sync` it later."
        )
    elif kind == "locked":
        message = (
            f"could not {action}: the store {shown} stayed locked by another writer for "
            f"{timeout:g} s ({detail}). Retry later, or raise Store(..., timeout=...)."
        )
    elif kind == "damaged":
        message = (
            f"could not {action}: the store {shown} is damaged ({detail}). Ask its "
            "administrator to restore it from a backup."
        )
    else:
        message = f"could not {action} in the store {shown}: {detail}. Retry, or {ANOTHER_STORE}."
    err = StoreError(message, path=shown, cause=exc)
    err.kind = kind
    return err
