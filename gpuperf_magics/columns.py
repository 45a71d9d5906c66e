"""The canonical columns: one record per column, the one place they are declared.

One row per measured configuration, the same whether it came from a profiled cell or an
import. ``Store.runs()`` returns these columns in this order (plus any further keys found in
the stored runs), the importer validates against their kinds, and the model reads which of them
are features. Each :class:`Column` says what it holds, which group of a run record it belongs
to, and which part of the package fills it.

A new key of a run group (say ``world_size`` for data-parallel runs) is one row below; it is
stored in the group's JSON column, so the SQL schema does not change. A new *base* column is a
column of the ``runs`` table as well, and takes a schema step (``store/schema.py``).

This module imports nothing from the package, so that every layer (the model included, which
must not import the store) can read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

__all__ = ["COLUMNS", "KINDS", "STATUSES", "Column", "group_of", "names"]

Kind = Literal["int", "float", "bool", "str", "dict"]
Group = Literal["base", "hardware", "arch", "hyper", "quality", "tags"]


@dataclass(frozen=True)
class Column:
    """One canonical column.

    Attributes
    ----------
    name : str
    kind : {"int", "float", "bool", "str", "dict"}
        What a value holds. Integer columns are pandas' nullable ``Int64`` in frames, except
        :data:`NOT_NULL_INT`.
    group : {"base", "hardware", "arch", "hyper", "quality", "tags"}
        Where the value lives in a run record: a column of the ``runs`` table (``base``), or a
        key of one of its JSON groups.
    producer : str
        The part of the package that fills it: ``"run"`` (:meth:`Run.to_record`), ``"store"``
        (ids and provenance the store assigns), ``"hardware.gpu"``, ``"hardware.cpu"``,
        ``"hardware.software"``, ``"architecture"``, or the capture module that fills it:
        ``"capture.session"``, ``"capture.recorder"``, ``"capture.context"`` (the TF32 flags),
        ``"capture.load"``, ``"capture.patches"`` or ``"capture.distributed"``.
    feature : bool
        The model uses it as a feature when a table holds numbers in it (``model/inputs.py``):
        what was run, not how it was measured, restated or counted.
    positive : bool
        Must be > 0 whenever given (the predictor divides by the hardware figures).
    not_null : bool
        Never missing in a stored run.
    """

    name: str
    kind: Kind
    group: Group
    producer: str
    feature: bool = False
    positive: bool = False
    not_null: bool = False


def _rows(group: Group, producer: str, spec: str, *, feature: str = "",
          positive: str = "", not_null: str = "") -> tuple[Column, ...]:
    """Columns of one group and producer from ``"name:kind name:kind ..."``; the keyword
    arguments name (space-separated) which of them carry that flag."""
    features, positives, not_nulls = (set(flag.split()) for flag in (feature, positive, not_null))
    out = []
    for item in spec.split():
        name, kind = item.split(":")
        out.append(Column(name, cast(Kind, kind), group, producer, feature=name in features,
                          positive=name in positives, not_null=name in not_nulls))
    unknown = (features | positives | not_nulls) - {c.name for c in out}
    if unknown:  # a typo in a flag list would silently drop the flag
        raise AssertionError(f"flags name unknown columns: {sorted(unknown)}")
    return tuple(out)


#: Every canonical column, in the order of a runs frame's columns.
COLUMNS: tuple[Column, ...] = (
    *_rows("base", "store", "run_id:int", not_null="run_id"),
    *_rows(
        "base", "run",
        "network:str batch_size:int iterations:int time_s:float status:str gpu:str "
        "gpu_count:int source:str created_at:str device:str it_median_s:float "
        "it_p90_s:float it_mean_s:float it_std_s:float samples_per_s:float "
        "warmup_iterations:int recorded_iterations:int error:str",
        feature="batch_size gpu_count", positive="batch_size",
        not_null="iterations gpu_count",
    ),
    # The run's id in every store (a hash of its content), and who recorded it where.
    *_rows("base", "store", "run_uid:str recorded_host:str recorded_user:str"),
    # Peak GPU memory the run's tensors took (torch.cuda.max_memory_allocated, GiB, one
    # process); empty on the CPU. A result of the run, not a feature of what ran.
    *_rows("base", "capture.recorder", "peak_memory_gb:float"),
    # Why a profiled loop was ended early (--stop-after): count, precision or ceiling; empty
    # when it ended by itself. A stopped run is complete: its status is ok.
    *_rows("base", "capture.stopping", "stopped_by:str"),
    *_rows(
        "hardware", "hardware.gpu",
        "gpu_name:str gpu_uuid:str gpu_architecture:str gpu_compute_capability:float "
        "gpu_sm_count:int gpu_cuda_cores:int gpu_clock_mhz:float gpu_mem_clock_mhz:float "
        "gpu_mem_bus_bits:int gpu_memory_gb:float gpu_bandwidth_gbs:float "
        "gpu_fp32_tflops:float gpu_tf32_tflops:float gpu_fp16_tflops:float "
        "gpu_bf16_tflops:float gpu_release_year:int gpu_driver:str gpu_cuda_driver:str "
        "gpu_power_limit_w:float gpu_mig:bool gpu_l2_mb:float gpu_visible_count:int",
        # Of the GPU's figures the model uses the two that a GPU move scales by; the others
        # are functions of the same GPU and would only multiply the candidate terms.
        feature="gpu_fp32_tflops gpu_bandwidth_gbs",
        positive="gpu_fp32_tflops gpu_tf32_tflops gpu_fp16_tflops gpu_bf16_tflops "
                 "gpu_bandwidth_gbs gpu_memory_gb gpu_clock_mhz gpu_mem_clock_mhz gpu_sm_count "
                 "gpu_cuda_cores gpu_mem_bus_bits",
    ),
    *_rows(
        "hardware", "hardware.cpu",
        "cpu_model:str cpu_physical_cores:int cpu_logical_cores:int cpu_affinity:int "
        "cpu_threads:int cpu_interop_threads:int cpu_simd:str cpu_memory_gb:float "
        "cpu_mhz:float",
        feature="cpu_physical_cores cpu_logical_cores cpu_affinity cpu_threads "
                "cpu_interop_threads cpu_memory_gb cpu_mhz",
        positive="cpu_physical_cores cpu_logical_cores cpu_mhz",
    ),
    *_rows("hardware", "hardware.software",
           "sw_python:str sw_torch:str sw_cuda:str sw_cudnn:str sw_platform:str"),
    *_rows(
        "arch", "architecture",
        "arch_params:int arch_trainable_params:int arch_layers_conv:int "
        "arch_layers_linear:int arch_layers_norm:int arch_layers_attention:int "
        "arch_layers_recurrent:int arch_layers_embedding:int arch_layers_activation:int "
        "arch_layers_pool:int arch_layers_dropout:int arch_layers_other:int "
        "arch_layers_total:int arch_module_depth:int arch_depth:int arch_flops_fwd:float "
        "arch_flops_fwd_bwd:float arch_flops_method:str arch_input_shape:str arch_dtype:str "
        "arch_amp:bool arch_channels_last:bool arch_compiled:bool arch_class:str "
        "arch_kernels:int arch_param_tensors:int",
        # arch_amp says which peak applies (model.inputs.precision_of), not a term of its own.
        feature="arch_params arch_trainable_params arch_layers_conv arch_layers_linear "
                "arch_layers_norm arch_layers_attention arch_layers_recurrent "
                "arch_layers_embedding arch_layers_activation arch_layers_pool "
                "arch_layers_dropout arch_layers_other arch_layers_total arch_module_depth "
                "arch_depth arch_flops_fwd arch_flops_fwd_bwd arch_channels_last "
                "arch_compiled",
    ),
    # Whether FP32 matrix products could use TF32 tensor cores: which peak a GPU move follows.
    *_rows("arch", "capture.context", "arch_tf32_matmul:bool arch_tf32_conv:bool"),
    # Every key the capture writes is canonical, so that an exported table re-imports into
    # the same groups instead of turning bookkeeping into features.
    *_rows("hyper", "capture.recorder", "optimizer:str lr:float"),
    *_rows("hyper", "capture.session", "micro_batches:int micro_batch_size:int epochs:float "
           "total_iterations:int", feature="micro_batches micro_batch_size"),
    # What the training DataLoader says (capture/patches.py) and what the optimizer hooks saw.
    *_rows("hyper", "capture.patches", "dataset_size:int"),
    *_rows("hyper", "capture.recorder",
           "skipped_steps:int lr_last:float other_optimizer_steps:str"),
    *_rows(
        "hyper", "capture.patches",
        "epochs_seen:int iterations_per_epoch:int loader_batch_size:int "
        "dataloader_workers:int drop_last:bool",
        feature="dataloader_workers",
    ),
    # How the run was measured: the machine's load around it and the timing (capture/load.py).
    *_rows("quality", "capture.load", "torch_threads:int interop_threads:int"),
    *_rows("quality", "capture.session", "load_avg_start:float"),
    *_rows(
        "quality", "capture.load",
        "load_avg_end:float busy:bool timing_method:str detection:str other_cpu_load:float "
        "batch_sampled_steps:int sync:bool phases:bool",
    ),
    # The share of the run the GPU was busy (NVML's utilization samples; hardware/busy.py):
    # a measurement kept for the predictor, which does not use it yet (model/host_bound.py).
    *_rows("quality", "capture.load", "device_busy:float"),
    # Data-parallel jobs (capture/distributed.py): processes, samples per step over all of
    # them (1 and batch_size for one process), the rank of a run a rank saved alone; whose
    # iterations the run holds, the fastest and slowest rank's median iteration, their spread
    # (max/min - 1), the process group's backend. Kept with the measurement conditions, which
    # the predictor leaves out of its features, until the predictor decides how the job's size
    # enters (global_batch_size would otherwise be a copy of batch_size that a what-if row for
    # another batch size keeps unchanged). gpu_count, a base column, is a feature already.
    *_rows("quality", "capture.distributed", "world_size:int global_batch_size:int"),
    *_rows("quality", "capture.session", "rank:int"),
    *_rows("quality", "capture.distributed",
           "rank_slowest:int rank_median_min_s:float rank_median_max_s:float "
           "rank_spread:float dist_backend:str"),
    # Optimizer steps that raised and were caught by the loop (each joins the next iteration).
    *_rows("quality", "capture.load", "raised_steps:int"),
    *_rows("tags", "run", "tags:dict"),
)


def names(*, group: str | None = None, producer: str | None = None) -> tuple[str, ...]:
    """Names of the canonical columns of one group and/or producer, in frame order."""
    return tuple(c.name for c in COLUMNS
                 if (group is None or c.group == group)
                 and (producer is None or c.producer == producer))


#: Allowed values of ``status``.
STATUSES = ("ok", "failed", "interrupted")

#: The columns every frame starts with.
FIRST_COLUMNS = (
    "run_id", "network", "batch_size", "iterations", "time_s", "status", "gpu", "gpu_count",
)
#: The runs table's own scalar columns, :data:`FIRST_COLUMNS` first.
BASE_COLUMNS = names(group="base")
HARDWARE_COLUMNS = names(group="hardware")
ARCH_COLUMNS = names(group="arch")
HYPER_COLUMNS = names(group="hyper")
QUALITY_COLUMNS = names(group="quality")

#: Every column an empty store's frame has, in order; ``tags`` is a dict per row.
CANONICAL_COLUMNS = tuple(c.name for c in COLUMNS)

#: Kind of each canonical column: "int", "float", "bool", "str" or "dict". Integer columns are
#: pandas' nullable ``Int64`` except :data:`NOT_NULL_INT`; features are always "float".
KINDS: dict[str, str] = {c.name: c.kind for c in COLUMNS}
NOT_NULL_INT = frozenset(c.name for c in COLUMNS if c.not_null and c.kind == "int")

HARDWARE_PREFIXES = ("gpu_", "cpu_", "sw_")

_GROUP = {c.name: c.group for c in COLUMNS}


def group_of(column: str) -> str:
    """Where a column of a canonical table belongs in a run record.

    Parameters
    ----------
    column : str
        A column name of a runs frame or an imported table (after the mapping).

    Returns
    -------
    str
        ``"base"`` (a column of the runs table), ``"ignore"`` (ids of another store),
        ``"hardware"`` (``gpu_*``/``cpu_*``/``sw_*``), ``"arch"`` (``arch_*``), ``"hyper"``,
        ``"quality"``, ``"tags"``, or ``"other"`` for anything else (a feature or a tag,
        decided by its values).
    """
    if column in ("run_id", "hardware_id"):
        return "ignore"
    group = _GROUP.get(column)
    if group == "base":
        return "base"
    # By prefix, so that a hardware or architecture key the registry does not list yet (a
    # newer producer's, an imported table's) still lands in its group.
    if column.startswith(HARDWARE_PREFIXES):
        return "hardware"
    if column.startswith("arch_"):
        return "arch"
    return group if group in ("hyper", "quality", "tags") else "other"
