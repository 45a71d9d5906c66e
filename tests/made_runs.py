"""Runs with made-up but consistent numbers, as the capture layer or an import builds them,
for the tests of the store, the importer and the what-if panel."""

from __future__ import annotations

import gpuperf_magics as gm

#: The hardware of :func:`make_run`: a CPU machine.
HARDWARE = {
    "gpu_name": None,
    "cpu_model": "Intel Xeon",
    "cpu_physical_cores": 2,
    "cpu_threads": 1,
    "cpu_memory_gb": 7.7,
    "sw_python": "3.11.7",
    "sw_torch": "2.13.0",
    "sw_cuda": None,
}


def make_run(
    network: str = "mlp",
    *,
    n: int = 6,
    warmup: int = 2,
    batch: int | None = 32,
    status: str = "ok",
    hardware: dict | None = None,
    **fields,
) -> gm.Run:
    """A run as the capture layer builds it, with made-up but consistent numbers."""
    from gpuperf_magics.run import IterationRecord, Run

    iterations = [
        IterationRecord(
            index=i,
            duration_s=0.01 * (i + 1),
            samples=batch,
            warmup=i < warmup,
            phases={"forward": 0.002, "backward": 0.004} if i % 2 else None,
            skipped_step=(i == n - 1),
            micro_batches=2 if i else None,
        )
        for i in range(n)
    ]
    defaults = {
        "hardware": dict(HARDWARE) if hardware is None else hardware,
        "architecture": {"arch_params": 6922, "arch_layers_linear": 3, "arch_amp": False,
                         "arch_flops_fwd": 13600.0, "arch_class": "MLP"},
        "hyper": {"optimizer": "SGD", "lr": 0.1, "micro_batches": 1},
        "quality": {"torch_threads": 1, "busy": False, "timing_method": "perf_counter"},
        "tags": {"experiment": "a"},
        "features": {"depth": 3.0},
        "notes": ["machine was idle"],
    }
    defaults.update(fields)
    return Run(network=network, status=status, iterations=iterations, batch_size=batch,
               **defaults)


def make_gpu_run(network: str = "resnet", batch: int = 64, **fields) -> gm.Run:
    """A run on one A100 with every group filled, for exports and imports."""
    from gpuperf_magics.run import IterationRecord, Run

    iterations = [IterationRecord(i, 0.05 + 0.001 * i, batch, warmup=i == 0) for i in range(5)]
    defaults = {
        "gpu": "NVIDIA A100-SXM4-40GB",
        "gpu_count": 1,
        "device": "cuda:0",
        "hardware": {
            "gpu_name": "NVIDIA A100-SXM4-40GB", "gpu_memory_gb": 40.0, "gpu_sm_count": 108,
            "gpu_driver": "535.10", "gpu_mig": False, "cpu_model": "AMD EPYC 7742",
            "cpu_threads": 8, "sw_cuda": "12.1", "sw_torch": "2.13.0",
        },
        "architecture": {"arch_params": 11_689_512, "arch_flops_fwd": 3.6e9,
                         "arch_input_shape": "3x224x224", "arch_channels_last": True},
        "hyper": {"optimizer": "AdamW", "lr": 0.001, "epochs": 2},
        "quality": {"torch_threads": 8, "busy": False, "load_avg_start": 0.5},
        "tags": {"owner": "ann"},
        "features": {"image_size": 224.0},
    }
    defaults.update(fields)
    return Run(network=network, iterations=iterations, batch_size=batch, **defaults)


def per_step_times(network: str, **columns: object):
    """Per-iteration times of an imported trace: no iterations column, no dataset size."""
    import pandas as pd

    batches = [16, 32, 64, 128]
    return pd.DataFrame({"network": network, "batch_size": batches,
                         "time_s": [0.01 + 0.001 * b for b in batches], **columns})
