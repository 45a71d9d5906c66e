"""A first-order estimate for a GPU when a network was only measured on the CPU.

Nothing measured on any GPU ties the network to GPU time, so the estimate is physical. A
training iteration in eager PyTorch is issued by the CPU one operator at a time while the GPU
runs the kernels asynchronously, so it takes the longer of two times:

- the GPU's work: the FLOPs of one iteration (``arch_flops_fwd_bwd`` per sample × batch,
  counted by the profiler) at a fraction :data:`EFFICIENCY` of the GPU's peak. Whole CNNs and
  transformers reach 15-90 % of peak (shared/notes/method.md); half of the FP32 peak (of the
  FP16 tensor peak × :data:`AMP_EFFICIENCY` with AMP) is the middle of that range;
- the host's issue time, which no faster GPU removes: every operator costs Python, the
  dispatcher, autograd's bookkeeping and a kernel launch. Published figures: about 7 µs per
  simple operator with autograd on, 5 µs without, before any launch
  (https://github.com/pytorch/pytorch/issues/41383); a CUDA launch typically 5-20 µs
  (https://devbytes.co.in/news/reducing-cuda-kernel-launch-overhead), about 20 µs end to end for
  a PyTorch element-wise kernel on a V100 in NVIDIA's Nsight Systems guide (quoted in
  https://groundy.com/articles/every-cuda-kernel-pays-a-launch-tax-the-host-to-device-walkthrough/);
  a cost model fitted on H100s gives every operator at least 7 µs
  (https://github.com/meta-pytorch/autoparallel/pull/146); the CPU time dominates small models
  on the GPU (https://github.com/pytorch/pytorch/issues/72746: 0.1 ms for a small forward pass
  whatever the batch). Hence :data:`FORWARD_OP_S` for an operator issued from Python (the
  forward pass, the loss, the copies of the batch), :data:`BACKWARD_OP_S` for one the C++
  autograd engine issues (no Python), and :data:`LAUNCH_S` per kernel a fused
  ``torch._foreach_*`` optimizer operator launches.

What an iteration launches is counted from the figures the run holds (:func:`iteration_ops`):
its layers by kind (forward and backward kernels of each, :data:`LAYER_OPS`), the loss and the
batch's copies (:data:`ITERATION_OPS`), and the optimizer step: on CUDA PyTorch uses the
``foreach`` implementation unless told otherwise ("we will try to use foreach over the for-loop
implementation on CUDA", ``torch.optim`` docs), a few list operators per step
(:data:`OPTIMIZER_FOREACH_OPS`), each launching one kernel per :data:`FOREACH_TENSORS`
parameter tensors (``depth_to_max_tensors = {110, 64, 48, 36, 30}`` in ATen's
``MultiTensorApply.cuh``).

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
#: Host seconds per operator issued from Python: ~7 µs of Python, dispatch and autograd
#: (pytorch#41383) and ~5 µs to launch its kernel.
FORWARD_OP_S = 12e-6
#: Host seconds per backward kernel, issued by the C++ autograd engine (no Python): dispatch and
#: launch, the 7 µs floor per operator of the H100 cost model (autoparallel#146).
BACKWARD_OP_S = 7e-6
#: Host seconds per kernel launch (the lower end of the 5-20 µs quoted).
LAUNCH_S = 5e-6
#: Kernels launched in the forward pass, in the backward pass, and parameter tensors, per layer
#: of each kind ``arch_layers_*`` counts. conv: convolution and bias add; data, weight and
#: bias gradients. linear: one ``addmm``; two ``mm`` and a sum. norm: batch norm and the
#: ``num_batches_tracked`` increment; its backward and the affine gradients. attention
#: (``nn.MultiheadAttention``): the input projection, reshapes, scaled dot-product attention
#: and output projection. recurrent: a cuDNN RNN call per layer. embedding: a gather, and a
#: sort-and-sum backward.
LAYER_OPS = {
    "conv": (2, 3, 2), "linear": (1, 3, 2), "norm": (2, 2, 2), "attention": (8, 14, 4),
    "recurrent": (2, 3, 4), "embedding": (1, 3, 1), "activation": (1, 1, 0),
    "pool": (1, 1, 0), "dropout": (1, 1, 0), "other": (1, 2, 0),
}
#: Operators per iteration beyond the layers: forward side (the batch's two copies to the GPU,
#: the loss's ``log_softmax`` and ``nll_loss``), backward side (the loss's two gradients).
ITERATION_OPS = (4, 2)
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
    return max(int(number), 0) if number is not None else 0


def iteration_ops(architecture: dict[str, Any]) -> dict[str, int]:
    """What one training iteration launches, from a run's ``arch_*`` figures (and
    ``optimizer``, the optimizer's class name).

    Returns
    -------
    dict
        ``forward`` (operators issued from Python: layers, loss, the batch's copies),
        ``backward`` (kernels of the backward pass), ``tensors`` (parameter tensors),
        ``optimizer_ops`` (foreach operators of one step) and ``optimizer_kernels`` (the
        kernels they launch). Layers the run does not split by kind (only
        ``arch_layers_total``) count as "other".
    """
    counts = {kind: _count(architecture, f"arch_layers_{kind}") for kind in LAYER_OPS}
    unsplit = _count(architecture, "arch_layers_total") - sum(counts.values())
    counts["other"] += max(unsplit, 0)
    forward = ITERATION_OPS[0] + sum(LAYER_OPS[k][0] * n for k, n in counts.items())
    backward = ITERATION_OPS[1] + sum(LAYER_OPS[k][1] * n for k, n in counts.items())
    tensors = sum(LAYER_OPS[k][2] * n for k, n in counts.items())
    name = architecture.get("optimizer")
    ops = OPTIMIZER_FOREACH_OPS.get(str(name), OTHER_OPTIMIZER_OPS) if tensors else 0
    kernels = ops * math.ceil(tensors / FOREACH_TENSORS)
    return {"forward": forward, "backward": backward, "tensors": tensors,
            "optimizer_ops": ops, "optimizer_kernels": kernels}


def host_seconds(architecture: dict[str, Any]) -> float:
    """Seconds the host takes to issue one iteration (see the module docstring)."""
    ops = iteration_ops(architecture)
    return (ops["forward"] * FORWARD_OP_S + ops["backward"] * BACKWARD_OP_S
            + ops["optimizer_ops"] * FORWARD_OP_S + ops["optimizer_kernels"] * LAUNCH_S)


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
