"""Turn a canonical table (or a numeric array) into the model's numeric features, with clear errors.

What counts as a feature
------------------------
- ``network`` (str) splits the data into one model per network; ``iterations`` (default 1) is
  the count the time covers; ``gpu`` (str) is resolved through the hardware catalog.
- Hardware: of the ``gpu_*`` columns only the peak FP32 rate ``gpu_fp32_tflops`` and the memory
  bandwidth ``gpu_bandwidth_gbs`` are used (the others are functions of the same GPU and would
  only multiply the candidate terms). Given directly, they win over the catalog, unless
  ``prefer_catalog`` is set, the ``gpu`` name resolves and the given figure differs from the
  catalog's by more than :data:`CATALOG_TOLERANCE`: then the catalog's per-device figure wins.
  (Published tables quote whole dual-GPU boards at base clock, e.g. the Tesla K80's 5.6 TFLOPS,
  while one CUDA device is one die; measured times follow the per-device figure.)
- Precision: with ``prefer_catalog``, ``gpu_fp32_tflops`` of a named GPU becomes the peak of the
  precision the run's matrix products used (:func:`precision_of`): under autocast or a half
  dtype, or in FP32 with TF32 allowed, the tensor cores do that work, and a GPU move follows
  their rate (V100 → A100 is 1.24× in FP32 peaks, 2.5× in FP16 tensor peaks). Tensor cores
  reach their peak only on large aligned products, so the rate used is the geometric mean of
  the FP32 and the tensor peak (:func:`effective_peak`), never below the FP32 peak; TF32 at
  under :data:`TF32_GAIN_FROM` times the FP32 figure counts as FP32.
- Of the canonical columns (:mod:`gpuperf_magics.columns`) those flagged ``feature`` are
  features (``batch_size``, ``gpu_count``, ``arch_*`` ...); bookkeeping, measurement quality
  and results of a run (``peak_memory_gb``) are not. Every other numeric or boolean column
  (``depth``, image size ...) is a feature, except names ending in ``_s`` (they restate the
  target: ``it_total_s``), further ``gpu_*`` figures, and those listed in ``ignore``. Text,
  dict and list columns are ignored.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpuperf_magics.columns import COLUMNS
from gpuperf_magics.model.evidence import device_key

#: Relative disagreement between a given hardware figure and the catalog's beyond which the
#: catalog's per-device figure is used (with ``prefer_catalog``). Small on purpose: ratios
#: between GPUs are what a model learns, and they need figures from one consistent source (per
#: device, boost clock) more than either source's absolute accuracy.
CATALOG_TOLERANCE = 0.1

#: Hardware columns the model uses, in this order.
HARDWARE = ("gpu_fp32_tflops", "gpu_bandwidth_gbs")

#: The registry's columns by name: which of them are features is its ``feature`` flag.
_CANONICAL = {c.name: c for c in COLUMNS}

#: Columns that must be positive numbers when present.
POSITIVE = ("batch_size", "iterations", *HARDWARE)


@dataclass
class Prepared:
    """Numeric view of a table.

    Attributes
    ----------
    features : DataFrame
        Numeric features (hardware included), float, finite.
    iterations : ndarray
        Iterations per row (ones when the table has no ``iterations`` column).
    network : ndarray of str or None
    hardware_label : ndarray of str
        The GPU each row ran on, for messages ("Tesla T4", "7.4 TFLOPS", "CPU").
    naive_peak : ndarray of float or None
        The plain spec-sheet peak of each row's precision (the FP32 peak, or the TF32/FP16
        tensor peak where the row records that precision): what the naive GPU move scales by.
    architecture : ndarray of object
        The GPU architecture of each row ("Pascal"), from ``gpu_architecture`` or the catalog;
        None where unknown. Not a feature: it says which measured GPUs' efficiency an unmeasured
        GPU of the same architecture shares.
    device : ndarray of object or None
        ``"<catalog name>|<precision class>"`` of each row (None: no catalog name): what the
        evidence of GPU moves is keyed by.
    """

    features: pd.DataFrame
    iterations: np.ndarray
    network: np.ndarray | None
    hardware_label: np.ndarray
    architecture: np.ndarray | None = None
    naive_peak: np.ndarray | None = None
    #: The device of each row for the evidence of GPU moves (:func:`~.evidence.device_key`:
    #: the catalog's name and the precision class); None where the GPU has no catalog name.
    device: np.ndarray | None = None


def _as_frame(x: object) -> pd.DataFrame:
    if isinstance(x, pd.DataFrame):
        return x
    if isinstance(x, pd.Series):
        raise TypeError("X must be a DataFrame (one row per configuration), not a Series")
    if hasattr(x, "tocsr") or type(x).__module__.startswith("scipy.sparse"):
        raise TypeError("sparse input is not supported: pass a DataFrame or a dense array")
    arr = np.asarray(x)
    if arr.dtype.kind == "c":
        raise ValueError("Complex data not supported: X must hold real numbers")
    if arr.dtype.kind == "O":
        with contextlib.suppress(TypeError, ValueError):
            arr = arr.astype(float)  # numbers held as objects; text stays and is refused
    if arr.dtype.kind not in "biuf":
        raise ValueError(
            "X must be a pandas DataFrame or a numeric array; got an array of dtype "
            f"{arr.dtype}"
        )
    if arr.ndim != 2:
        raise ValueError(f"X must be 2-D (rows x features); got {arr.ndim} dimension(s). "
                         "Reshape your data with X.reshape(-1, 1) for one feature or "
                         "X.reshape(1, -1) for one sample")
    if arr.shape[1] == 0:
        raise ValueError(f"0 feature(s) (shape={arr.shape}) while a minimum of 1 is required.")
    return pd.DataFrame(arr, columns=[f"x{j}" for j in range(arr.shape[1])])


def _numeric(frame: pd.DataFrame, col: str) -> np.ndarray:
    series = frame[col]
    if series.dtype == bool:
        return series.to_numpy(dtype=float)
    values = pd.to_numeric(series, errors="coerce")
    bad = values.isna() & series.notna()
    if bad.any():
        example = series[bad].iloc[0]
        raise ValueError(f"column {col!r} must be numeric; found {example!r}")
    return values.to_numpy(dtype=float)


def _is_feature_column(frame: pd.DataFrame, col: str, ignore: Sequence[str]) -> bool:
    if col in ignore or col in ("id", "network", "gpu", "iterations", "time_s"):
        return False
    canonical = _CANONICAL.get(col)
    if canonical is not None:
        if not canonical.feature:
            return False  # bookkeeping, how a run was measured, or what it resulted in
    elif col.endswith("_s") or col.startswith("gpu_"):
        return False  # restates the target, or a GPU figure beyond the two of HARDWARE
    if frame[col].isna().all():
        return False  # a column nobody filled (e.g. depth of non-ResNet files) is absent
    if col in ("batch_size", "gpu_count"):
        return True  # canonical: validated even when stored as text
    dtype = frame[col].dtype
    return bool(pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype))


def _resolve_hardware(
    frame: pd.DataFrame, prefer_catalog: bool = False
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Hardware columns per row, from the table or the catalog; label, architecture, naive
    peak, device key (catalog name and precision class, with ``prefer_catalog`` only).

    Works on numpy arrays, one catalog look-up per distinct GPU name (the what-if panel calls
    this several times per change).
    """
    n = len(frame)
    arch = (
        frame["gpu_architecture"].astype(object).to_numpy().copy()
        if "gpu_architecture" in frame.columns
        else np.full(n, None, dtype=object)
    )
    hw = {col: (_numeric(frame, col).copy() if col in frame.columns else np.full(n, np.nan))
          for col in HARDWARE}
    names = (frame["gpu"].astype(object).to_numpy() if "gpu" in frame.columns
             else np.full(n, None, dtype=object))
    named = np.array([isinstance(v, str) and v.strip() != "" for v in names], dtype=bool)
    labels = np.where(named, names, "CPU").astype(object)
    missing = np.isnan(hw[HARDWARE[0]]) | np.isnan(hw[HARDWARE[1]])
    need = named if prefer_catalog else named & missing  # prefer: the architecture too
    naive = np.full(n, np.nan)
    device = np.full(n, None, dtype=object)
    precision = precision_of(frame) if prefer_catalog and need.any() else None
    for name in pd.unique(names[need]):
        rows = need & (names == name)
        if prefer_catalog and not missing[rows].any():
            specs = _catalog_lookup_quiet(str(name))
        else:
            specs = _catalog_lookup(str(name))
        if specs.get("gpu_architecture"):
            fill = rows & np.array([not isinstance(a, str) for a in arch])
            arch[fill] = specs["gpu_architecture"]
        for col in HARDWARE:
            value = specs.get(col)
            if value is None or not np.isfinite(value):
                continue
            replace = np.isnan(hw[col])
            if prefer_catalog:
                with np.errstate(invalid="ignore", divide="ignore"):
                    replace |= np.abs(hw[col] / float(value) - 1) > CATALOG_TOLERANCE
            hw[col][rows & replace] = float(value)
        if precision is not None and specs.get("gpu_name"):
            for i in np.flatnonzero(rows):
                device[i] = device_key(str(specs["gpu_name"]), precision[i],
                                       specs.get("gpu_architecture"))
        if precision is not None and specs.get("gpu_fp32_tflops"):
            naive[rows] = hw["gpu_fp32_tflops"][rows]
            _precision_peaks(precision, hw, rows, specs, labels, naive)
    for i in np.flatnonzero(~named & ~np.isnan(hw["gpu_fp32_tflops"])):
        labels[i] = f"{hw['gpu_fp32_tflops'][i]:g} TFLOPS GPU"
    naive = np.where(np.isnan(naive), hw["gpu_fp32_tflops"], naive)
    return pd.DataFrame(hw, index=frame.index), labels, arch, naive, device


#: The catalog's peak for each precision of :func:`precision_of`.
PRECISION_PEAKS = {"fp32": "gpu_fp32_tflops", "tf32": "gpu_tf32_tflops",
                   "fp16": "gpu_fp16_tflops"}
_HALF_DTYPES = ("float16", "bfloat16", "half")
#: Other spellings of a precision in imported tables: mixed precision (AMP) and bfloat16 run
#: their matrix products on the same tensor cores at the FP16 rate.
_PRECISION_ALIASES = {"amp": "fp16", "bf16": "fp16", "bfloat16": "fp16", "float16": "fp16",
                      "half": "fp16", "mixed": "fp16", "float32": "fp32"}


def _truthy(value: object) -> bool | None:
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return None
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes")
    return bool(value)


def precision_of(frame: pd.DataFrame) -> np.ndarray:
    """The precision of each row's matrix products: ``"fp16"``, ``"tf32"``, ``"fp32"`` or None.

    A ``precision`` column wins. Else, from what ``%%profile_training`` records: ``fp16`` under
    autocast (``arch_amp``) or with a half ``arch_dtype``; ``tf32`` in FP32 when TF32 was
    allowed for matrix multiplies (``arch_tf32_matmul``) or, in a network with convolutions,
    for cuDNN (``arch_tf32_conv``, PyTorch's default); ``fp32`` otherwise; None when the table
    says nothing (imported measurements): their figures stay as given.
    """
    n = len(frame)
    if "precision" in frame.columns:
        values = frame["precision"].astype(object).to_numpy()
        out = np.array([_PRECISION_ALIASES.get(v.strip().lower(), v.strip().lower())
                        if isinstance(v, str) and v.strip() else None
                        for v in values], dtype=object)
        bad = sorted({v for v in out if v is not None and v not in PRECISION_PEAKS})
        if bad:
            raise ValueError(f"column 'precision' must be one of "
                             f"{', '.join(PRECISION_PEAKS)}; found {bad[0]!r}")
        return out

    def column(name: str) -> list[object]:
        return frame[name].astype(object).tolist() if name in frame.columns else [None] * n

    amp, dtype = column("arch_amp"), column("arch_dtype")
    matmul, conv_tf32 = column("arch_tf32_matmul"), column("arch_tf32_conv")
    convs = column("arch_layers_conv")
    out = np.full(n, None, dtype=object)
    for i in range(n):
        kind = dtype[i]
        half = isinstance(kind, str) and kind.removeprefix("torch.") in _HALF_DTYPES
        if _truthy(amp[i]) or half:
            out[i] = "fp16"
        elif _truthy(amp[i]) is False or isinstance(dtype[i], str):
            has_conv = (_truthy(convs[i]) or False) and float(convs[i]) > 0  # type: ignore[arg-type]
            tf32 = _truthy(matmul[i]) or (_truthy(conv_tf32[i]) and has_conv)
            out[i] = "tf32" if tf32 else "fp32"
    return out


#: A TF32 tensor rate below this many times the FP32 figure gains a training step nothing
#: over it (:func:`effective_peak`). The catalog's ratios fall in two groups: 1-2 (GA10x,
#: AD10x, GB20x, whose FP32 figure counts both of an SM's dual-issue FP32 datapaths, and the
#: H20) and 7-15 (A100, H100, B200).
TF32_GAIN_FROM = 2.5


def effective_peak(fp32: float, tensor: float | None, precision: str | None = None) -> float:
    """TFLOPS a training step's matrix products reach on tensor cores, for moving between GPUs.

    The geometric mean of the FP32 peak and the tensor peak (never below the FP32 peak; a GPU
    without the tensor figure keeps its FP32 peak: cuBLAS computes in FP32 there). It matches
    public training speedups where the full tensor peak overshoots: V100 FP32 → AMP 1.9× with
    the bandwidth term (Dell measured 1.65-1.91× on ResNet-50), P100 → V100 in FP16 2.1×
    (measured 2.03-2.24×), V100 FP32 → A100 TF32 2.8× (NVIDIA: 2-5×).

    ``precision`` "tf32" (the class of ``tensor``; any other, or None, takes the mean): a
    TF32 rate under :data:`TF32_GAIN_FROM` times the FP32 figure counts as the FP32 figure.
    On those GPUs (the A10, A40, L4, L40S, the RTX A- and Ada-generation cards) the FP32
    figure already counts both dual-issue datapaths, and
    lambda2025's TF32 runs there are as slow against AMP as Turing's FP32 runs are (median
    log time-per-sample ratio 0.61 against Turing's 0.64-0.73; the A100s and H100s, TF32 at
    8× FP32, 0.39-0.45): the geometric mean had made them √2 faster than FP32.
    """
    if tensor is None or not np.isfinite(tensor) or tensor <= fp32:
        return float(fp32)
    if precision == "tf32" and tensor < TF32_GAIN_FROM * fp32:
        return float(fp32)
    return float(np.sqrt(fp32 * tensor))


def _catalog_lookup(name: str) -> dict:
    try:
        from gpuperf_magics.hardware import catalog
    except ImportError as exc:  # pragma: no cover - the catalog ships with the package
        raise ValueError(
            f"cannot resolve GPU {name!r}: the hardware catalog is not available; give the "
            f"columns {', '.join(HARDWARE)} instead"
        ) from exc
    return dict(catalog.lookup(name))


def _precision_peaks(precision: np.ndarray, hw: dict[str, np.ndarray], rows: np.ndarray,
                     specs: dict, labels: np.ndarray, naive: np.ndarray) -> None:
    """Set the compute peak of ``rows`` (one named GPU) to their precision's rate, in place.

    ``naive`` gets the plain tensor peak of that precision (the spec-sheet ratio's figure).
    """
    fp32 = float(specs["gpu_fp32_tflops"])
    for kind in ("tf32", "fp16"):
        mask = rows & (precision == kind)
        if not mask.any():
            continue
        tensor = specs.get(PRECISION_PEAKS[kind])
        if tensor is not None and np.isfinite(tensor):
            naive[mask] = max(float(tensor), fp32)
        hw["gpu_fp32_tflops"][mask] = effective_peak(fp32, tensor, kind)
        # Named by the precision where it has a tensor peak above FP32, and under AMP/FP16
        # always: a GPU without one (GTX 1080 Ti) still runs FP16 and AMP as a device of its
        # own, and a TF32 run on an A10 (its rate the FP32 one's) is one apart from FP32 runs.
        above = tensor is not None and bool(np.isfinite(tensor)) and tensor > fp32
        if above or kind == "fp16":
            labels[mask] = [f"{label} ({kind.upper()})" for label in labels[mask]]


def _catalog_lookup_quiet(name: str) -> dict:
    """The catalog's figures, or none when the name does not resolve (figures were given)."""
    try:
        return _catalog_lookup(name)
    except (ValueError, KeyError, LookupError):
        return {}


def prepare(x: object, ignore: Sequence[str] = (), prefer_catalog: bool = False) -> Prepared:
    """Validate a table and return its numeric features.

    Parameters
    ----------
    x : DataFrame or 2-D numeric array
        The canonical table (extra columns are ignored) or a plain feature array.
    ignore : str or sequence of str, default ()
        Further columns not to use as features (hardware columns included).
    prefer_catalog : bool, default False
        Use the catalog's per-device figures where a given ``gpu_*`` figure of a resolvable
        ``gpu`` name differs from them by more than :data:`CATALOG_TOLERANCE`.

    Raises
    ------
    ValueError
        Empty table; a feature that is not numeric, NaN or infinite; a ``batch_size``,
        ``iterations`` or hardware value that is not positive; an unknown GPU name (the message
        lists close matches); CPU and GPU runs mixed in one network (hardware columns are NaN
        on the rows of networks measured only on the CPU).
    """
    frame = _as_frame(x)
    if len(frame) == 0:
        raise ValueError("X has no rows")
    ignore = [ignore] if isinstance(ignore, str) else list(ignore)
    frame = frame.reset_index(drop=True)
    if "network" in frame.columns:
        net = frame["network"]
        if net.isna().any():
            raise ValueError("column 'network' has missing values; name every network")
        network: np.ndarray | None = net.astype(str).to_numpy()
    else:
        network = None
    iterations = (
        _numeric(frame, "iterations") if "iterations" in frame.columns else np.ones(len(frame))
    )
    hw, labels, arch, naive, device = _resolve_hardware(frame, prefer_catalog)
    columns: dict[str, np.ndarray] = {}
    for col in frame.columns:
        if _is_feature_column(frame, str(col), ignore) and col not in HARDWARE:
            columns[str(col)] = _numeric(frame, str(col))
    for col in HARDWARE:
        values = hw[col].to_numpy(dtype=float)
        if col in ignore or np.all(np.isnan(values)):
            continue
        if np.any(np.isnan(values)):
            # A CPU network beside GPU networks is fine (one model each); within one network
            # CPU and GPU runs cannot share a model.
            nets = network if network is not None else np.full(len(values), "*")
            mixed = [n for n in pd.unique(nets)
                     if 0 < np.isnan(values[nets == n]).sum() < (nets == n).sum()]
            if mixed:
                missing = labels[np.isnan(values) & (nets == mixed[0])][0]
                name = "" if network is None else f" of network {mixed[0]!r}"
                raise ValueError(
                    f"column {col!r} is missing for some rows{name} (e.g. {missing}); CPU and "
                    "GPU runs, or GPUs the catalog lacks this figure for, cannot share one "
                    f"model: fit them separately or fill {col!r}"
                )
        columns[col] = values
    features = pd.DataFrame(columns)
    checks = {"iterations": iterations, **columns}
    for col, values in checks.items():
        if col in HARDWARE:
            values = values[~np.isnan(values)]  # whole networks without a GPU (checked above)
        if not np.all(np.isfinite(values)):
            raise ValueError(
                f"column {col!r} has NaN or infinite values; fill them or pass "
                f"ignore=[{col!r}]"
            )
        if col in POSITIVE and np.any(values <= 0):
            raise ValueError(f"column {col!r} must be positive; found {values.min():g}")
        if col == "gpu_count" and np.any(values < 0):
            raise ValueError(f"column 'gpu_count' must be >= 0; found {values.min():g}")
    return Prepared(features, iterations, network, labels, arch, naive, device)


def check_method(method: str, regressor: str) -> None:
    """Raise ValueError unless ``method`` and ``regressor`` are ones the estimators know."""
    if method not in ("default", "paper"):
        raise ValueError(f"method must be 'default' or 'paper', not {method!r}")
    if regressor not in ("ridge", "nnls"):
        raise ValueError(f"regressor must be 'ridge' or 'nnls', not {regressor!r}")


#: The share of outcomes an interval holds unless asked otherwise: the one default of the
#: package (the prediction layer, the panel and the CLI take theirs from here).
DEFAULT_COVERAGE = 0.8


def check_coverage(coverage: float) -> float:
    """``coverage`` if it is strictly between 0 and 1 (an interval's share); else ValueError."""
    if not 0 < coverage < 1:
        raise ValueError(f"coverage must be in (0, 1), not {coverage!r}")
    return coverage


def check_target(y: object, n: int) -> np.ndarray:
    """Seconds as a positive finite float array of length ``n``."""
    if y is None:
        raise ValueError("this estimator requires y to be passed, but the target y is None "
                         "(give the seconds each row took)")
    shape = np.shape(y)  # type: ignore[call-overload]
    if len(shape) == 2 and shape[1] == 1:
        import warnings

        from sklearn.exceptions import DataConversionWarning

        warnings.warn("A column-vector y was passed when a 1d array was expected: it is read "
                      "as one value per row", DataConversionWarning, stacklevel=3)
    try:
        arr = np.asarray(y, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError("y (time_s) must be numeric seconds") from exc
    arr = arr.reshape(-1) if arr.ndim == 2 and 1 in arr.shape else arr
    if arr.ndim != 1 or len(arr) != n:
        raise ValueError(f"y (time_s) must have one value per row of X ({n}); got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("y (time_s) has NaN or infinite values; drop failed runs first")
    if np.any(arr <= 0):
        raise ValueError(f"y (time_s) must be positive seconds; found {arr.min():g}")
    return arr
