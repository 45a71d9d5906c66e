"""A first-order estimate for a GPU when a network was only measured on the CPU.

Nothing measured on any GPU ties the network to GPU time, so the estimate is physical: the
FLOPs of one iteration (``arch_flops_fwd_bwd`` per sample × batch, counted by the profiler) at a
fraction :data:`EFFICIENCY` of the GPU's peak, plus a launch floor per layer. Whole CNNs and
transformers reach 15-90 % of peak (shared/notes/method.md); half of the FP32 peak (of the FP16
tensor peak × :data:`AMP_EFFICIENCY` with AMP) is the middle of that range. Hence the large
:data:`EXPECTED_MAPE`: it is an order of magnitude to plan with, labelled as such, and one
profiled run on any GPU replaces it with a measured transfer.
"""

from __future__ import annotations

from typing import Any

#: Fraction of the FP32 peak a training iteration reaches (middle of the 15-90 % range).
EFFICIENCY = 0.5
#: Fraction of the dense FP16 tensor-core peak reached with AMP.
AMP_EFFICIENCY = 0.25
#: Seconds per layer and iteration that do not shrink with a faster GPU: a forward and two
#: backward kernel launches of ~5 µs each.
LAUNCH_FLOOR_S = 15e-6
#: The error to expect from this estimate (fraction): a guess bounded by the efficiency range,
#: not a measured figure; shown with every such prediction.
EXPECTED_MAPE = 0.5


def cpu_to_gpu_seconds(
    architecture: dict[str, Any], gpu: dict[str, Any], batch_size: int, gpu_count: int = 1
) -> float | None:
    """Seconds per iteration on ``gpu`` (catalog features) for a network seen on the CPU.

    Parameters
    ----------
    architecture : dict
        ``arch_*`` features of a profiled run (``arch_flops_fwd_bwd`` per sample,
        ``arch_layers_total``, ``arch_amp``).
    gpu : dict
        ``gpu_*`` features from :func:`gpuperf_magics.hardware.catalog.lookup`.
    batch_size : int
        Samples per iteration, all GPUs together.
    gpu_count : int
        GPUs sharing the batch (data parallel; communication is not modelled).

    Returns
    -------
    float or None
        None when the FLOPs or the GPU's peak are unknown.
    """
    flops = architecture.get("arch_flops_fwd_bwd")
    if not flops or flops != flops:
        return None
    amp = bool(architecture.get("arch_amp"))
    peak = gpu.get("gpu_fp16_tflops") if amp else None
    efficiency = AMP_EFFICIENCY if peak else EFFICIENCY
    peak = peak or gpu.get("gpu_fp32_tflops")
    if not peak:
        return None
    layers = architecture.get("arch_layers_total") or 0
    layers = 0 if layers != layers else int(layers)
    per_gpu = batch_size / max(gpu_count, 1)
    return per_gpu * float(flops) / (efficiency * float(peak) * 1e12) + layers * LAUNCH_FLOOR_S
