"""What a run ran on and what it ran: hardware, architecture and the settings around them.

Filled after the loop, off the timed path; a figure that cannot be read becomes a note on the
run, never an error (the timings matter more).
"""

from __future__ import annotations

import logging
from typing import Any

from gpuperf_magics.columns import names
from gpuperf_magics.run import Run

_log = logging.getLogger(__name__)


def fill_model(run: Run, rec: Any) -> None:
    """The run's ``arch_*`` columns: the model described, and the TF32 settings."""
    model = rec.model
    if rec.eval_mode_training:
        run.notes.append("the model trained in eval() mode (dropout off, batch-norm "
                         "statistics frozen): its calls gave the batch size; call "
                         "model.train() before the loop unless that was meant")
    if run.batch_size is None:
        run.notes.append(
            "no batch size: the model was never called in train() mode with gradients on "
            "during the loop (call model.train() before it); predictions need one"
        )
    if model is None:
        return
    try:
        from gpuperf_magics.architecture import describe

        args, kwargs = rec.example or ((), {})
        arch = describe(model, args, kwargs, batch_size=None, amp=rec.autocast)
        run.architecture = arch.as_features()
    except Exception as exc:  # never lose the timings over a model we cannot describe
        _log.warning("architecture not described", exc_info=True)
        run.notes.append(f"architecture not described: {type(exc).__name__}: {exc}")
    rec.example = None  # release the user's tensors
    run.architecture.update(_tf32_flags())


def fill_hardware(run: Run, rec: Any, job_gpus: int | None) -> None:
    """The run's ``gpu_*``/``cpu_*``/``sw_*`` columns, its device and GPU count
    (``job_gpus``: the devices of a whole data-parallel job, from the merge)."""
    from gpuperf_magics.capture.probes import device_of

    device = device_of(rec.model)
    try:
        from gpuperf_magics.hardware import detect

        hw = detect(device)
        run.hardware = _with_catalog_specs(hw.as_features())
    except Exception as exc:  # the timings stand without the hardware's figures
        _log.warning("hardware not detected", exc_info=True)
        run.notes.append(f"hardware not detected: {type(exc).__name__}: {exc}")
    if device is not None and device.type == "cuda":
        run.device = str(device)
        run.gpu = run.hardware.get("gpu_name")
        run.gpu_count = gpu_count(rec.model)
    else:
        run.device = "cpu" if device is None else str(device)
        run.gpu, run.gpu_count = None, 0
    if job_gpus is not None:
        run.gpu_count = job_gpus


def _with_catalog_specs(features: dict[str, Any]) -> dict[str, Any]:
    """Fill what the device cannot report (tensor-core peaks, release year) from the catalog."""
    name = features.get("gpu_name")
    if not name:
        return features
    from gpuperf_magics.hardware.catalog import find

    spec = find(name)
    if spec is None:
        return features
    for key, value in spec.items():
        if key.startswith("gpu_") and key != "gpu_name" and features.get(key) is None:
            features[key] = value
    return features


def gpu_count(model: Any) -> int:
    """GPUs one process of ``model`` drives: a DataParallel's devices, else one."""
    from torch import nn

    if isinstance(model, nn.DataParallel):
        return len(model.device_ids or []) or 1
    # A DistributedDataParallel rank drives one device; the job's count comes from the ranks.
    return 1


def _tf32_flags() -> dict[str, bool | None]:
    """Whether FP32 matrix multiplies and cuDNN convolutions could use TF32 tensor cores
    (Ampere and later): what peak a GPU move should follow (``model.inputs.precision_of``).
    None where torch cannot say; never an error (the run matters more than this flag)."""
    import torch

    backends = torch.backends
    matmul, conv = names(producer="capture.context")
    return {
        matmul: _tf32_allowed(
            lambda: backends.cuda.matmul.allow_tf32,
            [backends.cuda.matmul, backends.cuda, backends]),
        conv: _tf32_allowed(
            lambda: backends.cudnn.allow_tf32,
            [getattr(backends.cudnn, "conv", None), backends.cudnn, backends]),
    }


def _tf32_allowed(legacy: Any, scopes: list[Any]) -> bool | None:
    """The legacy ``allow_tf32`` flag, else torch >= 2.9's ``fp32_precision`` ("tf32",
    "ieee", or "none" = as the enclosing scope says), which the legacy read refuses once set."""
    try:
        return bool(legacy())
    except Exception:  # a RuntimeError when the new API was used
        _log.debug("legacy allow_tf32 unreadable; reading fp32_precision", exc_info=True)
    for scope in scopes:
        value = getattr(scope, "fp32_precision", None)
        if isinstance(value, str) and value != "none":
            return value == "tf32"
    return None


def model_name(model: Any) -> str:
    """The network name of a run of ``model`` without ``--name``: :func:`default_name` of
    the network inside its ``torch.compile`` and DataParallel wrappers."""
    from gpuperf_magics.architecture.unwrap import unwrap

    inner = unwrap(model).module
    return default_name(type(inner).__name__, sum(p.numel() for p in inner.parameters()))


def default_name(class_name: str, params: int | None) -> str:
    """The network name of a run without ``--name``: the model's class and its size.

    The class alone is ambiguous (every ``nn.Sequential`` is "Sequential", torchvision's
    ResNet-18 and ResNet-50 are both "ResNet"), and runs of one name are learnt as one network,
    so the parameter count is part of the name: ``"ResNet-11.7M"``, ``"Sequential-36"``.
    """
    if not params:
        return class_name
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if params >= scale * 0.9995:  # 999,600 rounds to "1M", not "1e+03K"
            return f"{class_name}-{params / scale:.3g}{suffix}"
    return f"{class_name}-{params}"


def no_iteration_reason(rec: Any, status: str, error: BaseException | None = None) -> str:
    """The note of a run without iterations: why none was found, and what to do."""
    if isinstance(error, SyntaxError):
        return f"the cell did not run ({type(error).__name__}); nothing was stored"
    if rec.workers:
        names = ", ".join(dict.fromkeys(rec.workers))
        fn = rec.workers[0].split(".")[-1]
        return (
            f"the training ran in {len(rec.workers)} worker process"
            f"{'es' if len(rec.workers) > 1 else ''} this cell started ({names}), where the "
            "profiler cannot see it; nothing was stored. Profile inside the worker: put "
            f"`with gpuperf_magics.profile_training():` around the loop in {fn}() (each rank "
            "profiles, rank 0 saves one run for the job)"
        )
    where = " before the first iteration ended" if status != "ok" else ""
    return (
        f"no training iteration detected{where}: no torch.optim optimizer stepped, no backward "
        "pass ended and no module was called twice in training mode. Put the training loop "
        "itself in the cell (model in train() mode, optimizer.step() inside); nothing was stored."
    )
