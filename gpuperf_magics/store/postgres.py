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
from typing import TYPE_CHECKING, Any

from gpuperf_magics.store import schema
from gpuperf_magics.store.errors import ANOTHER_STORE, StoreError, StoreVersionError
from gpuperf_magics.store.location import Location, redact

if TYPE_CHECKING:  # pragma: no cover
    import psycopg

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


class PgConnection:
    """A psycopg connection with the small API the store's SQL uses (``?`` placeholders)."""

    dialect = schema.POSTGRES

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.raw = conn

    @staticmethod
    def _sql(sql: str) -> str:
        # The store's statements hold no literal '?' or '%', so this translation is exact.
        return sql.replace("?", "%s")

    def execute(self, sql: str, params: Any = None) -> Any:
        if params is not None and not isinstance(params, (list, tuple)):
            params = tuple(params)
        return self.raw.execute(self._sql(sql), params if params else None)

    def executemany(self, sql: str, rows: Any) -> Any:
        cursor = self.raw.cursor()
        cursor.executemany(self._sql(sql), list(rows))
        return cursor

    def copy_rows(self, table: str, columns: Any, rows: Any) -> None:
        """Rows into a table with COPY (the bulk path of imports and syncs)."""
        cursor = self.raw.cursor()
        with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)

    @property
    def in_transaction(self) -> bool:
        return bool(self.raw.info.transaction_status != 0)  # 0: IDLE

    def close(self) -> None:
        self.raw.close()


def connect(location: Location, timeout: float) -> PgConnection:
    """A connection in autocommit mode (transactions are opened explicitly)."""
    psycopg = _driver()
    raw = psycopg.connect(
        location.url,
        autocommit=True,
        # libpq waits at least 2 s; a server silent for 10 s is unreachable for a cell about
        # to train, whatever the lock timeout.
        connect_timeout=max(2, min(math.ceil(timeout), 10)),
        application_name="gpuperf_magics",
    )
    return PgConnection(raw)


def _inspect(conn: PgConnection) -> tuple[set[str], dict[str, str]]:
    tables = {name for (name,) in conn.execute(
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = current_schema() AND table_name IN ('meta', 'hardware', 'runs', "
        "'iterations')")}
    meta: dict[str, str] = {}
    if "meta" in tables:
        meta = {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta")}
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
    try:
        return int(meta.get("schema_version", ""))
    except ValueError:
        raise StoreError(
            f"the store {shown} is damaged: its schema_version in table meta is "
            f"{meta.get('schema_version')!r}. Ask its administrator to restore it from a "
            "backup.", path=shown,
        ) from None


def ensure_schema(conn: PgConnection, location: Location) -> None:
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
    latest = schema.latest_version()
    if version == 0:
        raise StoreError(
            f"the database {shown} holds no gpuperf_magics store yet: create it once with "
            f"`gpuperf migrate '{shown}'` (as a role that may create tables), or "
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
            f"`gpuperf migrate '{shown}'` once (teammates then need this version too), or "
            f"keep using the older gpuperf-magics.",
            path=shown,
        )
    missing = [t for t in schema.REQUIRED_TABLES if t not in tables]
    if missing or "revision" not in meta:
        what = (f"table(s) {', '.join(missing)} missing" if missing
                else "the revision row of table meta is missing")
        raise StoreError(
            f"the store {shown} is damaged: {what}. Nothing was changed; ask its administrator "
            "to restore it from a backup (or sync a local copy into a new database).",
            path=shown,
        )


def migrate(location: Location, timeout: float = 30.0) -> schema.Migrated:
    """Create or upgrade the store's tables on the server; the versions before and after.

    Concurrent calls are serialised by an advisory lock, so two administrators running it at
    once do not collide; a store already at the latest version is left as it is.
    """
    conn = _open(location, timeout)
    try:
        conn.execute("BEGIN")
        try:
            conn.execute("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))
            tables, meta = _inspect(conn)
            before = _version(location, tables, meta)
            if before > schema.latest_version():
                ensure_schema(conn, location)  # raises the "newer version" error
            after = schema.migrate(conn, before, schema.POSTGRES)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    except StoreError:
        raise
    except Exception as exc:
        raise translate(exc, location, "migrate the store", timeout) from None
    finally:
        conn.close()
    return schema.Migrated(before, after)


def _open(location: Location, timeout: float) -> PgConnection:
    try:
        return connect(location, timeout)
    except StoreError:
        raise
    except Exception as exc:
        raise translate(exc, location, "connect", timeout) from None


def kind_of(exc: BaseException) -> str:
    """``retry``, ``unreachable``, ``denied``, ``damaged``, ``locked`` or ``other``."""
    psycopg = _driver()
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
