"""Data-parallel moves: a network measured on one GPU, asked for 2, 4 or 8 GPUs of one node.

Data parallelism (PyTorch DDP) runs the same step on every GPU, each on its own share of the
batch, then averages the gradients. The time of a step on ``N`` GPUs is

    t_N = t_1(per-GPU batch) + exposed all-reduce

- ``t_1(b)``: the one-GPU step at the per-GPU batch ``b``, from the measured series (its batch
  route: a measured batch is its median, another batch a move along the batch axis). Held
  per-GPU batch (*weak scaling*: each GPU does what one GPU did) is the default reading of a
  query; a query that names the global batch (``global_batch_size``, or ``batch_size`` with a
  ``local_batch_size`` beside it, as sia2023 records it) is split over the GPUs: ``b = B / N``
  (*strong scaling*), said in the ``detail``.
- The gradient all-reduce, a ring (NCCL's default within a node): every GPU sends and receives
  ``2 (N − 1) / N`` times the gradient bytes (parameters × 4 bytes for FP32 gradients; 2 where
  the model itself is half precision: under autocast the parameters and their gradients stay
  FP32), over the node's interconnect at :data:`RING_EFFICIENCY` of its nominal per-direction
  bandwidth, plus NCCL's latency: a base per call and a per-step latency for each of the
  ``2 (N − 1)`` ring steps (Ring/Simple figures of NCCL's own tuning model, ``src/graph/
  tuning.cc``: base 8.4 µs, 3.4 µs per step over NVLink, 5.7 µs over PCIe; quoted in
  https://github.com/NVIDIA/nccl/issues/1334; ``2 (N − 1) × latency`` is the ring's latency law
  as NCCL's maintainer confirms in https://github.com/NVIDIA/nccl-tests/issues/123).
- Overlap: DDP all-reduces gradients in buckets of 25 MiB (its ``bucket_cap_mb`` default) while
  the backward pass still computes the rest, so only what outlasts the backward pass shows:
  ``max(all-reduce − backward, last bucket)``, the backward pass taken as
  :data:`BACKWARD_SHARE` of the step (about twice the forward pass's FLOPs), and the last bucket
  (the first layers' gradients, ready only when the backward pass ends) never hidden.

The interconnect belongs to a system or an instance, not to a GPU: ``hardware/interconnects.csv``
records the known ones (AWS p3/p4d/p5, g4dn, Azure NDv2/NDv4, DGX/HGX boards) with their
sources; a query names one in a ``system`` (or ``instance``) column, an SXM GPU implies its NVLink
board, and anything else falls back to PCIe of the GPU architecture's generation, said in the
``detail``. :func:`scale_out` is the default model's hook for these queries.
"""

from __future__ import annotations

import csv
import functools
import math
import re
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: Achieved share of the nominal per-direction link bandwidth in a ring all-reduce (NCCL reaches
#: about three quarters of it on large messages; an assumption, the same for every link).
RING_EFFICIENCY = 0.75
#: NCCL's base latency of one all-reduce call (Ring, Simple protocol), seconds.
BASE_LATENCY_S = 8.4e-6
#: NCCL's latency per ring step (Ring, Simple), seconds, by kind of link.
HOP_LATENCY_S = {"nvlink": 3.4e-6, "pcie": 5.7e-6}
#: DDP's gradient bucket (``bucket_cap_mb=25``), bytes.
BUCKET_BYTES = 25 * 2**20
#: Share of a training step the backward pass takes (about 2× the forward pass's work).
BACKWARD_SHARE = 2 / 3
#: PCIe x16 bandwidth per direction, GB/s, by generation (8 GT/s × 128b/130b × 16 lanes / 8 =
#: 15.75 for Gen3; each generation doubles it; "PCIe 5.0 roughly 128 GB/s" both ways together:
#: https://www.aiminingco.com/glossary/nvlink).
PCIE_GBS = {3: 15.75, 4: 31.5, 5: 63.0}
#: The PCIe generation of each GPU architecture's cards (the fallback without a known system).
PCIE_GENERATION = {"Kepler": 3, "Maxwell": 3, "Pascal": 3, "Volta": 3, "Turing": 3,
                   "Ampere": 4, "Ada": 4, "Ada Lovelace": 4, "Hopper": 5, "Blackwell": 5}
#: Bytes of one gradient element by the model's dtype (``arch_dtype``); FP32 otherwise.
GRAD_BYTES = {"float16": 2, "bfloat16": 2, "half": 2, "float64": 8, "double": 8}
#: Columns a query may name its system or cloud instance in.
SYSTEM_COLUMNS = ("system", "instance", "instance_type")
#: Interval of the all-reduce term: from LOW × to HIGH × the exposed time (bandwidths reached
#: vary from full overlap to a host-staged ring several times slower than the link).
LOW, HIGH = 0.0, 3.0
#: Widening of the one-GPU interval per doubling of the GPUs (log scale, up and down): jobs on
#: more GPUs of one node run slower than their all-reduce explains (the host's loaders and
#: launches shared by N processes, stragglers). One figure chosen on the public multi-GPU
#: tables (benchmarks/gpu_count.py: the default's 80% interval then covers 75% of sia2023's
#: rows and 90% of lambda2025's), not a physical law.
SPREAD_UP, SPREAD_DOWN = 0.15, 0.05


@dataclass(frozen=True)
class Interconnect:
    """The link a ring all-reduce runs over: per-GPU, per-direction bandwidth and latency."""

    name: str
    link: str
    bandwidth_gbs: float
    hop_latency_s: float
    known: bool  # from a row of interconnects.csv, not the PCIe fallback
    note: str = ""

    def describe(self) -> str:
        text = f"{self.link} {self.bandwidth_gbs:g} GB/s per direction ({self.name})"
        return f"{text}; {self.note}" if self.note else text


@functools.lru_cache(maxsize=1)
def interconnects() -> tuple[dict[str, str], ...]:
    """The rows of ``hardware/interconnects.csv`` (comment lines skipped)."""
    text = resources.files("gpuperf_magics.hardware").joinpath("interconnects.csv").read_text(
        encoding="utf-8")
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    return tuple(dict(row) for row in csv.DictReader(lines))


def _from_row(row: dict[str, str]) -> Interconnect:
    link = row["link"]
    kind = "pcie" if link.lower().startswith("pcie") else "nvlink"
    return Interconnect(row["name"], link, float(row["bandwidth_gbs"]), HOP_LATENCY_S[kind], True)


def interconnect(gpu: str | None, system: str | None = None,
                 architecture: str | None = None) -> Interconnect:
    """The interconnect of ``gpu`` GPUs in ``system`` (an instance type or a server's name).

    A named system that a row matches wins; then the board an SXM GPU implies; then PCIe of
    the GPU architecture's generation (from ``architecture`` or the catalog; Gen3 when unknown),
    with a note saying so.
    """
    rows = interconnects()
    if system and isinstance(system, str):
        for row in rows:
            if re.search(row["match"], system, flags=re.IGNORECASE):
                return _from_row(row)
    name = gpu if isinstance(gpu, str) else ""
    for row in rows:
        if row["gpu"] and name and re.search(row["gpu"], name, flags=re.IGNORECASE):
            return _from_row(row)
    if architecture is None and name:
        from gpuperf_magics.hardware import catalog

        found = catalog.match(name)
        architecture = catalog.lookup(found).get("gpu_architecture") if found else None
    generation = PCIE_GENERATION.get(str(architecture), 3)
    where = f"system {system!r} not recorded" if system else "no system named"
    note = (f"{where}: PCIe Gen{generation} assumed"
            + ("" if architecture in PCIE_GENERATION else " (architecture unknown)"))
    return Interconnect(f"PCIe fallback for {name or 'this GPU'}", f"PCIe {generation}.0 x16",
                        PCIE_GBS[generation], HOP_LATENCY_S["pcie"], False, note)


def grad_bytes(params: float, dtype: object = None) -> float:
    """Bytes of the gradients of ``params`` parameters: 4 each unless the model is half."""
    key = str(dtype).removeprefix("torch.") if isinstance(dtype, str) else ""
    return float(params) * GRAD_BYTES.get(key, 4)


def allreduce_seconds(nbytes: float, n: int, link: Interconnect) -> float:
    """Seconds of a ring all-reduce of ``nbytes`` over ``n`` GPUs, in DDP buckets.

    ``buckets × (base + 2 (n − 1) × hop latency) + 2 (n − 1) / n × nbytes / bandwidth``, the
    bandwidth being :data:`RING_EFFICIENCY` of the link's nominal figure. 0 for one GPU.
    """
    if n <= 1 or nbytes <= 0:
        return 0.0
    buckets = math.ceil(nbytes / BUCKET_BYTES)
    latency = buckets * (BASE_LATENCY_S + 2 * (n - 1) * link.hop_latency_s)
    rate = link.bandwidth_gbs * 1e9 * RING_EFFICIENCY
    return latency + 2 * (n - 1) / n * nbytes / rate


def exposed_seconds(step_s: float, nbytes: float, n: int, link: Interconnect) -> float:
    """The part of the all-reduce the backward pass does not hide (see the module docstring):
    ``max(all-reduce − BACKWARD_SHARE × step, all-reduce of the last bucket)``."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    total = allreduce_seconds(nbytes, n, link)
    last = allreduce_seconds(min(nbytes, BUCKET_BYTES), n, link)
    return max(total - BACKWARD_SHARE * step_s, last)


def step_seconds(step_1gpu_s: float, params: float, n: int, link: Interconnect,
                 dtype: object = None) -> float:
    """Seconds of one data-parallel step on ``n`` GPUs: the one-GPU step at the per-GPU batch
    plus the exposed all-reduce of the gradients of ``params`` parameters."""
    return step_1gpu_s + exposed_seconds(step_1gpu_s, grad_bytes(params, dtype), n, link)


# ---------------------------------------------------------------------------- the model's hook
def _measured_counts(local: Any) -> set[float]:
    index = local.index
    if "gpu_count" not in index.cols:
        return {1.0}
    return {float(v) for v in index.values[:, index.cols.index("gpu_count")]}


def _rows_to_move(model: Any, X: pd.DataFrame) -> np.ndarray:
    """Positions of queries for more GPUs than one whose network was measured on one GPU only
    (where runs vary the count, the measured series along it answers, as for any feature)."""
    import pandas as pd

    counts = pd.to_numeric(X["gpu_count"], errors="coerce").to_numpy(float)
    nets = (X["network"].astype(str).to_numpy() if "network" in X.columns
            else np.full(len(X), "*"))
    keep = np.zeros(len(X), dtype=bool)
    for i, (net, n) in enumerate(zip(nets, counts, strict=True)):
        local = model.local_.get(net)
        if local is None or not np.isfinite(n) or n <= 1:
            continue
        keep[i] = _measured_counts(local) == {1.0}
    return np.flatnonzero(keep)


def _one_gpu_queries(X: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    """The same queries on one GPU at their per-GPU batch; that batch, and how it was read."""
    import pandas as pd

    one = X.copy()
    n = pd.to_numeric(one["gpu_count"], errors="coerce").to_numpy(float)
    how = []
    if "local_batch_size" in one.columns:
        per_gpu = pd.to_numeric(one["local_batch_size"], errors="coerce").to_numpy(float)
        how = ["weak scaling: per-GPU batch held"] * len(one)
        if "batch_size" in one.columns:
            one["batch_size"] = per_gpu
    elif "global_batch_size" in one.columns and one["global_batch_size"].notna().all():
        total = pd.to_numeric(one["global_batch_size"], errors="coerce").to_numpy(float)
        per_gpu = total / n
        how = [f"global batch {t:g} split over {c:g} GPUs (strong scaling), per-GPU batch "
               "through the batch route" for t, c in zip(total, n, strict=True)]
        one["batch_size"] = per_gpu
        one["global_batch_size"] = per_gpu
    else:
        per_gpu = pd.to_numeric(one["batch_size"], errors="coerce").to_numpy(float)
        how = ["weak scaling: per-GPU batch held"] * len(one)
    one["gpu_count"] = 1
    if "world_size" in one.columns:
        one["world_size"] = 1
    return one, per_gpu, how


def _column(X: pd.DataFrame, names: tuple[str, ...] | str, i: int) -> Any:
    for name in (names,) if isinstance(names, str) else names:
        if name in X.columns:
            value = X[name].iloc[i]
            if isinstance(value, str) or (value is not None and value == value):
                return value
    return None


def scale_out(model: Any, X: Any, out: pd.DataFrame, coverage: float) -> pd.DataFrame:
    """The default model's predictions with data-parallel moves answered (see the module
    docstring): every query for ``N > 1`` GPUs of a network measured on one GPU only becomes
    the one-GPU query at its per-GPU batch (predicted by ``model`` as any other) plus the
    exposed all-reduce; ``kind`` "extrapolation" (the one-GPU query's kind where that is a
    transfer or a new network), the ``detail`` says how.

    ``out`` is changed in place and returned; other queries are left as they are.
    """
    import pandas as pd

    if not isinstance(X, pd.DataFrame) or "gpu_count" not in X.columns:
        return out
    rows = _rows_to_move(model, X)
    if len(rows) == 0:
        return out
    queries = X.iloc[rows]
    one, per_gpu, how = _one_gpu_queries(queries)
    base = model.predict_table(one, coverage=coverage)
    for k, row in enumerate(rows):
        _fill(out, row, queries, k, base.iloc[k], per_gpu[k], how[k])
    return out


def _fill(out: pd.DataFrame, row: int, queries: pd.DataFrame, k: int, base: pd.Series,
          per_gpu: float, how: str) -> None:
    """Write one data-parallel prediction into row ``row`` of ``out``."""
    n = int(float(queries["gpu_count"].iloc[k]))
    its = float(queries["iterations"].iloc[k]) if "iterations" in queries.columns else 1.0
    step = float(base["per_iteration_s"])
    params = _column(queries, "arch_params", k)
    link = interconnect(_column(queries, "gpu", k), _column(queries, SYSTEM_COLUMNS, k))
    if params is None or not float(params) > 0:
        extra, comm = 0.0, 0.0
        why = "no all-reduce term: the parameter count (arch_params) is unknown"
    else:
        nbytes = grad_bytes(float(params), _column(queries, "arch_dtype", k))
        comm = allreduce_seconds(nbytes, n, link)
        extra = exposed_seconds(step, nbytes, n, link)
        why = (f"+ {1e3 * extra:.3g} ms all-reduce not hidden by the backward pass (ring of "
               f"2({n}−1)/{n} × {nbytes / 1e6:.4g} MB of gradients, {1e3 * comm:.3g} ms, over "
               f"{link.describe()})")
    total = float(base["time_s"]) + extra * its
    c = {name: out.columns.get_loc(name) for name in out.columns}
    out.iat[row, c["time_s"]] = total
    doublings = math.log2(n)
    low = float(base["time_low_s"]) * math.exp(-SPREAD_DOWN * doublings) + LOW * extra * its
    high = float(base["time_high_s"]) * math.exp(SPREAD_UP * doublings) + HIGH * extra * its
    out.iat[row, c["time_low_s"]] = min(low, total)
    out.iat[row, c["time_high_s"]] = max(high, total)
    out.iat[row, c["per_iteration_s"]] = total / its
    # A move along the count extrapolates; on top of a move to another GPU it stays a transfer.
    kind = str(base["kind"])
    out.iat[row, c["kind"]] = kind if kind in ("transfer", "new network") else "extrapolation"
    share = extra / (step + extra) if step + extra > 0 else 0.0
    out.iat[row, c["expected_mape"]] = math.hypot(float(base["expected_mape"]), 0.5 * share)
    out.iat[row, c["detail"]] = (
        f"{n} GPUs data parallel ({how}): per-GPU step {1e3 * step:.3g} ms at batch "
        f"{per_gpu:g} ({base['detail']!s}) {why}")
