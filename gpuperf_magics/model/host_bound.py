"""A host-bound network on another GPU: the host's time per iteration is a floor.

In eager PyTorch the host issues an iteration's kernels one by one
(:mod:`~gpuperf_magics.model.roofline`). A network whose kernels are short waits for the host,
not the GPU: on an H200 the tutorial-sized networks took 1.1-6 ms per iteration from batch 8 to
512 whatever their FLOPs (docs/figures/gpu_check.md). A GPU move by spec sheets or by other
workloads' ratios scales the whole time, and answers a faster GPU with a time the host cannot
issue; sia2023's NCF (about 10 ms per iteration) ran as fast on a T4 as on an A100 while the
peak ratio said 2.4× slower.

Every GPU row of a network measured on a GPU is held at or above its host's time per
iteration, the smaller of

- its fastest measured iteration on a GPU: the host's time is in every iteration, so no
  iteration is shorter (an upper bound of the host's time, reached where the run was
  host-bound), and
- the kernels its iterations launch (``arch_kernels`` with the loss and optimizer,
  :func:`~gpuperf_magics.model.roofline.iteration_ops`) at
  :data:`~gpuperf_magics.model.roofline.HOST_KERNEL_S` each (a bound that holds where the
  measured runs were bound by the GPU).

And a move (a batch the network was not measured at, another GPU) from a run that was
host-bound (its iteration within (1 + :data:`HOST_MARGIN`) of its kernels' host time) scales
only what the GPU did in it: the model's moved time times the share of the run its FLOPs take
at the roofline's efficiency (:func:`~gpuperf_magics.model.roofline.gpu_work_seconds`), never
less than the floor. Without it a run at batch 64 that waited for its host answered batch 256
with four times its time, and a slower GPU with the spec sheets' ratio of the whole time (an
H200 run of a 25.7K-parameter CNN: 46 ms on a T4, where the host alone needs about 2).

A row raised to the floor gets an interval of ±:data:`HOST_SPREAD` (hosts differ: the same
network took 1.96 and 2.39 ms per iteration on two H200 machines) and a ``detail`` that says
why. Runs without a kernel count (recorded before it, imported tables) change nothing: their
answers are the model's.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: Relative spread of a host's time per iteration from one machine to another (two H200 hosts
#: differed by 22% on the same network; a bare operator by 43%).
HOST_SPREAD = 0.3
#: A run is host-bound when its iteration takes at most (1 + this) × the host's time its
#: kernels take at HOST_KERNEL_S: what one host costs per kernel ranged 39-62 µs over five
#: networks on an H200 machine.
HOST_MARGIN = 0.5
#: The kinds of prediction whose source can be host-bound: a batch or a GPU the network was not
#: measured at (interpolations lie between measured points, which already say it).
MOVES = ("extrapolation", "transfer")


def apply_host_floor(table: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """``table`` (prediction rows with ``gpu``, ``batch_size``, ``kind``, ``per_iteration_s``,
    ``time_s``, ``time_low_s``, ``time_high_s``, ``detail``, ``expected_mape``) with the host's
    time as the floor of every GPU row, and the moves from a host-bound run scaled by the share
    of that run the GPU's work took (a copy; ``table`` is not changed)."""
    import numpy as np
    import pandas as pd

    host = _HostView.of(runs)
    if host is None or table.empty:
        return table
    per_it = table["per_iteration_s"].to_numpy(float)
    new = per_it.copy()
    bound = np.zeros(len(table), dtype=bool)
    kinds = table["kind"].astype(str).to_numpy()
    for i, (gpu, batch) in enumerate(zip(table["gpu"], table["batch_size"], strict=True)):
        if not isinstance(gpu, str) or not np.isfinite(per_it[i]):
            continue
        if kinds[i].startswith(MOVES):
            share = host.share_near(gpu if kinds[i].startswith("extrapolation") else None,
                                    float(batch))
            if share is not None:  # the source was host-bound: only its GPU work moves
                new[i] = share * per_it[i]
        bound[i] = new[i] < host.floor
        new[i] = max(new[i], host.floor)
    changed = np.abs(new - per_it) > 1e-12 * np.maximum(per_it, 1e-30)
    if not changed.any():
        return table
    out = table.copy()
    rows = out.index[changed]
    scale = pd.Series(new[changed] / per_it[changed], index=rows)
    out.loc[rows, "per_iteration_s"] = new[changed]
    for col in ("time_s", "time_low_s", "time_high_s"):
        out.loc[rows, col] = out.loc[rows, col] * scale
    floored = out.index[changed & bound]
    if len(floored):
        time = out.loc[floored, "time_s"]
        out.loc[floored, "time_low_s"] = time / (1 + HOST_SPREAD)
        out.loc[floored, "time_high_s"] = time * (1 + HOST_SPREAD)
        out.loc[floored, "expected_mape"] = out.loc[floored, "expected_mape"].clip(
            lower=HOST_SPREAD)
    note = pd.Series(np.where(bound[changed], "host-bound: the host needs about "
                              f"{_ms(host.floor)} per iteration on any GPU (its kernel launches)",
                              "host-bound where measured: only the GPU's share of the time "
                              "moved"), index=rows)
    out.loc[rows, "detail"] = note + "; " + out.loc[rows, "detail"].astype(str)
    return out


class _HostView:
    """A network's GPU runs seen from the host: the floor and each run's GPU-work share."""

    def __init__(self, floor: float, runs: list[tuple[str, float, float | None]]) -> None:
        self.floor = floor
        self.runs = runs  # (gpu, batch, share of the run's time the GPU's work took, or None)

    @classmethod
    def of(cls, runs: pd.DataFrame) -> _HostView | None:
        import pandas as pd

        from gpuperf_magics.model.roofline import (
            HOST_KERNEL_S,
            gpu_work_seconds,
            iteration_ops,
        )

        if "arch_kernels" not in runs.columns or "gpu" not in runs.columns:
            return None
        ok = runs["status"].eq("ok") if "status" in runs.columns else True
        on_gpu = runs[runs["gpu"].notna() & ok]
        times = pd.to_numeric(on_gpu.get("it_median_s"), errors="coerce")
        on_gpu = on_gpu[times > 0]
        counted = on_gpu[pd.to_numeric(on_gpu["arch_kernels"], errors="coerce").notna()]
        if counted.empty:
            return None
        latest = counted.iloc[-1]
        arch = {k: latest[k] for k in latest.index
                if str(k).startswith("arch_") or k == "optimizer"}
        issue = iteration_ops(arch)["kernels"] * HOST_KERNEL_S
        t = pd.to_numeric(on_gpu["it_median_s"]).to_numpy(float)
        floor = min(float(t.min()), issue)
        if not (floor > 0 and math.isfinite(floor)):
            return None
        seen = []
        for (_, run), ti in zip(on_gpu.iterrows(), t, strict=True):
            share = None
            if ti <= (1 + HOST_MARGIN) * issue:
                work = gpu_work_seconds(arch, _figures(run), int(run["batch_size"]),
                                        int(run.get("gpu_count", 1) or 1))
                share = min(work / ti, 1.0) if work is not None and work >= 0 else None
            seen.append((str(run["gpu"]), float(run["batch_size"]), share))
        return cls(floor, seen)

    def share_near(self, gpu: str | None, batch: float) -> float | None:
        """The GPU-work share of the run nearest ``batch`` (log distance) on ``gpu`` (any GPU
        when None); None where that run was not host-bound."""
        candidates = [r for r in self.runs if gpu is None or r[0] == gpu]
        if not candidates or not batch > 0:
            return None
        near = min(candidates, key=lambda r: abs(math.log(r[1] / batch)) if r[1] > 0 else 1e9)
        return near[2]


def _figures(run: pd.Series) -> dict[str, object]:
    """A run's GPU figures; the catalog's where the run lacks its peak (an imported row)."""
    import pandas as pd

    from gpuperf_magics.hardware.catalog import UnknownGPUError, lookup

    figures = {k: run[k] for k in run.index if str(k).startswith("gpu_") and pd.notna(run[k])}
    if "gpu_fp32_tflops" not in figures:
        with contextlib.suppress(UnknownGPUError, KeyError, ValueError):
            figures = {**lookup(str(run["gpu"])), **figures}
    return figures


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"
