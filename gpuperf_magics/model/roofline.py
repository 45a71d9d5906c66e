"""A first-order estimate for a GPU when a network was only measured on the CPU.

Nothing measured on any GPU ties the network to GPU time, so the estimate is physical. A
training iteration in eager PyTorch is issued by the CPU one operator at a time while the GPU
runs the kernels asynchronously, so it takes the longer of two times:

- the GPU's work: the FLOPs of one iteration (``arch_flops_fwd_bwd`` per sample × batch,
  counted by the profiler) at a fraction :data:`EFFICIENCY` of the GPU's peak. Whole CNNs and
  transformers reach 15-90 % of peak (shared/notes/method.md); half of the FP32 peak (of the
  FP16 tensor peak × :data:`AMP_EFFICIENCY` with AMP) is the middle of that range;
- the host's issue time, which no faster GPU removes: every kernel an iteration launches costs
  the host Python, ``nn.Module`` calls, the dispatcher, autograd's bookkeeping and the launch
  itself. Published figures count a bare operator: about 7 µs with autograd on
  (https://github.com/pytorch/pytorch/issues/41383), a CUDA launch 5-20 µs, at least 7 µs per
  operator in a cost model fitted on H100s (https://github.com/meta-pytorch/autoparallel/pull/146).
  A whole training iteration costs several times that per kernel: on an H200 host (16-core
  Xeon, torch 2.11, ``benchmarks/gpu_host_floor.py``, 2026-12-04) five host-bound networks
  took 39-62 µs per launched kernel (median 43), while a bare ``x * 1.0001`` took 10.9 µs
  there. Hence :data:`HOST_KERNEL_S` per kernel.

What an iteration launches (:func:`iteration_ops`) is counted in the FLOPs trace where the run
has it (``arch_kernels``, :mod:`gpuperf_magics.architecture.kernels`: every operator of the
forward and backward passes), plus the loss and the batch's copies
(:data:`ITERATION_KERNELS`) and the optimizer step: on CUDA PyTorch uses the ``foreach``
implementation unless told otherwise ("we will try to use foreach over the for-loop
implementation on CUDA", ``torch.optim`` docs), a few list operators per step
(:data:`OPTIMIZER_FOREACH_OPS`), each launching one kernel per :data:`FOREACH_TENSORS`
parameter tensors (``depth_to_max_tensors = {110, 64, 48, 36, 30}`` in ATen's
``MultiTensorApply.cuh``). Runs recorded before that count estimate it from their layers by kind
(:data:`LAYER_KERNELS`).

The error is large (:data:`EXPECTED_MAPE`): an order of magnitude to plan with, labelled as
such; one profiled run on any GPU replaces it with a measured transfer.
"""

from __future__ import annotations

import math
from typing import Any

#: Fraction of the FP32 peak a training iteration reaches (middle of the 15-90 % range).
EFFICIENCY = 0.5
#: Fraction of the dense FP16 tensor-core peak reached with AMP.
AMP_EFFICIENCY = 0.25
#: Host seconds per kernel a training iteration launches, all the host does for it included
#: (module docstring): the median over five networks on an H200 host (43 µs), rounded.
HOST_KERNEL_S = 40e-6
#: Host time per iteration under autocast (AMP, bf16 or fp16) over the same iteration in FP32
#: or TF32: its casts and its dispatch. The median of 36 pairs of host-bound runs of the
#: CPU→GPU zoo on an H200 (1.29; quartiles 1.16 and 1.45; ``benchmarks/precision_moves.py``),
#: rounded.
AMP_HOST_FACTOR = 1.3
#: Kernels per iteration beyond the model's forward and backward: the batch's two copies to the
#: GPU, the loss (``log_softmax``, ``nll_loss``) and its two gradients.
ITERATION_KERNELS = 6
#: For runs without ``arch_kernels``: kernels of the forward and backward pass and parameter
#: tensors per layer of each kind ``arch_layers_*`` counts, as the trace counts them
#: (:mod:`gpuperf_magics.architecture.kernels`). conv: convolution and bias (3 with cuDNN's
#: layout work), data, weight and bias gradients (5). linear: one ``addmm``; two ``mm`` and a
#: sum. norm: batch norm and the ``num_batches_tracked`` increment; its backward. attention
#: (``nn.MultiheadAttention``): projections, reshapes, attention and their gradients. recurrent:
#: the cuDNN calls of a layer (:data:`~gpuperf_magics.architecture.kernels.RNN_LAYER_KERNELS`).
#: embedding: a gather, and a sort-and-sum backward.
LAYER_KERNELS = {
    "conv": (8, 2), "linear": (4, 2), "norm": (3, 2), "attention": (22, 4),
    "recurrent": (24, 4), "embedding": (4, 1), "activation": (2, 0),
    "pool": (2, 0), "dropout": (2, 0), "other": (3, 0),
}
#: ``torch._foreach_*`` operators of one step of each optimizer's foreach implementation (SGD
#: with momentum: the buffers' update and the parameters'; Adam: moments, bias corrections,
#: the square root, division and update); others: :data:`OTHER_OPTIMIZER_OPS`.
OPTIMIZER_FOREACH_OPS = {"SGD": 3, "Adam": 10, "AdamW": 11, "RMSprop": 6, "Adagrad": 5,
                         "Adadelta": 7, "Adamax": 8, "NAdam": 12, "RAdam": 12}
OTHER_OPTIMIZER_OPS = 8
#: Parameter tensors one foreach kernel takes (ATen's limit for three tensor lists).
FOREACH_TENSORS = 48
#: The error to expect from this estimate (fraction): a guess bounded by the efficiency range,
#: not a measured figure; shown with every such prediction.
EXPECTED_MAPE = 0.5


def _number(value: Any) -> float | None:
    """``value`` as a float; None where it is missing (None, NaN, pandas' NA, a string)."""
    if isinstance(value, str):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):  # None, pd.NA
        return None
    return number if number == number else None


def _count(architecture: dict[str, Any], key: str) -> int:
    """A layer count of ``architecture``; 0 where it is missing (None, NaN, pandas' NA, a
    string: a store's column read back for a run that did not record it)."""
    number = _number(architecture.get(key))
    return max(int(number), 0) if number is not None and math.isfinite(number) else 0


def iteration_ops(architecture: dict[str, Any]) -> dict[str, int]:
    """What one training iteration launches, from a run's ``arch_*`` figures (and
    ``optimizer``, the optimizer's class name).

    Returns
    -------
    dict
        ``model`` (kernels of the forward and backward pass: ``arch_kernels`` where the run
        counted them, else from its layers by kind), ``iteration`` (the loss and the batch's
        copies), ``tensors`` (parameter tensors), ``optimizer_ops`` (foreach operators of one
        step), ``optimizer_kernels`` (the kernels they launch) and ``kernels`` (all of them).
        Layers the run does not split by kind (only ``arch_layers_total``) count as "other".
    """
    counts = {kind: _count(architecture, f"arch_layers_{kind}") for kind in LAYER_KERNELS}
    unsplit = _count(architecture, "arch_layers_total") - sum(counts.values())
    counts["other"] += max(unsplit, 0)
    traced = _number(architecture.get("arch_kernels"))
    model = (int(traced) if traced is not None and 0 <= traced < math.inf
             else sum(LAYER_KERNELS[k][0] * n for k, n in counts.items()))
    tensors = _count(architecture, "arch_param_tensors") or sum(
        LAYER_KERNELS[k][1] * n for k, n in counts.items())
    name = architecture.get("optimizer")
    ops = OPTIMIZER_FOREACH_OPS.get(str(name), OTHER_OPTIMIZER_OPS) if tensors else 0
    kernels = ops * math.ceil(tensors / FOREACH_TENSORS)
    return {"model": model, "iteration": ITERATION_KERNELS, "tensors": tensors,
            "optimizer_ops": ops, "optimizer_kernels": kernels,
            "kernels": model + ITERATION_KERNELS + kernels}


def host_seconds(architecture: dict[str, Any]) -> float:
    """Seconds the host takes to issue one iteration: :data:`HOST_KERNEL_S` per kernel it
    launches (see the module docstring), :data:`AMP_HOST_FACTOR` times that under autocast
    (``arch_amp``)."""
    amp = bool(_number(architecture.get("arch_amp")))
    return iteration_ops(architecture)["kernels"] * HOST_KERNEL_S * (
        AMP_HOST_FACTOR if amp else 1.0)


def gpu_work_seconds(
    architecture: dict[str, Any], gpu: dict[str, Any], batch_size: int, gpu_count: int = 1
) -> float | None:
    """Seconds one GPU computes per iteration: its share of the batch's FLOPs at a fraction
    of the GPU's peak (the FP16 peak for AMP runs where the catalog has one); None when the
    FLOPs or the peak are unknown. Below :func:`host_seconds` the iteration is host-bound."""
    flops = _number(architecture.get("arch_flops_fwd_bwd"))
    if not flops:
        return None
    amp = bool(_number(architecture.get("arch_amp")))
    peak = gpu.get("gpu_fp16_tflops") if amp else None
    efficiency = AMP_EFFICIENCY if peak else EFFICIENCY
    peak = peak or gpu.get("gpu_fp32_tflops")
    if not peak:
        return None
    n = max(int(gpu_count), 1)
    return batch_size / n * float(flops) / (efficiency * float(peak) * 1e12)


def cpu_to_gpu_seconds(
    architecture: dict[str, Any], gpu: dict[str, Any], batch_size: int, gpu_count: int = 1
) -> float | None:
    """Seconds per iteration on ``gpu`` (catalog features) for a network seen on the CPU.

    Parameters
    ----------
    architecture : dict
        ``arch_*`` features of a profiled run (``arch_flops_fwd_bwd`` per sample, the
        ``arch_layers_*`` counts, ``arch_params``, ``arch_amp``) and its ``optimizer``.
    gpu : dict
        ``gpu_*`` features from :func:`gpuperf_magics.hardware.catalog.lookup`.
    batch_size : int
        Samples per iteration, all GPUs together.
    gpu_count : int
        GPUs sharing the batch (data parallel: each GPU's step plus the gradients' all-reduce,
        :mod:`~.data_parallel`).

    Returns
    -------
    float or None
        ``max(GPU work, host issue time)`` plus the all-reduce the backward pass does not hide;
        None when the FLOPs or the GPU's peak are unknown.
    """
    work = gpu_work_seconds(architecture, gpu, batch_size, gpu_count)
    if work is None:
        return None
    n = max(int(gpu_count), 1)
    step = max(work, host_seconds(architecture))
    params = _number(architecture.get("arch_params"))
    if n == 1 or not params:
        return step
    from gpuperf_magics.model.data_parallel import interconnect, step_seconds

    link = interconnect(gpu.get("gpu_name"), None, gpu.get("gpu_architecture"))
    return step_seconds(step, float(params), n, link, architecture.get("arch_dtype"))
