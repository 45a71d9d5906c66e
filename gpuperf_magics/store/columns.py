"""The canonical table: column names, their order, and the kind of value each holds.

One row per measured configuration, the same whether it came from a profiled cell or an
import. ``Store.runs()`` returns these columns in this order (plus any further keys found in
the stored runs), and the importer validates against the same kinds.

This is the registry of the canonical columns: a new key of a run group (say ``world_size``
for data-parallel runs) is one line in the group's dict below (``"world_size": "int"`` in
``_HYPER``); it is stored in the group's JSON column, so the SQL schema does not change.
"""

from __future__ import annotations

__all__ = [
    "ARCH_COLUMNS",
    "BASE_COLUMNS",
    "CANONICAL_COLUMNS",
    "FIRST_COLUMNS",
    "HARDWARE_COLUMNS",
    "HARDWARE_PREFIXES",
    "HYPER_COLUMNS",
    "KINDS",
    "NOT_NULL_INT",
    "QUALITY_COLUMNS",
    "STATUSES",
    "group_of",
]

#: Allowed values of ``status``.
STATUSES = ("ok", "failed", "interrupted")

#: The columns every frame starts with.
FIRST_COLUMNS = (
    "run_id", "network", "batch_size", "iterations", "time_s", "status", "gpu", "gpu_count",
)
#: Further flat columns of a run (the ``runs`` table's own scalar columns).
REST_COLUMNS = (
    "source", "created_at", "device", "it_median_s", "it_p90_s", "it_mean_s", "it_std_s",
    "samples_per_s", "warmup_iterations", "recorded_iterations", "error",
    "run_uid", "recorded_host", "recorded_user", "peak_memory_gb",
)
BASE_COLUMNS = FIRST_COLUMNS + REST_COLUMNS

_GPU = {
    "gpu_name": "str", "gpu_uuid": "str", "gpu_architecture": "str",
    "gpu_compute_capability": "float", "gpu_sm_count": "int", "gpu_cuda_cores": "int",
    "gpu_clock_mhz": "float", "gpu_mem_clock_mhz": "float", "gpu_mem_bus_bits": "int",
    "gpu_memory_gb": "float", "gpu_bandwidth_gbs": "float", "gpu_fp32_tflops": "float",
    "gpu_tf32_tflops": "float", "gpu_fp16_tflops": "float", "gpu_release_year": "int",
    "gpu_driver": "str", "gpu_cuda_driver": "str", "gpu_power_limit_w": "float",
    "gpu_mig": "bool", "gpu_l2_mb": "float", "gpu_visible_count": "int",
}
_CPU = {
    "cpu_model": "str", "cpu_physical_cores": "int", "cpu_logical_cores": "int",
    "cpu_affinity": "int", "cpu_threads": "int", "cpu_interop_threads": "int",
    "cpu_simd": "str", "cpu_memory_gb": "float", "cpu_mhz": "float",
}
_SW = {
    "sw_python": "str", "sw_torch": "str", "sw_cuda": "str", "sw_cudnn": "str",
    "sw_platform": "str",
}
_ARCH = {
    "arch_params": "int", "arch_trainable_params": "int",
    "arch_layers_conv": "int", "arch_layers_linear": "int", "arch_layers_norm": "int",
    "arch_layers_attention": "int", "arch_layers_recurrent": "int",
    "arch_layers_embedding": "int", "arch_layers_activation": "int", "arch_layers_pool": "int",
    "arch_layers_dropout": "int", "arch_layers_other": "int", "arch_layers_total": "int",
    "arch_module_depth": "int", "arch_depth": "int", "arch_flops_fwd": "float",
    "arch_flops_fwd_bwd": "float", "arch_flops_method": "str", "arch_input_shape": "str",
    "arch_dtype": "str", "arch_amp": "bool", "arch_channels_last": "bool",
    "arch_compiled": "bool", "arch_class": "str", "arch_tf32_matmul": "bool",
    "arch_tf32_conv": "bool",
}
# Every key the capture writes is canonical, so that an exported table re-imports into the
# same groups instead of turning bookkeeping into features.
_HYPER = {
    "optimizer": "str", "lr": "float", "micro_batches": "int", "micro_batch_size": "int",
    "epochs": "float", "total_iterations": "int", "dataset_size": "int", "skipped_steps": "int",
    "lr_last": "float", "other_optimizer_steps": "str", "epochs_seen": "int",
    "iterations_per_epoch": "int", "loader_batch_size": "int", "dataloader_workers": "int",
    "drop_last": "bool",
}
_QUALITY = {
    "torch_threads": "int", "interop_threads": "int", "load_avg_start": "float",
    "load_avg_end": "float", "busy": "bool", "timing_method": "str", "detection": "str",
    "other_cpu_load": "float", "batch_sampled_steps": "int", "sync": "bool", "phases": "bool",
    # Data-parallel jobs (capture/distributed.py): processes, samples per step over all of
    # them (1 and batch_size for one process), the rank of a run a rank saved alone; whose
    # iterations the run holds, the fastest and slowest rank's median iteration, their spread
    # (max/min - 1), the process group's backend. Kept with the measurement conditions, which
    # the predictor leaves out of its features, until the predictor decides how the job's size
    # enters (global_batch_size would otherwise be a copy of batch_size that a what-if row for
    # another batch size keeps unchanged). gpu_count, a base column, is a feature already.
    "world_size": "int", "global_batch_size": "int", "rank": "int",
    "rank_slowest": "int", "rank_median_min_s": "float", "rank_median_max_s": "float",
    "rank_spread": "float", "dist_backend": "str",
    # Optimizer steps that raised and were caught by the loop (each joins the next iteration).
    "raised_steps": "int",
}
_BASE = {
    "run_id": "int", "network": "str", "batch_size": "int", "iterations": "int",
    "time_s": "float", "status": "str", "gpu": "str", "gpu_count": "int", "source": "str",
    "created_at": "str", "device": "str", "it_median_s": "float", "it_p90_s": "float",
    "it_mean_s": "float", "it_std_s": "float", "samples_per_s": "float",
    "warmup_iterations": "int", "recorded_iterations": "int", "error": "str",
    # The run's id in every store (a hash of its content), and who recorded it where.
    "run_uid": "str", "recorded_host": "str", "recorded_user": "str",
    # Peak GPU memory the run's tensors took (torch.cuda.max_memory_allocated, GiB, one
    # process); empty on the CPU and for runs recorded before schema version 3.
    "peak_memory_gb": "float",
}

HARDWARE_COLUMNS = tuple(_GPU) + tuple(_CPU) + tuple(_SW)
ARCH_COLUMNS = tuple(_ARCH)
HYPER_COLUMNS = tuple(_HYPER)
QUALITY_COLUMNS = tuple(_QUALITY)

#: Every column an empty store's frame has, in order; ``tags`` is a dict per row.
CANONICAL_COLUMNS = (
    BASE_COLUMNS + HARDWARE_COLUMNS + ARCH_COLUMNS + HYPER_COLUMNS + QUALITY_COLUMNS + ("tags",)
)

#: Kind of each canonical column: "int", "float", "bool", "str" or "dict". Integer columns are
#: pandas' nullable ``Int64`` except :data:`NOT_NULL_INT`; features are always "float".
KINDS: dict[str, str] = {
    **_BASE, **_GPU, **_CPU, **_SW, **_ARCH, **_HYPER, **_QUALITY, "tags": "dict",
}
NOT_NULL_INT = frozenset({"run_id", "iterations", "gpu_count"})

HARDWARE_PREFIXES = ("gpu_", "cpu_", "sw_")

#: Groups of a run's values, in the order their columns appear in frames.
GROUPS = ("base", "hardware", "arch", "hyper", "quality", "tags", "features")


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
    if column in _BASE:
        return "base"
    if column.startswith(HARDWARE_PREFIXES):
        return "hardware"
    if column.startswith("arch_"):
        return "arch"
    if column in _HYPER:
        return "hyper"
    if column in _QUALITY:
        return "quality"
    if column == "tags":
        return "tags"
    return "other"
