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
host-bound scales only what the GPU did in it: the model's moved time times that share, never
less than the floor. A run within (1 + :data:`HOST_MARGIN`) of its kernels' host time was
host-bound, and its FLOPs at the roofline's efficiency
(:func:`~gpuperf_magics.model.roofline.gpu_work_seconds`) give the share.

Runs also record how busy their GPU was (``device_busy``, NVML's utilization samples,
:mod:`gpuperf_magics.hardware.busy`). Taking the share from it (a run busy less than
:data:`BUSY_HOST` of the time was host-bound, its busy time the GPU's work, of which
:data:`KERNEL_MIN_S` per kernel does not grow with the batch) did better on the small CNN it was
set on (14% against 28% MAPE) and worse on six other networks looked at once (45% against
20%): the busy time of small kernels hardly grows with the batch (the zoo's MLP stayed 15-17%
busy from batch 8 to 1024). It is off (``use_busy``) until a model of that is measured. Without
this, a run at batch 64 that waited for its host answered batch 256 with four times its time,
and a slower GPU with the spec sheets' ratio of the whole time (an H200 run of a
25.7K-parameter CNN: 46 ms on a T4, where the host alone needs about 2).

At a batch and on a GPU a host-bound run was measured at, the floor is that run's time: the
same host issues the same kernels as slowly in any precision. And autocast (AMP) costs the host
time: its casts and its dispatch add to what every iteration issues. The eleven networks of the
CPU→GPU zoo measured on an H200 give 36 pairs where the FP32 and TF32 runs were host-bound
(seven networks, nine network and batch pairs; not the recurrent ones, whose cuDNN kernels the
count misses): in bf16 or fp16 they took :data:`AMP_HOST_FACTOR` times as long per iteration
(median; 0.92-1.85; the fp16 runs' GradScaler included), so a move into AMP raises the floor
by that factor and a move out of it lowers it (``docs/figures/precision_moves.md``).

A row raised to the floor gets an interval of ±:data:`HOST_SPREAD` (hosts differ: the same
network took 1.96 and 2.39 ms per iteration on two H200 machines) and a ``detail`` that says
why. Runs without a kernel count (recorded before it, imported tables) change nothing: their
answers are the model's.
"""

from __future__ import annotations

import contextlib
import math
import statistics
from typing import TYPE_CHECKING

from gpuperf_magics.model.roofline import AMP_HOST_FACTOR

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: Relative spread of a host's time per iteration from one machine to another (two H200 hosts
#: differed by 22% on the same network; a bare operator by 43%).
HOST_SPREAD = 0.3
#: A run is host-bound when its iteration takes at most (1 + this) × the host's time its
#: kernels take at HOST_KERNEL_S: what one host costs per kernel ranged 39-62 µs over five
#: networks on an H200 machine.
HOST_MARGIN = 0.5
#: A run whose GPU was busy (``device_busy``, NVML's samples) less than this share of the time
#: waited for its host: only the busy share moves with the batch and the GPU. Above it the GPU
#: is the bottleneck and what idles it is serial (the batch's copy from pageable memory), not
#: the host running behind. On an H200: a host-bound small CNN 0.10-0.24 busy at batch 8-64,
#: 0.48 at 256 (still flat in time); a wide CNN at batch 1024, bound by the GPU, 0.85.
BUSY_HOST = 0.5
#: GPU seconds a kernel takes however little it does (launch to completion on the device: a
#: few µs on current GPUs). Part of what a busy GPU did at a small batch does not grow with the
#: batch: a small CNN's 44 kernels busy 0.18 ms at batch 8 on an H200, 3.9 ms at batch 1024.
KERNEL_MIN_S = 3e-6
#: The kinds of prediction whose source can be host-bound: a batch or a GPU the network was not
#: measured at (interpolations lie between measured points, which already say it).
MOVES = ("extrapolation", "transfer")


def apply_host_floor(table: pd.DataFrame, runs: pd.DataFrame, *,
                     use_busy: bool = False, precision: str | None = None) -> pd.DataFrame:
    """``table`` (prediction rows with ``gpu``, ``batch_size``, ``kind``, ``per_iteration_s``,
    ``time_s``, ``time_low_s``, ``time_high_s``, ``detail``, ``expected_mape``) with the host's
    time as the floor of every GPU row, and the moves from a host-bound run scaled by the share
    of that run the GPU's work took (a copy; ``table`` is not changed).

    ``use_busy``: take that share from the runs' measured ``device_busy`` where they have it
    (off: on six networks looked at once on an H200 it made batch moves worse, 45% against 20%
    MAPE; ``benchmarks/host_bound.py`` measures both). ``precision``: the class the rows are
    asked in (``"fp32"``, ``"tf32"``, ``"fp16"`` for AMP) where not the latest run's; a move
    into or out of AMP scales the floor by :data:`AMP_HOST_FACTOR`."""
    import numpy as np
    import pandas as pd

    host = _HostView.of(runs, use_busy)
    if host is None or table.empty:
        return table
    asked = precision or host.precision
    factor = between(host.precision, asked)
    floors = np.full(len(table), np.nan)
    per_it = table["per_iteration_s"].to_numpy(float)
    new = per_it.copy()
    bound = np.zeros(len(table), dtype=bool)
    single = np.full(len(table), np.nan)  # the one measured batch a row moved from
    shared = np.zeros(len(table), dtype=bool)  # moved by a host-bound run's GPU share
    kinds = table["kind"].astype(str).to_numpy()
    for i, (gpu, batch) in enumerate(zip(table["gpu"], table["batch_size"], strict=True)):
        if not isinstance(gpu, str) or not np.isfinite(per_it[i]):
            continue
        if kinds[i].startswith(MOVES):
            same_gpu = kinds[i].startswith("extrapolation")
            # One batch size measured on this GPU: the model grew it as public batch series
            # grow (model/batch_single.py), a statistical stand-in for a host's share; the
            # runs' kernel count tells this host's own, so the run's GPU work moves with the
            # batch and the host's time is the floor (the max of the two; on the H200 zoo,
            # 19% MAPE against 31% for the public curve on six networks' 72 moves).
            one = host.single_move(table.iloc[i], asked) if same_gpu else None
            if one is not None:
                new[i] = one[1] * float(batch) / one[0]
                single[i] = one[0]
            share = host.share_near(gpu if same_gpu else None, float(batch))
            if share is not None:  # the source was host-bound: only its GPU work moves
                new[i] = share * new[i]
                shared[i] = True
        floor = max(host.floor * factor, host.same_floor(table.iloc[i], asked))
        floors[i] = floor
        bound[i] = new[i] < floor
        new[i] = max(new[i], floor)
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
    why = ("its kernel launches" if factor == 1 else
           f"its kernel launches, ×{factor:.2g} for {'' if factor > 1 else 'leaving '}"
           "autocast's casts")
    needs = pd.Series([_ms(f) for f in floors[changed]], index=rows)
    note = np.where(bound[changed], "host-bound: the host needs about " + needs
                    + f" per iteration ({why})",
                    np.where(shared[changed], "host-bound where measured: only the GPU's "
                             "share of the time moved", ""))
    # A move from one batch size: the model's words (the public curve) no longer apply.
    words = [f"batch_size {b:g} from the one measured {m:g} (its GPU's work in proportion to "
             "the batch: its kernel count tells its host's share)" if np.isfinite(m) else str(d)
             for b, m, d in zip(out.loc[rows, "batch_size"], single[changed],
                                out.loc[rows, "detail"], strict=True)]
    out.loc[rows, "detail"] = [f"{n}; {w}" if n else w for n, w in zip(note, words, strict=True)]
    return out


class _HostView:
    """A network's GPU runs seen from the host: the floor and each run's GPU work."""

    def __init__(self, floor: float, runs: list[tuple[str, float, float, float, float]] | None
                 = None, same: list[tuple[dict[str, object], str | None, float]] | None = None,
                 precision: str | None = None,
                 configs: list[tuple[dict[str, object], str | None, float, float]] | None = None
                 ) -> None:
        self.floor = floor
        #: (gpu, batch, seconds per iteration, the GPU's fixed and batch-proportional work in
        #: it); the work is NaN where the run was not host-bound.
        self.runs = runs or []
        #: The host-bound runs: (their configuration: gpu, batch size, GPU count and the
        #: store's features; their precision class; seconds per iteration).
        self.same = same or []
        #: The precision class of the latest run with a kernel count (that :attr:`floor` is
        #: judged in).
        self.precision = precision
        #: Every GPU run: (its configuration but the batch size, precision class, batch size,
        #: seconds per iteration).
        self.configs = configs or []

    @classmethod
    def of(cls, runs: pd.DataFrame, use_busy: bool = False) -> _HostView | None:
        import pandas as pd

        from gpuperf_magics.model.inputs import precision_of
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
        kernels = iteration_ops(arch)["kernels"]
        # Autocast's casts and dispatch: the host issues an AMP iteration more slowly.
        measured = precision_of(counted.tail(1))[0]
        issue = kernels * HOST_KERNEL_S * (AMP_HOST_FACTOR if measured == "fp16" else 1.0)
        t = pd.to_numeric(on_gpu["it_median_s"]).to_numpy(float)
        floor = min(float(t.min()), issue)
        if not (floor > 0 and math.isfinite(floor)):
            return None
        seen, same = [], []
        configs: list[tuple[dict[str, object], str | None, float, float]] = []
        keys = ["gpu", "batch_size", "gpu_count",
                *[c for c in runs.attrs.get("feature_columns", []) if c in on_gpu.columns]]
        precisions = precision_of(on_gpu)
        for (_, run), ti, prec in zip(on_gpu.iterrows(), t, precisions, strict=True):
            fixed = scaled = math.nan
            busy = (pd.to_numeric(pd.Series([run.get("device_busy")]), errors="coerce").iloc[0]
                    if use_busy else math.nan)
            if 0 <= busy <= 1:  # measured: the GPU waited for the host the rest of the time
                if busy < BUSY_HOST:
                    work = float(busy) * ti
                    fixed = min(kernels * KERNEL_MIN_S, work)
                    scaled = work - fixed
            elif ti <= (1 + HOST_MARGIN) * issue:
                work = gpu_work_seconds(arch, _figures(run), int(run["batch_size"]),
                                        int(run.get("gpu_count", 1) or 1))
                if work is not None and work >= 0:
                    fixed, scaled = 0.0, min(work, ti)
            seen.append((str(run["gpu"]), float(run["batch_size"]), float(ti), fixed, scaled))
            configs.append(({k: run.get(k) for k in keys if k != "batch_size"}, prec,
                            float(run["batch_size"]), float(ti)))
            if not math.isnan(fixed):
                same.append(({k: run.get(k) for k in keys}, prec, float(ti)))
        return cls(floor, seen, same, measured, configs)

    def same_floor(self, row: pd.Series, precision: str | None) -> float:
        """The floor of the configuration ``row`` (its ``gpu``, ``batch_size``, ``gpu_count``
        and features) in ``precision``: the fastest host-bound run of that very configuration,
        each scaled from its own precision (:func:`between`), as the same host issues the same
        kernels; 0 where none was measured. (Not at other batches, counts or feature values: a
        run within HOST_MARGIN of its host time has GPU work in it that they change.)"""
        times = [t * between(prec, precision) for config, prec, t in self.same
                 if all(_same(row.get(k), v) for k, v in config.items())]
        return min(times) if times else 0.0

    def single_move(self, row: pd.Series, precision: str | None) -> tuple[float, float] | None:
        """(batch, seconds per iteration) where ``row`` is a move from one batch size: the runs
        of its configuration (GPU, GPU count and the store's features) in ``precision`` were
        all at one batch size, another than the row's (their median time); else None (a move
        along another feature, to another GPU count or precision, or between batches)."""
        mine = [(b, t) for config, prec, b, t in self.configs if prec == precision
                and all(_same(row.get(k), v) for k, v in config.items())]
        batches = {b for b, _ in mine}
        if len(batches) != 1 or not mine[0][0] > 0 or _same(row.get("batch_size"), mine[0][0]):
            return None
        return mine[0][0], float(statistics.median(t for _, t in mine))

    def share_near(self, gpu: str | None, batch: float) -> float | None:
        """The share of a move's time the GPU's work takes at ``batch``, from the run nearest
        it (log distance) on ``gpu`` (any GPU when None): its fixed work, and its
        batch-proportional work at ``batch``, over its time scaled to ``batch``. None where
        that run was not host-bound."""
        candidates = [r for r in self.runs if gpu is None or r[0] == gpu]
        if not candidates or not batch > 0:
            return None
        _, b0, t0, fixed, scaled = min(
            candidates, key=lambda r: abs(math.log(r[1] / batch)) if r[1] > 0 else 1e9)
        if math.isnan(fixed) or not b0 > 0:
            return None
        return min((scaled + fixed * b0 / batch) / t0, 1.0)


def between(measured: str | None, asked: str | None) -> float:
    """How much more (or less) host time an iteration takes in precision class ``asked`` than
    in ``measured``: :data:`AMP_HOST_FACTOR` into AMP (``"fp16"``), its inverse out of it, else
    1 (also where either is unknown)."""
    if asked is None or measured is None or (asked == "fp16") == (measured == "fp16"):
        return 1.0
    return AMP_HOST_FACTOR if asked == "fp16" else 1 / AMP_HOST_FACTOR


def _same(a: object, b: object) -> bool:
    """Whether two configuration values are one (numbers by value, missing alike)."""
    import pandas as pd

    if a is None or b is None or (not isinstance(a, str) and pd.isna(a)):
        return (a is None or pd.isna(a)) and (b is None or pd.isna(b))
    try:
        return float(a) == float(b)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(a) == str(b)


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
