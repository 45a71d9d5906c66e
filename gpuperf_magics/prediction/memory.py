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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["HEADROOM", "PeakMemory", "fits", "peak_memory"]

#: Share of a GPU's memory not available to tensors: the CUDA context (some hundred MB), the
#: caching allocator's reserve and fragmentation.
HEADROOM = 0.1


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
        """GiB one GPU needs for ``batch_size`` split over ``gpus`` (data parallel: each GPU
        holds the whole model and its share of the batch, as the predictor assumes)."""
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
    return needed_gb <= (1 - HEADROOM) * gpu_memory_gb
