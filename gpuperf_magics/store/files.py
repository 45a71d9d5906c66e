"""Reading and writing tables as CSV or Parquet files, chosen by the file's suffix.

A file that cannot be read as a table (empty, binary, not UTF-8, malformed, a column named
twice) is an :class:`~gpuperf_magics.store.errors.ImportValidationError` naming the file and
saying what to do, never a bare pandas or pyarrow exception.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pandas as pd

from gpuperf_magics._checks import is_missing
from gpuperf_magics.store.errors import ImportValidationError

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


#: The oldest pyarrow read from: 14.0.1 fixes arbitrary code execution when reading an
#: untrusted Parquet file (CVE-2023-47248); pyproject.toml's ``parquet`` extra asks for it too,
#: but an environment may hold an older one installed otherwise.
PYARROW_FLOOR = (14, 0, 1)


def pyarrow_problem(version: str) -> str | None:
    """Why Parquet files must not be read with pyarrow ``version`` (None: it may)."""
    found = tuple(int(n) for n in re.findall(r"\d+", version)[:3])
    if found >= PYARROW_FLOOR:
        return None
    floor = ".".join(map(str, PYARROW_FLOOR))
    return (f"pyarrow {version} runs code hidden in a Parquet file it reads (CVE-2023-47248, "
            f"fixed in {floor}): pip install -U 'pyarrow>={floor}' (or pip install -U "
            "'gpuperf-magics[parquet]'), or use a .csv file")


def _require_pyarrow(action: str) -> None:
    try:
        import pyarrow
    except ImportError:
        raise ImportError(
            f"{action} Parquet needs pyarrow: pip install 'gpuperf-magics[parquet]' "
            "(or pip install pyarrow), or use a .csv file"
        ) from None
    problem = pyarrow_problem(str(pyarrow.__version__)) if action == "reading" else None
    if problem:
        raise ImportError(f"refusing to read Parquet: {problem}")


#: Errors of a path rather than of its content: raised as they are (they name the file).
_PATH_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError,
                ImportError)


def _unreadable(path: Path, fmt: str, exc: BaseException) -> ImportValidationError:
    """What is wrong with the content of the table file ``path``, and what to do."""
    detail = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, pd.errors.ParserWarning):
        detail = "a line has more cells than the header"
    if fmt == "parquet":
        why = (f"it is not a readable Parquet file ({detail}); write one with "
               "DataFrame.to_parquet or Store.export, or name a CSV file *.csv")
    elif isinstance(exc, pd.errors.EmptyDataError) or (path.is_file() and
                                                       path.stat().st_size == 0):
        why = ("the file is empty: a table needs a header line naming its columns (time_s, "
               "batch_size, ...) and a line per run")
    elif isinstance(exc, _BinaryFile):
        why = (f"it is a binary file (it holds NUL bytes), not {fmt.upper()} text: give the "
               "table's own file, or name a Parquet file *.parquet")
    elif isinstance(exc, UnicodeDecodeError):
        why = (f"it is not UTF-8 text (it holds the byte 0x{exc.object[exc.start]:02x}): save "
               "it as UTF-8 (in a spreadsheet: CSV UTF-8), or, if it is not a table, give the "
               "table's file")
    elif isinstance(exc, (pd.errors.ParserError, pd.errors.ParserWarning)):
        why = (f"it is not a well-formed {fmt.upper()} table ({detail}): every line needs as "
               "many cells as the header, and a cell holding a comma or a quote is quoted")
    else:
        why = f"it cannot be read as a {fmt.upper()} table ({type(exc).__name__}: {detail})"
    problem = f"{path}: {why}"
    return ImportValidationError(f"cannot import {path}: {why}. Nothing was written.",
                                 [problem])


class _BinaryFile(ValueError):
    """A CSV/TSV file that holds NUL bytes."""


def _binary(path: Path) -> bool:
    """An uncompressed CSV/TSV file holding NUL bytes is no text table (an image, a zip)."""
    if not path.name.lower().endswith((".csv", ".tsv", ".tab")):
        return False  # compressed: the decompressor says it
    with path.open("rb") as handle:
        return b"\0" in handle.read(65536)


def _raw_header(path: Path, fmt: str) -> list[str]:
    """The header as written (pandas renames a repeated ``time_s`` to ``time_s.1``)."""
    if fmt == "parquet":
        _require_pyarrow("reading")
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    if _binary(path):
        raise _BinaryFile(str(path))
    first = pd.read_csv(path, sep="\t" if fmt == "tsv" else ",", header=None, nrows=1,
                        dtype=str, keep_default_na=False)
    return [str(c) for c in first.iloc[0]] if len(first) else []


def _checked_header(path: Path, fmt: str) -> list[str]:
    names = _raw_header(path, fmt)
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        why = (f"its header names {', '.join(map(repr, repeated))} more than once: rename "
               "or drop all but one of them")
        raise ImportValidationError(f"cannot import {path}: {why}. Nothing was written.",
                                    [f"{path}: {why}"])
    return names


def read_header(path: Path) -> list[str]:
    """The column names of a table file, as written.

    Raises
    ------
    ImportValidationError
        The file is empty, binary, not UTF-8, malformed, or names a column twice; the
        message names the file and says what to do.
    """
    fmt = file_format(path)
    try:
        return _checked_header(path, fmt)
    except (ImportValidationError, *_PATH_ERRORS):
        raise
    except Exception as exc:  # pandas, pyarrow and decompressors raise many kinds
        raise _unreadable(path, fmt, exc) from None


def read_table(path: Path, text_columns: Collection[str] = ()) -> pd.DataFrame:
    """A table file as a DataFrame.

    Parameters
    ----------
    path : Path
        A ``.csv``/``.tsv``/``.parquet`` file.
    text_columns : collection of str
        Columns read as text, never as numbers (driver "535.104" must not become a float).

    Raises
    ------
    ImportValidationError
        As :func:`read_header` says.
    """
    fmt = file_format(path)
    try:
        _checked_header(path, fmt)
        if fmt == "parquet":
            return pd.read_parquet(path)
        with warnings.catch_warnings():
            # Rows longer than the header: pandas would take the first cells for an index
            # (index_col=False) or drop the last ones with a warning; either shifts values.
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(path, sep="\t" if fmt == "tsv" else ",", index_col=False,
                                dtype={c: str for c in text_columns})
    except (ImportValidationError, *_PATH_ERRORS):
        raise
    except Exception as exc:  # pandas, pyarrow and decompressors raise many kinds
        raise _unreadable(path, fmt, exc) from None
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


def write_csv(frame: pd.DataFrame, stream: Any = None) -> None:
    """Write ``frame`` as CSV to ``stream`` (default: standard output), every text cell and
    header that a spreadsheet would run as a formula (``=``, ``+``, ``-``, ``@``...) made
    inert as :func:`write_table` does it: one escaping rule for every CSV the package writes,
    so that an imported network named ``=HYPERLINK(...)`` is text in the spreadsheet that
    ``gpuperf runs --csv`` or ``%predict_time --csv`` fills."""
    import sys

    out = frame.rename(columns=lambda name: escape_formula(str(name)))
    for name in out.columns:
        column = out[name]
        if column.dtype == object or pd.api.types.is_string_dtype(column):
            out[name] = column.map(escape_formula)
    out.to_csv(stream or sys.stdout, index=False)


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
