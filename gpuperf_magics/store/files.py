"""Reading and writing tables as CSV or Parquet files, chosen by the file's suffix."""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pandas as pd

from gpuperf_magics._checks import is_missing

_CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".csv.xz", ".csv.zip", ".csv.zst")
_TSV_SUFFIXES = (".tsv", ".tsv.gz", ".tab")
_PARQUET_SUFFIXES = (".parquet", ".pq")


def file_format(path: Path) -> str:
    """``"csv"``, ``"tsv"`` or ``"parquet"`` from the file name.

    Raises
    ------
    ValueError
        For any other suffix.
    """
    name = path.name.lower()
    if name.endswith(_CSV_SUFFIXES):
        return "csv"
    if name.endswith(_TSV_SUFFIXES):
        return "tsv"
    if name.endswith(_PARQUET_SUFFIXES):
        return "parquet"
    raise ValueError(
        f"cannot tell the format of {path}: name the file *.csv (also .csv.gz ...), *.tsv or "
        "*.parquet"
    )


def _require_pyarrow(action: str) -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise ImportError(
            f"{action} Parquet needs pyarrow: pip install 'gpuperf-magics[parquet]' "
            "(or pip install pyarrow), or use a .csv file"
        ) from None


def read_header(path: Path) -> list[str]:
    """The column names of a table file."""
    fmt = file_format(path)
    if fmt == "parquet":
        _require_pyarrow("reading")
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    sep = "\t" if fmt == "tsv" else ","
    return [str(c) for c in pd.read_csv(path, sep=sep, nrows=0).columns]


def read_table(path: Path, text_columns: Collection[str] = ()) -> pd.DataFrame:
    """A table file as a DataFrame.

    Parameters
    ----------
    path : Path
        A ``.csv``/``.tsv``/``.parquet`` file.
    text_columns : collection of str
        Columns read as text, never as numbers (driver "535.104" must not become a float).
    """
    fmt = file_format(path)
    if fmt == "parquet":
        _require_pyarrow("reading")
        return pd.read_parquet(path)
    frame = pd.read_csv(
        path, sep="\t" if fmt == "tsv" else ",", dtype={c: str for c in text_columns}
    )
    for name in frame.columns:
        if frame[name].dtype == object or pd.api.types.is_string_dtype(frame[name]):
            frame[name] = frame[name].map(unescape_formula)
    return frame


#: First characters that make a spreadsheet run a cell as a formula (OWASP's list).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _needs_escape(text: str) -> bool:
    if text.startswith(_FORMULA_START):
        return not _is_number(text)  # "-1.5" is a number, shown as one
    # Text that already starts with the escape is escaped again, so that unescaping gives
    # back exactly what was written.
    return text.startswith("'") and _needs_escape(text[1:])


def escape_formula(value: Any) -> Any:
    """A text cell a spreadsheet would run as a formula, made inert with a leading ``'``."""
    if isinstance(value, str) and _needs_escape(value):
        return "'" + value
    return value


def unescape_formula(value: Any) -> Any:
    """Undo :func:`escape_formula` (other text, numbers and empty cells unchanged)."""
    if isinstance(value, str) and value.startswith("'") and _needs_escape(value[1:]):
        return value[1:]
    return value


def _cell_text(value: Any) -> Any:
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, default=str)
    return value


def _portable(frame: pd.DataFrame) -> pd.DataFrame:
    """Dicts and lists as JSON text; object columns mixing text and numbers as text."""
    out = frame.copy()
    for name in out.columns:
        column = out[name]
        if column.dtype != object:
            continue
        column = column.map(_cell_text)
        if len({type(v) for v in column if not is_missing(v, blank_text=False)}) > 1:
            # Parquet columns have one type; CSV does not care.
            column = column.map(lambda v: None if is_missing(v, blank_text=False) else str(v))
        out[name] = column
    return out


def write_table(frame: pd.DataFrame, path: Path) -> Path:
    """Write a frame as CSV or Parquet by the suffix of ``path``; returns ``path``.

    Dict cells (``tags``) become JSON text, which :meth:`Store.import_table` parses back.
    """
    fmt = file_format(path)
    if fmt == "parquet":
        _require_pyarrow("writing")
    portable = _portable(frame)
    if fmt == "parquet":
        portable.to_parquet(path, index=False)
    else:
        for name in portable.columns:
            if portable[name].dtype == object or pd.api.types.is_string_dtype(portable[name]):
                portable[name] = portable[name].map(escape_formula)
        portable.to_csv(path, sep="\t" if fmt == "tsv" else ",", index=False)
    return path
