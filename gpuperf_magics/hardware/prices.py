"""Prices of cloud GPU instances, for the cost column of the offers table.

The built-in figures live in ``prices.csv`` next to this module, each row with the date the
price was read for and the page it comes from (its comment header says what every column
means). They are few and they age: a user's own file (``%config GpuPerf.prices``, ``prices=``
in Python) adds rows, and replaces a built-in row of the same provider, region, instance and
pricing. Nothing here reaches the network.

A file is validated once per version of it (its path and the digest of its bytes): the
what-if panel asks for the prices at every change of a control, and a price file changes far
less often than that.

Examples
--------
>>> from gpuperf_magics.hardware.prices import prices
>>> table = prices()
>>> table.loc[table["instance"] == "g5.xlarge", "gpu"].iloc[0]
'NVIDIA A10G'
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuperf_magics._checks import is_missing, positive_number

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["COLUMNS", "PriceError", "prices"]

#: Columns of a price table; ``note`` may be left out of a user's file.
COLUMNS = ("provider", "region", "instance", "gpu", "gpus", "pricing", "usd_per_hour", "date",
           "source", "note")
#: A row of a user's file replaces the built-in row with the same values of these columns.
KEY = ("provider", "region", "instance", "pricing")
#: What ``pricing`` may say.
PRICINGS = ("on-demand", "spot", "capacity-block")


class PriceError(ValueError):
    """A price file or table cannot be read; the message names the file, row and column."""


def _read(source: Any, name: Any = None) -> pd.DataFrame:
    """The rows of a table, or of a CSV buffer read from file ``name`` (the callers read the
    file themselves: a missing one is their error)."""
    import pandas as pd

    if isinstance(source, pd.DataFrame):
        return source.copy()
    try:
        return pd.read_csv(source, comment="#", dtype=str, keep_default_na=False,
                           skipinitialspace=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise PriceError(f"price file {name} cannot be read as CSV: {exc}") from None


#: Validated tables by (file, digest of its bytes): a file is checked once per version of it;
#: and the built-in table merged with a user's file, by the versions of both. The frames are
#: never handed out, only copies of them.
_VALIDATED: dict[tuple[str, bytes], pd.DataFrame] = {}
_MERGED: dict[tuple[tuple[str, bytes], tuple[str, bytes]], pd.DataFrame] = {}
_LOCK = threading.Lock()
_Version = tuple[str, bytes]


def _validated_file(path: str | os.PathLike[str],
                    origin: str) -> tuple[_Version | None, pd.DataFrame]:
    """The file's table, validated once for each version of the file.

    The version is the digest of the file's bytes rather than its modification time: reading
    a price file costs microseconds, validating it milliseconds, and an edit within one tick
    of a coarse file-system clock (or one that keeps the size) is still seen.

    Returns
    -------
    (version, DataFrame)
        The file's version (its resolved path and digest) and its validated rows.
    """
    file = Path(path)
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise PriceError(f"price file {path} does not exist") from None
    except OSError as exc:
        raise PriceError(f"price file {path} cannot be read: {exc}") from None
    key = (str(file.resolve()), hashlib.blake2b(data, digest_size=16).digest())
    with _LOCK:
        hit = _VALIDATED.get(key)
    if hit is None:
        hit = _validate(_read(io.BytesIO(data), path), origin)
        with _LOCK:
            for old in [k for k in _VALIDATED if k[0] == key[0]]:
                del _VALIDATED[old]  # an earlier version of the file
            _VALIDATED[key] = hit
    return key, hit


def _builtin() -> tuple[_Version | None, pd.DataFrame]:
    resource = resources.files("gpuperf_magics.hardware").joinpath("prices.csv")
    if isinstance(resource, os.PathLike):
        return _validated_file(resource, "the built-in prices.csv")
    text = resource.read_text("utf-8")  # pragma: no cover - a zipped install
    return None, _validate(_read(io.StringIO(text), resource),  # pragma: no cover
                           "the built-in prices.csv")


def _validate(frame: pd.DataFrame, origin: str) -> pd.DataFrame:
    """The rows checked and normalised (GPU names made the catalog's, numbers typed).

    Raises
    ------
    PriceError
        A column is missing, or a row has an unknown GPU, a GPU count that is not a whole
        number > 0, a price that is not a finite number > 0, an unknown pricing, a date that
        is not an ISO date, or an empty provider, region, instance or source.
    """
    import pandas as pd

    frame = frame.rename(columns=lambda c: str(c).strip())
    missing = [c for c in COLUMNS if c != "note" and c not in frame.columns]
    if missing:
        raise PriceError(f"{origin}: missing column(s) {', '.join(missing)}; a price table "
                         f"has the columns {', '.join(COLUMNS)} (note optional)")
    if "note" not in frame.columns:
        frame["note"] = ""
    rows = [_row(row, f"{origin}, row {number}")
            for number, (_, row) in enumerate(frame.iterrows(), start=1)]
    out = pd.DataFrame(rows, columns=list(COLUMNS))
    twice = out.duplicated(list(KEY), keep=False)
    if twice.any():
        first = out[twice].iloc[0]
        raise PriceError(f"{origin}: {first['instance']} ({first['provider']}, "
                         f"{first['region']}, {first['pricing']}) is listed more than once")
    return out


def _row(row: pd.Series, where: str) -> dict[str, Any]:
    """One row of a price table checked and normalised; ``where`` names it in messages."""
    import pandas as pd

    from gpuperf_magics.hardware.catalog import UnknownGPUError, canonical_name

    def text(column: str) -> str:
        value = row[column]
        out = "" if is_missing(value) else str(value).strip()
        if not out and column != "note":
            raise PriceError(f"{where}: {column} is empty")
        return out

    try:
        gpu = canonical_name(text("gpu"))
    except UnknownGPUError as exc:
        raise PriceError(f"{where}: {exc}") from None
    try:
        count = positive_number(text("gpus"), "gpus", whole=True, error=PriceError)
    except PriceError:  # one message for 0, 1.5 and "two": a count is a whole number >= 1
        raise PriceError(f"{where}: gpus must be a whole number >= 1, got "
                         f"{row['gpus']!r}") from None
    price = positive_number(text("usd_per_hour"), f"{where}: usd_per_hour", error=PriceError)
    pricing = text("pricing").lower()
    if pricing not in PRICINGS:
        raise PriceError(f"{where}: pricing must be one of {', '.join(PRICINGS)}, got "
                         f"{row['pricing']!r}")
    try:
        date = pd.Timestamp(text("date")).date()
    except ValueError:
        raise PriceError(f"{where}: date must be an ISO date (2026-05-07), got "
                         f"{row['date']!r}") from None
    return {"provider": text("provider").lower(), "region": text("region"),
            "instance": text("instance"), "gpu": gpu, "gpus": count, "pricing": pricing,
            "usd_per_hour": price, "date": date, "source": text("source"),
            "note": text("note")}


def prices(extra: str | os.PathLike[str] | pd.DataFrame | None = None) -> pd.DataFrame:
    """The price table: the built-in rows, with a user's own rows added or replacing them.

    Parameters
    ----------
    extra : path or DataFrame, optional
        A CSV file (``#`` comment lines allowed) or a table with the columns :data:`COLUMNS`
        (``note`` optional). A row with the :data:`KEY` of a built-in row replaces it.

    Returns
    -------
    pandas.DataFrame
        One row per offer, built-in rows first in their order, then the user's new rows;
        ``gpu`` is the catalog's name, ``date`` a :class:`datetime.date`. A new frame on
        every call.

    Raises
    ------
    PriceError
        The file is missing or unreadable, or a row is invalid (the message names the file,
        the row counted from 1 after the header, and the column).
    """
    import pandas as pd

    shipped, table = _builtin()
    if extra is None:
        return table.copy()
    if isinstance(extra, pd.DataFrame):
        return _merge(table, _validate(_read(extra), "the prices table"))
    version, mine = _validated_file(extra, f"price file {extra}")
    if shipped is None or version is None:  # pragma: no cover - a zipped install
        return _merge(table, mine)
    key = (shipped, version)
    with _LOCK:
        merged = _MERGED.get(key)
    if merged is None:
        merged = _merge(table, mine)
        with _LOCK:
            for old in [k for k in _MERGED if k[1][0] == version[0]]:
                del _MERGED[old]  # the file's earlier versions
            _MERGED[key] = merged
    return merged.copy()


def _merge(table: pd.DataFrame, mine: pd.DataFrame) -> pd.DataFrame:
    """``mine`` over the built-in ``table``: a replaced row keeps its place; new rows follow
    the built-in ones."""
    import pandas as pd

    key = list(KEY)
    replaced = table.set_index(key).index.isin(mine.set_index(key).index)
    kept = table[~replaced]
    merged = pd.concat([kept, mine], ignore_index=True)
    order = {k: i for i, k in enumerate(map(tuple, table[key].to_numpy()))}
    rank = [order.get(tuple(k), len(order) + i)
            for i, k in enumerate(merged[key].to_numpy())]
    return merged.iloc[sorted(range(len(merged)), key=rank.__getitem__)].reset_index(drop=True)
