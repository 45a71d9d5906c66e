"""GPU memory a batch needs: the peak a profiled run measured, scaled to another batch size.

A training step holds the model, its gradients and the optimizer state (a fixed part, the
same at any batch size) and the activations of the batch (a part per sample). With peaks
measured at two or more batch sizes, :func:`peak_memory` fits both parts (least squares on the
median peak of each batch size). With peaks at one batch size only, it scales the peak in
proportion to the batch: the fixed part is scaled too, so a larger batch is said to need more
than it does (a cautious mark) and a smaller one less; the caveat says so.

The peak is what the run's tensors took (``torch.cuda.max_memory_allocated``), not what the
CUDA context and the caching allocator add: :data:`HEADROOM` of a GPU's memory is kept back
for them when :func:`fits` compares a need with a GPU.

:func:`memory_columns` puts the figures on every row of a prediction: the peak that row's
configuration needs on one GPU, what its GPU has, whether it fits and the largest power-of-two
batch that would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "HEADROOM",
    "MEMORY_COLUMNS",
    "PeakMemory",
    "fits",
    "gpu_memory_gb",
    "largest_batch",
    "memory_columns",
    "peak_memory",
]

#: Share of a GPU's memory not available to tensors: the CUDA context (some hundred MB), the
#: caching allocator's reserve and fragmentation.
HEADROOM = 0.1
#: Columns :func:`memory_columns` adds to a prediction's rows.
MEMORY_COLUMNS = ("memory_gb", "gpu_memory_gb", "fits", "largest_batch")
#: Largest batch :func:`largest_batch` tries (2**24): beyond it a batch is no answer, and a
#: peak that did not grow with the batch fits at any size.
_MAX_EXPONENT = 24
#: Columns that make a row's ``batch_size`` the global batch of its GPUs (split over them),
#: as :mod:`~gpuperf_magics.model.data_parallel` reads a query.
_GLOBAL = ("global_batch_size", "local_batch_size")
#: Columns a depth can be read from: a row asked at another depth than the runs' latest scales
#: its peak in proportion (weights and activations both grow about with the depth).
_DEPTHS = ("depth", "arch_depth")


@dataclass(frozen=True)
class PeakMemory:
    """Peak GPU memory of a network's training step as a function of its batch size.

    Attributes
    ----------
    fixed_gb, per_sample_gb : float
        GiB at any batch size (weights, gradients, optimizer state) and GiB per sample.
    batch_sizes : tuple of int
        Batch sizes whose measured peaks the figures come from.
    caveat : str
        How the figures were found, and what that means for a batch not measured.
    """

    fixed_gb: float
    per_sample_gb: float
    batch_sizes: tuple[int, ...]
    caveat: str

    def needed_gb(self, batch_size: int, gpus: int = 1) -> float:
        """GiB one GPU needs for a global ``batch_size`` split over ``gpus`` (data parallel:
        each GPU holds the whole model and its share of the batch). A prediction's
        ``batch_size`` on several GPUs is the per-GPU batch (weak scaling, as the predictor
        reads it) unless the row names a global one: :func:`memory_columns` says which."""
        per_gpu = math.ceil(batch_size / max(gpus, 1))
        return self.fixed_gb + self.per_sample_gb * per_gpu


def peak_memory(runs: pd.DataFrame) -> PeakMemory | None:
    """The peak-memory figures of one network's runs; None when no run measured its peak.

    Parameters
    ----------
    runs : DataFrame
        Runs of one network with ``batch_size``, ``gpu_count`` and ``peak_memory_gb`` (GiB,
        empty where unknown: CPU runs, imports without it, runs of older stores).
    """
    import numpy as np

    if "peak_memory_gb" not in runs:
        return None
    # Plain arrays: the panel asks at every change, and pandas' groupby costs milliseconds.
    peak = runs["peak_memory_gb"].to_numpy(dtype=float, na_value=np.nan)
    batch = runs["batch_size"].to_numpy(dtype=float, na_value=np.nan)
    known = np.isfinite(peak) & np.isfinite(batch) & (batch > 0)
    if not known.any():
        return None
    # A data-parallel run's batch is its rank's share; single-device runs say it plainly.
    count = runs["gpu_count"].to_numpy(dtype=float, na_value=0.0)
    single = known & (count <= 1)
    use = single if single.any() else known
    sizes = batch[use].astype(int)
    batches = tuple(int(b) for b in np.unique(sizes))
    x = np.array(batches, dtype=float)
    y = np.array([np.median(peak[use][sizes == b]) for b in batches])
    measured = ", ".join(str(b) for b in batches)
    if len(batches) >= 2:
        slope, intercept = np.polyfit(x, y, 1)
        if slope > 0 and intercept >= 0:
            return PeakMemory(float(intercept), float(slope), batches,
                              f"fixed part and part per sample fitted to the peaks at batch "
                              f"{measured}")
        if slope > 0:  # a negative fixed part is noise around a proportional growth
            per_sample = float(np.dot(x, y) / np.dot(x, x))
            return PeakMemory(0.0, per_sample, batches,
                              f"proportional to the batch, fitted to the peaks at batch "
                              f"{measured}")
        return PeakMemory(float(y.max()), 0.0, batches,
                          f"the largest peak of batch {measured} (it did not grow with the "
                          "batch there)")
    (only,) = batches
    return PeakMemory(0.0, float(y[0]) / only, batches,
                      f"scaled in proportion from the peak at batch {only} (measured at one "
                      "batch size only: a larger batch is said to need more than it does, a "
                      "smaller one less; profile a second batch size to fit the fixed part)")


def fits(needed_gb: float, gpu_memory_gb: float | None) -> bool | None:
    """Whether ``needed_gb`` fits a GPU of ``gpu_memory_gb`` after :data:`HEADROOM`; None
    when either is unknown."""
    if gpu_memory_gb is None or not math.isfinite(gpu_memory_gb) or not math.isfinite(
            needed_gb):
        return None
    return bool(needed_gb <= (1 - HEADROOM) * gpu_memory_gb)  # not numpy's bool: "is False"


def largest_batch(model: PeakMemory, gpu_memory_gb: float | None, gpus: int = 1,
                  scale: float = 1.0) -> int | None:
    """The largest power-of-two batch (over ``gpus``, data parallel) whose peak, times
    ``scale``, :func:`fits` a GPU of ``gpu_memory_gb``: 0 when not even batch 1 does, None
    when the GPU's size is unknown or the peak did not grow with the batch (any batch would)."""
    if fits(model.needed_gb(1, gpus) * scale, gpu_memory_gb) is None:
        return None
    if model.per_sample_gb <= 0:
        return None if fits(model.fixed_gb * scale, gpu_memory_gb) else 0
    best = 0
    for exponent in range(_MAX_EXPONENT + 1):
        if not fits(model.needed_gb(2 ** exponent, gpus) * scale, gpu_memory_gb):
            break
        best = 2 ** exponent
    return best


def gpu_memory_gb(gpu: str | None, runs: pd.DataFrame | None = None) -> float | None:
    """GiB the GPU ``gpu`` has: the total memory the latest of ``runs`` on it recorded (a MIG
    slice or a board sold in two sizes is what the run saw), else the catalog's figure; None
    for the CPU or a GPU nobody knows the size of."""
    import pandas as pd

    from gpuperf_magics.hardware.catalog import UnknownGPUError, lookup

    if not isinstance(gpu, str) or not gpu:
        return None
    if runs is not None and "gpu_memory_gb" in runs and "gpu" in runs:
        recorded = pd.to_numeric(runs.loc[runs["gpu"] == gpu, "gpu_memory_gb"],
                                 errors="coerce").dropna()
        if len(recorded) and math.isfinite(recorded.iloc[-1]) and recorded.iloc[-1] > 0:
            return float(recorded.iloc[-1])
    try:
        size = float(lookup(gpu)["gpu_memory_gb"])
    except (UnknownGPUError, KeyError, TypeError, ValueError):
        return None
    return size if math.isfinite(size) and size > 0 else None


def memory_columns(frame: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (a prediction's rows: ``batch_size``, ``gpu``, ``gpu_count``) with the
    :data:`MEMORY_COLUMNS` added.

    - ``memory_gb``: GiB one GPU needs for the row's batch (the per-GPU batch on several GPUs,
      as the predictor reads it: ``batch_size`` held per GPU, or a ``global_batch_size``
      split over them, or the ``local_batch_size`` given; :func:`peak_memory` of the runs of
      the row's network, or of all ``runs`` where ``frame`` has no ``network`` column; the
      runs at the latest run's architecture where they vary in it, and a row at another
      depth scaled in proportion). NaN for a CPU row and where no run measured its peak.
    - ``gpu_memory_gb``: GiB the row's GPU has (:func:`gpu_memory_gb`); NaN for the CPU or
      an unknown GPU.
    - ``fits`` (nullable boolean): :func:`fits`; NA where either figure is unknown.
    - ``largest_batch`` (nullable integer): :func:`largest_batch` on the row's GPU, in the
      row's own batch terms (per GPU, or global where the row names a global batch); NA
      where unknown.
    """
    import pandas as pd

    out = frame.copy()
    needed, capacity, verdict, largest = [], [], [], []
    by_network: dict[object, tuple[PeakMemory | None, pd.Series | None]] = {}
    for _, row in frame.iterrows():
        net = row["network"] if "network" in frame.columns else None
        if net not in by_network:
            mine = runs if net is None or "network" not in runs else \
                runs[runs["network"].astype(str) == str(net)]
            by_network[net] = _network_peak(mine)
        model, latest = by_network[net]
        gpu = row["gpu"] if isinstance(row["gpu"], str) and row["gpu"] else None
        size = gpu_memory_gb(gpu, runs)
        count = 1 if pd.isna(row.get("gpu_count")) else max(1, int(row["gpu_count"]))
        # The batch as the predictor reads it on several GPUs (model.data_parallel): held per
        # GPU (weak scaling) unless the row names the global batch beside it.
        split = count if any(pd.notna(row.get(c)) for c in _GLOBAL) else 1
        if model is None or gpu is None or latest is None:
            needed.append(math.nan)
            verdict.append(pd.NA)
            largest.append(pd.NA)
        else:
            scale = _depth_scale(row, latest)
            local = row.get("local_batch_size")
            need = scale * (model.needed_gb(int(local)) if pd.notna(local) else
                            model.needed_gb(_global_batch(row), split))
            ok = fits(need, size)
            top = largest_batch(model, size, split, scale)
            needed.append(need)
            verdict.append(pd.NA if ok is None else ok)
            largest.append(pd.NA if top is None else top)
        capacity.append(math.nan if size is None else size)
    out["memory_gb"] = pd.Series(needed, index=frame.index, dtype=float)
    out["gpu_memory_gb"] = pd.Series(capacity, index=frame.index, dtype=float)
    out["fits"] = pd.Series(verdict, index=frame.index, dtype="boolean")
    out["largest_batch"] = pd.Series(largest, index=frame.index, dtype="Int64")
    return out


def _global_batch(row: pd.Series) -> int:
    """The row's batch over all its GPUs where it names one, else its ``batch_size``."""
    import pandas as pd

    total = row.get("global_batch_size")
    return int(total) if pd.notna(total) else int(row["batch_size"])


def _network_peak(runs: pd.DataFrame) -> tuple[PeakMemory | None, pd.Series | None]:
    """The peak model of one network's runs, fitted at the latest run's architecture (its
    parameter count) where the runs vary in it, and that latest run (None: no runs)."""
    import pandas as pd

    if len(runs) == 0:
        return None, None
    latest = runs.iloc[-1]
    same = runs
    if "arch_params" in runs and runs["arch_params"].notna().any():
        same = runs[runs["arch_params"] == latest["arch_params"]]
    for col in _DEPTHS:  # imported tables give a depth column and no parameter count
        if col in same and same[col].nunique() > 1 and pd.notna(latest.get(col)):
            same = same[same[col] == latest[col]]
    return peak_memory(same), latest


def _depth_scale(row: pd.Series, latest: pd.Series) -> float:
    """How much deeper the row's network is than the latest run's (1 where neither says)."""
    for col in _DEPTHS:
        asked, ran = row.get(col), latest.get(col)
        try:
            asked, ran = float(asked), float(ran)
        except (TypeError, ValueError):
            continue
        if math.isfinite(asked) and math.isfinite(ran) and ran > 0 and asked > 0:
            return asked / ran
    return 1.0
