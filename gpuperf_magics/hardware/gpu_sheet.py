"""The GPU spec sheet as a table: its columns, the built-in ``gpus.csv``, and the checks a
user's rows pass before :func:`~gpuperf_magics.hardware.catalog.add_gpus` takes them.
"""

from __future__ import annotations

import functools
import io
from importlib import resources
from typing import TYPE_CHECKING, Any

from gpuperf_magics._checks import is_missing, positive_number
from gpuperf_magics.columns import KINDS

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: Columns of the catalog, in order.
COLUMNS = (
    "name",
    "aliases",
    "gpu_architecture",
    "gpu_compute_capability",
    "gpu_sm_count",
    "gpu_cuda_cores",
    "gpu_clock_mhz",
    "gpu_memory_gb",
    "gpu_bandwidth_gbs",
    "gpu_fp32_tflops",
    "gpu_tf32_tflops",
    "gpu_fp16_tflops",
    "gpu_bf16_tflops",
    "gpu_release_year",
    "form_factor",
    "tdp_w",
    "notes",
    "source",
)
# The ``gpu_*`` columns take their kind from the registry (so ``gpu_clock_mhz`` is a float
# here as in a run); the catalog's own columns are text but for the board power.
_TEXT = tuple(c for c in COLUMNS if KINDS.get(c, "str") == "str" and c != "tdp_w")
_INTEGER = (*(c for c in COLUMNS if KINDS.get(c) == "int"), "tdp_w")
_FLOAT = tuple(c for c in COLUMNS if KINDS.get(c) == "float")
#: Columns a user-added GPU must fill: what a prediction for another GPU needs.
REQUIRED = ("name", "gpu_memory_gb", "gpu_bandwidth_gbs", "gpu_fp32_tflops")


def _read_csv(source: Any) -> pd.DataFrame:
    """Read a catalog CSV: leading ``#`` lines are comments."""
    import pandas as pd

    if hasattr(source, "read_text"):
        text = source.read_text(encoding="utf-8")
    else:
        with open(source, encoding="utf-8") as file:
            text = file.read()
    lines = text.splitlines(keepends=True)
    while lines and lines[0].lstrip().startswith("#"):
        lines.pop(0)
    return pd.read_csv(io.StringIO("".join(lines)), dtype=str, keep_default_na=False)


@functools.cache
def _builtin() -> pd.DataFrame:
    frame = _read_csv(resources.files("gpuperf_magics.hardware").joinpath("gpus.csv"))
    table, errors = _validate(frame, required=COLUMNS[:1])
    if errors:  # pragma: no cover - guarded by tests/test_hardware_gpu_sheet.py
        raise RuntimeError("gpus.csv is invalid:\n" + "\n".join(errors))
    return table


def _validate(frame: pd.DataFrame, required: tuple[str, ...]) -> tuple[pd.DataFrame, list[str]]:
    """Typed copy of a catalog table and the problems found, one message per problem."""
    import pandas as pd

    errors: list[str] = []
    unknown = [str(c) for c in frame.columns if c not in COLUMNS]
    if unknown:
        errors.append(
            f"unknown column(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(COLUMNS)}"
        )
    missing = [c for c in required if c not in frame.columns]
    if missing:
        errors.append(f"missing required column(s): {', '.join(missing)}")
    if errors:
        return frame, errors
    records = frame.to_dict("records")
    columns: dict[str, list[Any]] = {column: [] for column in COLUMNS}
    seen: set[str] = set()
    for number, record in enumerate(records, start=1):
        row = {c: None if is_missing(record.get(c)) else record.get(c) for c in COLUMNS}
        name = str(row["name"]).strip() if row["name"] is not None else ""
        where = f"row {number} ({name!r})" if name else f"row {number}"
        if not name:
            errors.append(f"{where}: 'name' is empty; give the name NVML/torch report")
        elif name.lower() in seen:
            errors.append(f"{where}: duplicate name")
        seen.add(name.lower())
        for column in _TEXT:
            columns[column].append("" if row[column] is None else str(row[column]).strip())
        for column in _INTEGER + _FLOAT:
            try:
                value = positive_number(row[column], repr(column), whole=column in _INTEGER)
            except ValueError as exc:
                errors.append(f"{where}: {exc}")
                value = None
            else:
                if value is None and column in required:
                    errors.append(f"{where}: {column!r} is required")
            columns[column].append(value)
        errors += _ampere_only(columns, where)
    if errors:
        return frame, errors
    out = pd.DataFrame(
        {
            column: pd.array(
                values,
                dtype="Int64" if column in _INTEGER else "float64" if column in _FLOAT else "str",
            )
            for column, values in columns.items()
        }
    )
    return out, []


#: Peaks of tensor-core formats Ampere (compute capability 8.0) introduced: a figure for an
#: older GPU is a typo or a column mix-up (Volta and Turing have FP16 tensor cores only).
_AMPERE_PEAKS = {"gpu_tf32_tflops": "TF32", "gpu_bf16_tflops": "BF16"}


def _ampere_only(columns: dict[str, list[Any]], where: str) -> list[str]:
    """Problems with the TF32/BF16 peaks of the row just read (the last of ``columns``)."""
    capability = columns["gpu_compute_capability"][-1]
    errors = []
    for column, fmt in _AMPERE_PEAKS.items():
        if columns[column][-1] is None:
            continue
        if capability is None:
            errors.append(f"{where}: {column!r} given without 'gpu_compute_capability'")
        elif capability < 8.0:
            errors.append(
                f"{where}: {column!r} given but {fmt} tensor cores need compute "
                f"capability 8.0 or newer (got {capability:g}); leave it empty"
            )
    return errors


def _complete_from_builtin(table: pd.DataFrame) -> pd.DataFrame:
    """A row that replaces a built-in GPU keeps its canonical name and every figure it does
    not give (a corrected bandwidth must not erase the architecture and SM count)."""
    builtin = _builtin()
    by_name = {name.lower(): i for i, name in enumerate(builtin["name"])}
    table = table.copy()
    for j in range(len(table)):
        i = by_name.get(str(table.at[j, "name"]).lower())
        if i is None:
            continue
        table.at[j, "name"] = builtin.at[i, "name"]
        if table.at[j, "source"] == "user-supplied":
            table.at[j, "source"] = f"user-supplied; other figures: {builtin.at[i, 'source']}"
        for col in table.columns:
            if col in builtin.columns and is_missing(table.at[j, col]):
                table.at[j, col] = builtin.at[i, col]
    return table
