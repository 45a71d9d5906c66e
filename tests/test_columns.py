"""Tests of gpuperf_magics.columns: the one registry of the canonical columns, and that every
producer, the store and the model agree with it."""

from __future__ import annotations

import dataclasses
import sqlite3

import pandas as pd
import pytest

from gpuperf_magics import columns
from gpuperf_magics.columns import COLUMNS, KINDS, Column, group_of, names

# The registry as store/columns.py declared it before it moved here (name:kind, frame order),
# plus peak_memory_gb, the base column the peak-memory work adds, stopped_by (why --stop-after
# ended the loop), gpu_bf16_tflops, the catalog's BF16 tensor peak, and arch_kernels and
# arch_param_tensors (what an iteration launches, counted in the FLOPs trace), and device_busy
# (the share of a run the GPU worked, from NVML's samples).
SNAPSHOT = """
run_id:int network:str batch_size:int iterations:int time_s:float status:str gpu:str
gpu_count:int source:str created_at:str device:str it_median_s:float it_p90_s:float
it_mean_s:float it_std_s:float samples_per_s:float warmup_iterations:int
recorded_iterations:int error:str run_uid:str recorded_host:str recorded_user:str
peak_memory_gb:float stopped_by:str
gpu_name:str gpu_uuid:str gpu_architecture:str gpu_compute_capability:float gpu_sm_count:int
gpu_cuda_cores:int gpu_clock_mhz:float gpu_mem_clock_mhz:float gpu_mem_bus_bits:int
gpu_memory_gb:float gpu_bandwidth_gbs:float gpu_fp32_tflops:float gpu_tf32_tflops:float
gpu_fp16_tflops:float gpu_bf16_tflops:float gpu_release_year:int gpu_driver:str
gpu_cuda_driver:str gpu_power_limit_w:float gpu_mig:bool gpu_l2_mb:float gpu_visible_count:int
cpu_model:str cpu_physical_cores:int cpu_logical_cores:int cpu_affinity:int cpu_threads:int
cpu_interop_threads:int cpu_simd:str cpu_memory_gb:float cpu_mhz:float
sw_python:str sw_torch:str sw_cuda:str sw_cudnn:str sw_platform:str
arch_params:int arch_trainable_params:int arch_layers_conv:int arch_layers_linear:int
arch_layers_norm:int arch_layers_attention:int arch_layers_recurrent:int
arch_layers_embedding:int arch_layers_activation:int arch_layers_pool:int
arch_layers_dropout:int arch_layers_other:int arch_layers_total:int arch_module_depth:int
arch_depth:int arch_flops_fwd:float arch_flops_fwd_bwd:float arch_flops_method:str
arch_input_shape:str arch_dtype:str arch_amp:bool arch_channels_last:bool arch_compiled:bool
arch_class:str arch_kernels:int arch_param_tensors:int arch_tf32_matmul:bool
arch_tf32_conv:bool
optimizer:str lr:float micro_batches:int micro_batch_size:int epochs:float
total_iterations:int dataset_size:int skipped_steps:int lr_last:float
other_optimizer_steps:str epochs_seen:int iterations_per_epoch:int loader_batch_size:int
dataloader_workers:int drop_last:bool
torch_threads:int interop_threads:int load_avg_start:float load_avg_end:float busy:bool
timing_method:str detection:str other_cpu_load:float batch_sampled_steps:int sync:bool
phases:bool device_busy:float world_size:int global_batch_size:int rank:int rank_slowest:int
rank_median_min_s:float rank_median_max_s:float rank_spread:float dist_backend:str
raised_steps:int
tags:dict
"""
GROUP_SIZES = {"base": 24, "hardware": 36, "arch": 28, "hyper": 15, "quality": 21, "tags": 1}


def _kind_of(annotation: object) -> str:
    """``"int | None"`` → ``"int"`` (the dataclasses' annotations are strings)."""
    return str(annotation).split("|")[0].strip()


# ------------------------------------------------------------------------ the registry
def test_kinds_are_unchanged_in_frame_order() -> None:
    expected = dict(item.split(":") for item in SNAPSHOT.split())
    assert list(KINDS.items()) == list(expected.items())
    assert tuple(expected) == columns.CANONICAL_COLUMNS


def test_every_column_is_declared_once_with_a_known_kind_and_group() -> None:
    assert len({c.name for c in COLUMNS}) == len(COLUMNS)
    assert {c.kind for c in COLUMNS} == {"int", "float", "bool", "str", "dict"}
    sizes = {g: len(names(group=g)) for g in GROUP_SIZES}
    assert sizes == GROUP_SIZES
    assert sum(sizes.values()) == len(COLUMNS)
    # Frame order: the groups follow one another, never interleave.
    order = [c.group for c in COLUMNS]
    assert order == sorted(order, key=list(GROUP_SIZES).index)


def test_columns_are_frozen_records() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        COLUMNS[0].name = "other"  # type: ignore[misc]
    assert Column("x", "int", "hyper", "run") == Column("x", "int", "hyper", "run")


def test_group_tuples_and_constants() -> None:
    assert columns.BASE_COLUMNS[: len(columns.FIRST_COLUMNS)] == columns.FIRST_COLUMNS
    assert columns.FIRST_COLUMNS == ("run_id", "network", "batch_size", "iterations", "time_s",
                                     "status", "gpu", "gpu_count")
    assert columns.CANONICAL_COLUMNS == (
        columns.BASE_COLUMNS + columns.HARDWARE_COLUMNS + columns.ARCH_COLUMNS
        + columns.HYPER_COLUMNS + columns.QUALITY_COLUMNS + ("tags",))
    assert {"run_id", "iterations", "gpu_count"} == columns.NOT_NULL_INT
    assert columns.STATUSES == ("ok", "failed", "interrupted")
    assert columns.HARDWARE_PREFIXES == ("gpu_", "cpu_", "sw_")
    assert all(c.startswith(columns.HARDWARE_PREFIXES) for c in columns.HARDWARE_COLUMNS)
    assert all(c.startswith("arch_") for c in columns.ARCH_COLUMNS)


def test_names_filters_by_group_and_producer_in_frame_order() -> None:
    assert names() == columns.CANONICAL_COLUMNS
    assert names(group="arch", producer="capture.context") == (
        "arch_tf32_matmul", "arch_tf32_conv")
    assert names(producer="no such producer") == ()
    assert names(group="hardware") == (names(producer="hardware.gpu")
                                       + names(producer="hardware.cpu")
                                       + names(producer="hardware.software"))
    assert names(group="arch") == (names(producer="architecture")
                                   + names(producer="capture.context"))


@pytest.mark.parametrize(("column", "group"), [
    *[(name, "base") for name in ("network", "batch_size", "run_uid", "peak_memory_gb")],
    ("run_id", "ignore"), ("hardware_id", "ignore"),
    ("gpu_name", "hardware"), ("cpu_mhz", "hardware"), ("sw_torch", "hardware"),
    ("gpu_anything_new", "hardware"), ("arch_tf32_conv", "arch"), ("arch_new", "arch"),
    ("optimizer", "hyper"), ("drop_last", "hyper"), ("world_size", "quality"),
    ("raised_steps", "quality"), ("tags", "tags"), ("depth", "other"), ("features", "other"),
    ("gpu", "base"), ("id", "other"), ("", "other"),
])
def test_group_of_keeps_its_meaning(column: str, group: str) -> None:
    assert group_of(column) == group


def test_group_of_agrees_with_each_columns_group() -> None:
    for c in COLUMNS:
        assert group_of(c.name) == ("ignore" if c.name == "run_id" else c.group), c.name


# ---------------------------------------------------------------------- the producers
def test_gpu_info_fields_are_the_registry_rows() -> None:
    from gpuperf_magics.hardware.gpu import GPU_FEATURES, GpuInfo

    fields = [f for f in dataclasses.fields(GpuInfo) if f.name not in ("index", "nvml_index")]
    rows = [c for c in COLUMNS if c.producer == "hardware.gpu"]
    assert [f"gpu_{f.name}" for f in fields] == [c.name for c in rows]
    assert [_kind_of(f.type) for f in fields] == [c.kind for c in rows]
    assert names(producer="hardware.gpu") == GPU_FEATURES


def test_cpu_info_fields_are_the_registry_rows() -> None:
    from gpuperf_magics.hardware.cpu import CPU_FEATURES, CpuInfo

    fields = dataclasses.fields(CpuInfo)
    rows = [c for c in COLUMNS if c.producer == "hardware.cpu"]
    assert [f"cpu_{f.name}" for f in fields] == [c.name for c in rows]
    assert [_kind_of(f.type) for f in fields] == [c.kind for c in rows]
    assert names(producer="hardware.cpu") == CPU_FEATURES


def test_software_info_fields_are_the_registry_rows() -> None:
    from gpuperf_magics.hardware import SW_FEATURES, SoftwareInfo

    fields = dataclasses.fields(SoftwareInfo)
    rows = [c for c in COLUMNS if c.producer == "hardware.software"]
    assert [f"sw_{f.name}" for f in fields] == [c.name for c in rows]
    assert [_kind_of(f.type) for f in fields] == [c.kind for c in rows]
    assert names(producer="hardware.software") == SW_FEATURES


def test_architecture_features_are_the_registry_rows() -> None:
    from gpuperf_magics.architecture.result import Architecture

    features = Architecture(class_name="Net").as_features()
    assert tuple(features) == names(producer="architecture")
    assert set(features) <= set(columns.ARCH_COLUMNS)
    types = {f.name: _kind_of(f.type) for f in dataclasses.fields(Architecture)}
    for c in COLUMNS:
        if c.producer == "architecture":
            field = "class_name" if c.name == "arch_class" else c.name.removeprefix("arch_")
            assert types[field] == c.kind, c.name


def test_tf32_flags_are_the_registry_rows() -> None:
    from gpuperf_magics.capture.context import _tf32_flags

    flags = _tf32_flags()
    assert tuple(flags) == names(producer="capture.context")
    assert all(v is None or isinstance(v, bool) for v in flags.values())


def test_each_capture_producer_is_the_module_that_fills_its_columns() -> None:
    """A ``capture.*`` label names a module of the capture package whose source names each of
    its columns (``capture.context`` reads the TF32 flags' names from the registry itself, so
    they are checked against its ``_tf32_flags`` above)."""
    import importlib.util
    import re
    from pathlib import Path

    producers = {c.producer for c in COLUMNS
                 if c.producer.startswith("capture.") and c.producer != "capture.context"}
    assert producers
    for producer in sorted(producers):
        spec = importlib.util.find_spec(f"gpuperf_magics.{producer}")
        assert spec is not None and spec.origin is not None, producer
        source = Path(spec.origin).read_text(encoding="utf-8")
        unnamed = [name for name in names(producer=producer)
                   if not re.search(rf"\b{name}\b", source)]
        assert not unnamed, (producer, unnamed)


def test_a_captured_cpu_run_writes_only_canonical_keys(profile_mlp, tmp_path) -> None:
    from gpuperf_magics.store import Store

    store = tmp_path / "runs.sqlite"
    profile_mlp(store, [16], steps=6)
    run = Store(store).get_run(1)
    record = run.to_record()
    groups = {"hardware": "hardware", "arch": "arch", "hyper": "hyper", "quality": "quality"}
    for key, group in groups.items():
        assert record[key], key
        assert {group_of(name) for name in record[key]} == {group}, key
        assert set(record[key]) <= set(KINDS), key
    flat = {k for k, v in record.items() if not isinstance(v, dict)}
    assert flat <= set(names(group="base")), flat - set(names(group="base"))


# ------------------------------------------------------------------ store and model
def test_every_flat_runs_column_is_a_base_column(tmp_path) -> None:
    from gpuperf_magics.store import Store
    from gpuperf_magics.store.rows import JSON_COLUMNS

    path = tmp_path / "runs.sqlite"
    Store(path).migrate()  # reading a missing store creates nothing; migrating makes the schema
    with sqlite3.connect(path) as conn:
        sql = [row[1] for row in conn.execute("PRAGMA table_info(runs)")]
    flat = {{"id": "run_id"}.get(c, c) for c in sql
            if c not in JSON_COLUMNS and c != "hardware_id"}
    assert sql, "the runs table was not created"
    assert flat == set(columns.BASE_COLUMNS), flat ^ set(columns.BASE_COLUMNS)


def test_positive_figures_are_the_importers() -> None:
    from gpuperf_magics.store.importer import POSITIVE

    hardware = {c.name for c in COLUMNS if c.positive and c.group == "hardware"}
    assert hardware == POSITIVE
    assert {c.name for c in COLUMNS if c.positive and c.group != "hardware"} == {"batch_size"}


def test_feature_flag_is_what_the_model_uses() -> None:
    from gpuperf_magics.model.inputs import _is_feature_column

    example = {"int": 2, "float": 1.5, "bool": True, "str": "x", "dict": {}}
    for c in COLUMNS:
        frame = pd.DataFrame({c.name: [example[c.kind]]})
        assert _is_feature_column(frame, c.name, ()) == c.feature, c.name
