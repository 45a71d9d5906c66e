"""The result of one profiled training cell: iterations, summary statistics and context.

A :class:`Run` is what ``%%profile_training`` (and :func:`gpuperf_magics.profile_training`)
produces, what ``-o``/``-v`` hand back, and what :class:`gpuperf_magics.Store` saves. Its
:meth:`Run.to_record` is the flat, canonical row described in the store's schema.
"""

from __future__ import annotations

import html
import math
import statistics
import textwrap
from dataclasses import dataclass, field
from typing import Any

from gpuperf_magics._checks import is_missing
from gpuperf_magics.units import format_seconds

__all__ = ["IterationRecord", "Run", "device_label"]

#: Phases of one iteration, in the order they happen, when ``--phases`` is on.
PHASES = ("data", "forward", "loss", "backward", "sync", "other", "optimizer")


@dataclass
class IterationRecord:
    """One training iteration (one step of the primary optimizer).

    Attributes
    ----------
    index : int
        0-based position in the run.
    duration_s : float
        Seconds from the end of the previous iteration to the end of this one (data loading
        included). On CUDA this is GPU-timeline time between events, not launch time.
    samples : int or None
        Samples processed (sum over micro-batches), when the model's input showed a batch.
    warmup : bool
        Flagged as warm-up (allocations, compilation, cudnn autotuning); kept, not deleted.
    phases : dict or None
        Seconds per phase (``data``, ``forward``, ``loss``, ``backward``, ``optimizer``;
        ``sync`` for DistributedDataParallel) when the run was made with ``--phases``.
    skipped_step : bool
        The optimizer step was skipped (AMP ``GradScaler`` found inf/NaN gradients).
    micro_batches : int or None
        Training forward calls of the model in this iteration (gradient accumulation).
    """

    index: int
    duration_s: float
    samples: int | None = None
    warmup: bool = False
    phases: dict[str, float] | None = None
    skipped_step: bool = False
    micro_batches: int | None = None


def _percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), without importing numpy."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


#: What each ``Run.stopped_by`` means, for the run's table.
_STOPPED = {
    "count": "after the iterations --stop-after asked for",
    "precision": "--stop-after auto: the median time per iteration known within 1%",
    "ceiling": "--stop-after auto: at its ceiling of iterations, the median not yet within 1%",
}

#: Longest line a profiled cell prints: one line of a notebook's output, not two or three.
LINE_WIDTH = 110


def device_label(gpu: Any, gpu_count: Any = 1, threads: Any = None,
                 cpu_model: Any = None) -> str:
    """The device a run trained on, as the cell's line and ``gpuperf runs`` show it.

    ``"2× NVIDIA A100-SXM4-80GB"`` for GPUs; ``"CPU (2 threads)"`` for the CPU, or
    ``"CPU AMD EPYC (2 threads)"`` with ``cpu_model``. Missing values (None or NaN, as a
    table of runs holds them) are left out.
    """
    if not is_missing(gpu):
        count = int(gpu_count) if not is_missing(gpu_count) else 1
        return f"{count}× {gpu}" if count > 1 else str(gpu)
    cpu = "CPU"
    if not is_missing(cpu_model):
        cpu = str(cpu_model) if str(cpu_model).upper().startswith("CPU") else f"CPU {cpu_model}"
    if is_missing(threads) or not threads:
        return cpu
    threads = int(threads)
    return f"{cpu} ({threads} thread{'s' if threads != 1 else ''})"


def _wrapped(text: str, indent: str = "  ") -> str:
    """A note as lines of at most :data:`LINE_WIDTH`, broken between words (a front end that
    wraps a long line breaks it anywhere, mid-word); a path longer than a line stays whole."""
    return textwrap.fill(text, LINE_WIDTH, initial_indent=indent,
                         subsequent_indent=indent + "  ", break_long_words=False,
                         break_on_hyphens=False)


@dataclass
class Run:
    """One profiled (or imported) training configuration.

    Attributes
    ----------
    network : str
        Workload label (``--name``; default: the model's class and parameter count, e.g.
        ``"ResNet-25.6M"``).
    status : str
        ``ok``, ``failed`` (the cell raised) or ``interrupted`` (KeyboardInterrupt/SIGINT).
    iterations : list of IterationRecord
        Every detected iteration, warm-up included.
    batch_size : int or None
        Samples per optimizer step (micro-batch size × micro-batches).
    hardware : dict
        Flat ``gpu_*``/``cpu_*``/``sw_*`` features of :func:`gpuperf_magics.hardware.detect`.
    architecture : dict
        Flat ``arch_*`` features of :func:`gpuperf_magics.architecture.describe`.
    hyper : dict
        Hyper-parameters seen in the loop (``optimizer``, ``lr``, ``micro_batches``,
        ``micro_batch_size``, ``epochs``, ``total_iterations``, ``dataset_size``...).
    quality : dict
        Conditions of the measurement (``torch_threads``, ``load_avg_start``/``_end``,
        ``busy``, ``timing_method``, ``detection``).
    tags : dict
        User ``--tag key=value`` pairs.
    notes : list of str
        Human-readable remarks (busy machine, skipped AMP steps, no store...).
    peak_memory_gb : float or None
        Peak GPU memory the run's tensors took (``torch.cuda.max_memory_allocated`` of the
        training's device, GiB); None on the CPU or when the device could not say. What
        would not fit on another GPU is judged from it (:mod:`gpuperf_magics.prediction.memory`).
    stopped_by : str or None
        Why the loop ended before its end (``stop_after``): ``"count"`` (the N iterations
        asked for were done), ``"precision"`` (``auto``: the median time per iteration was
        known within 1%) or ``"ceiling"`` (``auto``: the most iterations it runs). None when
        the loop ended by itself. A stopped run is a complete measurement (``status`` ok);
        its ``epochs``/``total_iterations`` are still the whole job's.
    run_id : int or None
        Row id once saved in a store.
    """

    network: str
    status: str = "ok"
    iterations: list[IterationRecord] = field(default_factory=list)
    batch_size: int | None = None
    device: str = "cpu"
    gpu: str | None = None
    gpu_count: int = 0
    hardware: dict[str, Any] = field(default_factory=dict)
    architecture: dict[str, Any] = field(default_factory=dict)
    hyper: dict[str, Any] = field(default_factory=dict)
    quality: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    features: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    created_at: str | None = None
    source: str = "profile"
    peak_memory_gb: float | None = None
    stopped_by: str | None = None
    run_id: int | None = None
    store_path: str | None = None
    target_store: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        median = format_seconds(self.median_s) if self.median_s is not None else "-"
        saved = f", run_id={self.run_id}" if self.run_id is not None else ", not saved"
        return (f"Run(network={self.network!r}, status={self.status!r}, "
                f"iterations={len(self.iterations)}, batch_size={self.batch_size}, "
                f"median={median}{saved})")

    # ----------------------------------------------------------------- statistics
    @property
    def steady(self) -> list[IterationRecord]:
        """Iterations after warm-up (all of them when every iteration is warm-up)."""
        steady = [it for it in self.iterations if not it.warmup]
        return steady or list(self.iterations)

    @property
    def warmup_iterations(self) -> int:
        return sum(1 for it in self.iterations if it.warmup)

    @property
    def time_s(self) -> float:
        """Seconds the steady iterations took: the target of the predictor."""
        return float(sum(it.duration_s for it in self.steady))

    def _durations(self) -> list[float]:
        return [it.duration_s for it in self.steady]

    @property
    def median_s(self) -> float | None:
        d = self._durations()
        return statistics.median(d) if d else None

    @property
    def p90_s(self) -> float | None:
        d = self._durations()
        return _percentile(d, 90) if d else None

    @property
    def mean_s(self) -> float | None:
        d = self._durations()
        return statistics.fmean(d) if d else None

    @property
    def std_s(self) -> float | None:
        d = self._durations()
        return statistics.stdev(d) if len(d) > 1 else None

    @property
    def samples_per_s(self) -> float | None:
        steady = self.steady
        samples = [it.samples for it in steady]
        if not steady or any(s is None for s in samples):
            if self.batch_size and self.median_s:
                return self.batch_size / self.median_s
            return None
        total = self.time_s
        return sum(s for s in samples if s is not None) / total if total > 0 else None

    def phase_medians(self) -> dict[str, float]:
        """Median seconds per phase over steady iterations (empty without ``--phases``)."""
        out: dict[str, float] = {}
        for name in PHASES:
            vals = [it.phases[name] for it in self.steady if it.phases and name in it.phases]
            if vals:
                out[name] = statistics.median(vals)
        return out

    # ----------------------------------------------------------------- records
    def to_record(self) -> dict[str, Any]:
        """The flat canonical record the store writes (see ``gpuperf_magics.store``)."""
        return {
            "network": self.network,
            "batch_size": self.batch_size,
            "iterations": len(self.steady),
            "time_s": self.time_s,
            "status": self.status,
            "source": self.source,
            "created_at": self.created_at,
            "gpu": self.gpu,
            "gpu_count": self.gpu_count,
            "device": self.device,
            "it_median_s": self.median_s,
            "it_p90_s": self.p90_s,
            "it_mean_s": self.mean_s,
            "it_std_s": self.std_s,
            "samples_per_s": self.samples_per_s,
            "warmup_iterations": self.warmup_iterations,
            "recorded_iterations": len(self.iterations),
            "error": self.error,
            "peak_memory_gb": self.peak_memory_gb,
            "stopped_by": self.stopped_by,
            "hardware": dict(self.hardware),
            "arch": dict(self.architecture),
            "hyper": dict(self.hyper),
            "quality": dict(self.quality),
            "tags": dict(self.tags),
            "features": dict(self.features),
        }

    def save(self, store: Any = None) -> int:
        """Write this run to ``store`` (a path or a :class:`~gpuperf_magics.Store`).

        For runs whose automatic save failed; returns the new run id. Without ``store``, the
        run goes where it was meant to go (the profiled cell's ``--store``), else to the
        default store. The note that the save failed is dropped once it succeeds.
        """
        from gpuperf_magics.store import Store

        if store is None:
            store = self.target_store
        target = store if isinstance(store, Store) else Store(store)
        kept = [n for n in self.notes if not n.startswith("not saved:")]
        notes, self.notes = self.notes, kept
        try:
            return target.save_run(self)
        except BaseException:
            self.notes = notes
            raise

    # ----------------------------------------------------------------- display
    def _device_label(self, *, short: bool = False) -> str:
        if self.gpu:
            name = self.gpu
            if short and name.startswith("NVIDIA "):
                name = name[len("NVIDIA "):]  # the line has no room for the vendor
            return device_label(name, self.gpu_count)
        return device_label(None, threads=self.quality.get("torch_threads"),
                            cpu_model=None if short else self.hardware.get("cpu_model") or None)

    def _line(self) -> str:
        """The summary without its notes: at most :data:`LINE_WIDTH` characters unless the
        network's name alone is too long. Throughput, p90 and the CPU model are in
        :meth:`details`."""
        parts = [f"profile_training: {self.network}"]
        if self.status != "ok":
            parts[0] += f" [{self.status}]"
        warmup = self.warmup_iterations
        parts.append(f"{len(self.iterations)} it" + (f" ({warmup} warm-up)" if warmup else "")
                     + (" stopped early" if self.stopped_by else ""))
        if self.median_s is not None:  # named: the live line's last state gives a mean
            parts.append(f"{format_seconds(self.median_s)}/it median")
        if self.batch_size:
            parts.append(f"batch {self.batch_size}")
            mb = self.hyper.get("micro_batches")
            if mb and mb > 1:
                parts[-1] += f" ({mb}×{self.hyper.get('micro_batch_size')})"
        world = self.quality.get("world_size") or 1
        if world > 1:
            rank = self.quality.get("rank")
            glob = self.quality.get("global_batch_size")
            parts.append(f"rank {rank} of {world}" if rank is not None else
                         f"{world} ranks" + (f" (global batch {glob})" if glob else ""))
        saved = [f"run {self.run_id}"] if self.run_id is not None else []
        if not saved and any(n.startswith("not saved:") for n in self.notes):
            saved = ["not saved"]  # the note below says why; the line must not look saved
        line = " · ".join([*parts, self._device_label(short=True), *saved])
        if len(line) > LINE_WIDTH:  # the device is the one part the reader already knows
            line = " · ".join([*parts, *saved])
        return line

    def summary_line(self) -> str:
        """The compact line printed after a profiled cell (notes below it, one each)."""
        if not self.iterations:
            status = f" [{self.status}]" if self.status != "ok" else ""
            text = f"profile_training{status}: " + ("; ".join(self.notes) or "nothing recorded")
            return _wrapped(text, indent="")
        return "\n".join([self._line(), *(_wrapped(note) for note in self.notes)])

    def details(self) -> str:
        """The summary line, then every figure of :meth:`table` and the notes: what
        ``%%profile_training --verbose`` prints and a Run shows as text."""
        if not self.iterations:
            return self.summary_line()
        rows = [(k, v) for k, v in self.table() if k != "note"]
        width = max(len(k) for k, _ in rows)
        lines = [self._line(), *(f"  {k:<{width}}  {v}" for k, v in rows)]
        lines += [_wrapped(note) for note in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary_line()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text("Run(...)" if cycle else self.details())

    def table(self) -> list[tuple[str, str]]:
        """(label, value) rows describing the run, for the HTML and text reports."""
        rows: list[tuple[str, str]] = [
            ("network", self.network),
            ("status", self.status + (f" ({self.error})" if self.error else "")),
            ("iterations", f"{len(self.iterations)} ({self.warmup_iterations} warm-up)"),
        ]
        if self.stopped_by:
            rows.append(("stopped early", _STOPPED.get(self.stopped_by, self.stopped_by)))
        if self.median_s is not None:
            rows.append((
                "time / iteration",
                f"median {format_seconds(self.median_s)}, p90 {format_seconds(self.p90_s or 0)}, "
                f"mean {format_seconds(self.mean_s or 0)}",
            ))
            rows.append(("steady time", f"{self.time_s:.3f} s over {len(self.steady)} it"))
        if self.batch_size:
            rows.append(("batch size", str(self.batch_size)))
        q = self.quality
        if (q.get("world_size") or 1) > 1:
            bits = [f"ranks {q['world_size']}"]
            if q.get("global_batch_size"):
                bits.append(f"global batch {q['global_batch_size']}")
            if q.get("rank") is not None:
                bits.append(f"saved by rank {q['rank']} alone")
            if q.get("rank_spread") is not None:
                bits.append(f"rank spread {q['rank_spread']:.1%}")
            rows.append(("data parallel", ", ".join(bits)))
        if self.samples_per_s:
            rows.append(("throughput", f"{self.samples_per_s:,.1f} samples/s"))
        for name, value in self.phase_medians().items():
            rows.append((f"phase {name}", format_seconds(value)))
        rows.append(("device", self._device_label()))
        if self.peak_memory_gb is not None:
            rows.append(("peak GPU memory", f"{self.peak_memory_gb:.2f} GiB"))
        arch = self.architecture
        if arch.get("arch_params") is not None:
            rows.append(("parameters", f"{arch['arch_params']:,}"))
        if arch.get("arch_flops_fwd_bwd") is not None:
            rows.append(("GFLOP / sample (fwd+bwd)", f"{arch['arch_flops_fwd_bwd'] / 1e9:.4g}"))
        if arch.get("arch_depth") is not None:
            rows.append(("weighted depth", str(arch["arch_depth"])))
        for key in ("optimizer", "lr", "epochs", "total_iterations"):
            if self.hyper.get(key) is not None:
                rows.append((key, str(self.hyper[key])))
        if self.tags:
            rows.append(("tags", ", ".join(f"{k}={v}" for k, v in self.tags.items())))
        if self.run_id is not None:
            rows.append(("run id", f"{self.run_id} in {self.store_path}"))
        rows.extend(("note", n) for n in self.notes)
        return rows

    def _repr_html_(self) -> str:
        body = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
            f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
            for k, v in self.table()
        )
        return f"<table class='gpuperf-run'>{body}</table>"
